import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Coordinator } from '@fenced/coordinator';
import { CoordinatorClient } from '@fenced/coordinator/client';
import { PROOF_PATTERN, leaseIdDigest, verifyProof, type LeaseResponseBody } from '@fenced/shared';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { ResponseValidator } from '../../fixtures/response-validator.js';
import { lockPath, startTestService, unique, type TestService } from '../../fixtures/service-fixture.js';

// Signed leases (DESIGN §4b) from the library, the service and the typed client, on real Redis.
describe('signed leases', () => {
  const pair = generateKeyPairSync('ed25519');
  const pem = pair.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  const keys = new Map([['svc-1', pair.publicKey]]);
  const verifies = (lease: { resource: string; token: bigint; id: string; proof?: string | undefined }) =>
    verifyProof(keys, lease.proof, {
      resource: lease.resource,
      token: lease.token,
      leaseIdDigest: leaseIdDigest(lease.id),
    });
  let dir: string;
  let redis: RedisNodes;
  let service: TestService;
  let unsigned: TestService;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'fenced-signed-'));
    const keyFile = path.join(dir, 'signing.pem');
    writeFileSync(keyFile, pem, { mode: 0o600 });
    redis = await startRedisNodes(3, { useExisting: false });
    service = await startTestService(redis.urls, {
      FENCED_SIGNING_KEY_FILE: keyFile,
      FENCED_SIGNING_KEY_ID: 'svc-1',
    });
    unsigned = await startTestService(redis.urls);
  });
  afterAll(async () => {
    await service?.close();
    await unsigned?.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('library: every lease carries a proof for its resource, token and id; extend keeps it', async () => {
    // The service on these nodes records its maxTtlMs (300 000 by default) as the cluster's: run with it.
    const coordinator = new Coordinator({
      nodes: redis.urls,
      clusterSettings: 'adopt',
      signingKey: { id: 'svc-1', privateKey: pem },
    });
    try {
      const lease = await coordinator.acquire(unique('lib'), { ttlMs: 5_000 });
      expect(lease.proof).toMatch(PROOF_PATTERN);
      expect(verifies(lease)).toBe('svc-1');
      const before = lease.proof;
      await lease.extend(10_000);
      expect(lease.proof).toBe(before);
      const byId = await coordinator.extend(lease.resource, lease.id, 5_000);
      expect(byId.proof).toBe(before);
      expect(JSON.stringify(lease)).not.toContain(lease.proof!);
      await lease.release();
    } finally {
      await coordinator.close();
    }
  });

  it('library: without a signing key a lease has no proof (the default)', async () => {
    const coordinator = new Coordinator({ nodes: redis.urls, clusterSettings: 'adopt' });
    try {
      const lease = await coordinator.acquire(unique('lib-off'), { ttlMs: 5_000 });
      expect(lease.proof).toBeUndefined();
      await lease.release();
    } finally {
      await coordinator.close();
    }
  });

  it('service: acquire and extend return the proof, documented in OpenAPI; the key is never logged', async () => {
    const validator = new ResponseValidator(
      (await service.call('/openapi.json')).body as Record<string, unknown>,
    );
    const resource = unique('svc');
    const acquired = await service.call(lockPath(resource, 'leases'), {
      method: 'POST',
      json: { ttlMs: 5_000 },
    });
    expect(acquired.status).toBe(201);
    const body = acquired.body as LeaseResponseBody;
    expect(validator.check('POST', '/v1/locks/{resource}/leases', 201, body)).toEqual([]);
    expect(verifies({ resource, token: BigInt(body.token), id: body.leaseId, proof: body.proof })).toBe(
      'svc-1',
    );
    const extended = await service.call(lockPath(resource, 'leases', body.leaseId, 'extend'), {
      method: 'POST',
      json: { ttlMs: 5_000 },
    });
    expect(extended.status).toBe(200);
    expect((extended.body as LeaseResponseBody).proof).toBe(body.proof);
    expect(
      validator.check('POST', '/v1/locks/{resource}/leases/{leaseId}/extend', 200, extended.body),
    ).toEqual([]);
    // A proof that does not fit the documented pattern would be refused by the schema.
    expect(
      validator.check('POST', '/v1/locks/{resource}/leases', 201, { ...body, proof: 'v1.x.short' }),
    ).not.toEqual([]);
    const logs = service.logs.join('\n');
    expect(logs).toContain('"signing":"key svc-1"');
    expect(logs).not.toContain(pem.split('\n')[1]!);
    expect(logs).not.toContain(body.proof!);
    await service.call(lockPath(resource, 'leases', body.leaseId), { method: 'DELETE' });
  });

  it('service without a key: lease responses carry no proof', async () => {
    const resource = unique('svc-off');
    const acquired = await unsigned.call(lockPath(resource, 'leases'), {
      method: 'POST',
      json: { ttlMs: 5_000 },
    });
    expect(acquired.status).toBe(201);
    expect(acquired.body).not.toHaveProperty('proof');
    expect(unsigned.logs.join('\n')).toContain('"signing":"off"');
  });

  it('client: lease.proof is exposed and kept across extensions', async () => {
    const client = new CoordinatorClient({ baseUrl: service.url });
    const lease = await client.acquire(unique('client'), { ttlMs: 5_000 });
    expect(verifies(lease)).toBe('svc-1');
    const proof = lease.proof;
    await lease.extend(8_000);
    expect(lease.proof).toBe(proof);
    expect(JSON.stringify(lease)).not.toContain(proof!);
    await lease.release();
    const plain = await new CoordinatorClient({ baseUrl: unsigned.url }).acquire(unique('c-off'), {
      ttlMs: 5_000,
    });
    expect(plain.proof).toBeUndefined();
    await plain.release();
  });
});
