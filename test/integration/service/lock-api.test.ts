import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { ResponseValidator } from '../../fixtures/response-validator.js';
import {
  eventually,
  lockPath,
  startTestService,
  unique,
  type TestResponse,
  type TestService,
} from '../../fixtures/service-fixture.js';

// The wire contract of DESIGN §5, row by row, against the real service, Coordinator and Redis nodes. Every
// response is also checked against the OpenAPI document the service serves.
describe('coordinator HTTP API: the contract table', () => {
  let redis: RedisNodes;
  let service: TestService;
  let validator: ResponseValidator;

  beforeAll(async () => {
    redis = await startRedisNodes(5, { useExisting: false });
    service = await startTestService(redis.urls, { FENCED_MIN_TTL_MS: '100', FENCED_MAX_WAIT_MS: '20000' });
    const openapi = await service.call('/openapi.json');
    validator = new ResponseValidator(openapi.body as Record<string, unknown>);
  });
  afterAll(async () => {
    await service?.close();
    await redis?.stop();
  });

  /** Asserts the response conforms to the documented schema of `method template` for its status. */
  function conforms(method: string, template: string, response: TestResponse): TestResponse {
    expect(validator.check(method, template, response.status, response.body)).toEqual([]);
    return response;
  }

  const LEASES = '/v1/locks/{resource}/leases';
  const EXTEND = '/v1/locks/{resource}/leases/{leaseId}/extend';
  const LEASE = '/v1/locks/{resource}/leases/{leaseId}';
  const LOCK = '/v1/locks/{resource}';

  async function acquire(resource: string, body: unknown = { ttlMs: 10_000 }): Promise<TestResponse> {
    return conforms(
      'POST',
      LEASES,
      await service.call(lockPath(resource, 'leases'), { method: 'POST', json: body }),
    );
  }

  interface LeaseBody {
    resource: string;
    leaseId: string;
    token: string;
    ttlMs: number;
    validityMs: number;
    expiresAt: string;
  }

  it('POST /leases grants a lease: 201 with resource, leaseId, decimal token, ttlMs, validityMs, expiresAt', async () => {
    const resource = unique('grant');
    const response = await acquire(resource, { ttlMs: 10_000, waitMs: 0 });
    expect(response.status).toBe(201);
    const lease = response.body as LeaseBody;
    expect(Object.keys(lease).sort()).toEqual([
      'expiresAt',
      'leaseId',
      'resource',
      'token',
      'ttlMs',
      'validityMs',
    ]);
    expect(lease.resource).toBe(resource);
    expect(lease.token).toMatch(/^[1-9][0-9]*$/);
    expect(lease.leaseId).toMatch(/^[A-Za-z0-9_-]{22,}$/);
    expect(lease.ttlMs).toBe(10_000);
    expect(lease.validityMs).toBeGreaterThan(0);
    expect(lease.validityMs).toBeLessThan(10_000);
    expect(new Date(lease.expiresAt).toISOString()).toBe(lease.expiresAt);
    expect(response.headers.get('cache-control')).toBe('no-store');
    expect(response.headers.get('x-request-id')).toBeTruthy();
  });

  it('POST /leases answers 409 LOCKED while another holder has the resource', async () => {
    const resource = unique('locked');
    expect((await acquire(resource)).status).toBe(201);
    const second = await acquire(resource, { ttlMs: 10_000, waitMs: 0 });
    expect(second.status).toBe(409);
    expect(second.body).toEqual({ error: { code: 'LOCKED', message: expect.any(String) as string } });
    const waited = await acquire(resource, { ttlMs: 10_000, waitMs: 150 });
    expect(waited.status).toBe(409);
    expect((waited.body as { error: { code: string } }).error.code).toBe('LOCKED');
  });

  it('POST /leases with waitMs waits on the server and gets the lease once the holder releases', async () => {
    const resource = unique('wait');
    const first = (await acquire(resource)).body as LeaseBody;
    const waiting = acquire(resource, { ttlMs: 10_000, waitMs: 15_000 });
    await eventually(async () => (await metric('fenced_acquires_in_flight')) >= 1, {
      timeoutMs: 10_000,
      what: 'the waiter is waiting',
    });
    const released = await service.call(lockPath(resource, 'leases', first.leaseId), { method: 'DELETE' });
    expect(released.status).toBe(204);
    const second = await waiting;
    expect(second.status).toBe(201);
    const lease = second.body as LeaseBody;
    expect(BigInt(lease.token)).toBeGreaterThan(BigInt(first.token));
    expect(lease.leaseId).not.toBe(first.leaseId);
  });

  it('gives every grant a larger token than the grants before it', async () => {
    const resource = unique('tokens');
    let previous = 0n;
    for (let i = 0; i < 5; i++) {
      const lease = (await acquire(resource)).body as LeaseBody;
      expect(BigInt(lease.token)).toBeGreaterThan(previous);
      previous = BigInt(lease.token);
      await service.call(lockPath(resource, 'leases', lease.leaseId), { method: 'DELETE' });
    }
  });

  it('POST /extend answers 200 with the same shape and the same token', async () => {
    const resource = unique('extend');
    const lease = (await acquire(resource, { ttlMs: 5_000 })).body as LeaseBody;
    const extended = conforms(
      'POST',
      EXTEND,
      await service.call(lockPath(resource, 'leases', lease.leaseId, 'extend'), {
        method: 'POST',
        json: { ttlMs: 20_000 },
      }),
    );
    expect(extended.status).toBe(200);
    const body = extended.body as LeaseBody;
    expect(body).toMatchObject({ resource, leaseId: lease.leaseId, token: lease.token, ttlMs: 20_000 });
    expect(body.validityMs).toBeGreaterThan(lease.validityMs);
    expect(extended.headers.get('cache-control')).toBe('no-store');
  });

  it('POST /extend answers 409 LEASE_LOST for a released, an expired or an unknown lease', async () => {
    const resource = unique('lost');
    const released = (await acquire(resource)).body as LeaseBody;
    await service.call(lockPath(resource, 'leases', released.leaseId), { method: 'DELETE' });
    const expired = (await acquire(resource, { ttlMs: 100 })).body as LeaseBody;
    await eventually(
      async () => ((await service.call(lockPath(resource))).body as { held: boolean }).held === false,
      { timeoutMs: 10_000, what: 'the short lease expired' },
    );
    for (const leaseId of [released.leaseId, expired.leaseId, 'AAAAAAAAAAAAAAAAAAAAAA']) {
      const response = conforms(
        'POST',
        EXTEND,
        await service.call(lockPath(resource, 'leases', leaseId, 'extend'), {
          method: 'POST',
          json: { ttlMs: 1000 },
        }),
      );
      expect(response.status).toBe(409);
      expect((response.body as { error: { code: string } }).error.code).toBe('LEASE_LOST');
    }
  });

  it("POST /extend of an old lease never touches its successor's lease", async () => {
    const resource = unique('successor');
    const old = (await acquire(resource, { ttlMs: 100 })).body as LeaseBody;
    await eventually(async () => (await acquire(resource, { ttlMs: 10_000 })).status === 201, {
      timeoutMs: 10_000,
      what: 'successor',
    });
    const late = await service.call(lockPath(resource, 'leases', old.leaseId, 'extend'), {
      method: 'POST',
      json: { ttlMs: 10_000 },
    });
    expect(late.status).toBe(409);
    const lateRelease = await service.call(lockPath(resource, 'leases', old.leaseId), { method: 'DELETE' });
    expect(lateRelease.status).toBe(204);
    const status = (await service.call(lockPath(resource))).body as { held: boolean; token: string };
    expect(status.held).toBe(true);
    expect(BigInt(status.token)).toBeGreaterThan(BigInt(old.token));
  });

  it('DELETE answers 204 with no body, again for a released lease, and for an expired one', async () => {
    const resource = unique('release');
    const lease = (await acquire(resource)).body as LeaseBody;
    for (let i = 0; i < 2; i++) {
      const response = await service.call(lockPath(resource, 'leases', lease.leaseId), { method: 'DELETE' });
      expect(response.status).toBe(204);
      expect(response.text).toBe('');
      validator.check('DELETE', LEASE, 204, null);
    }
    const expiring = (await acquire(resource, { ttlMs: 100 })).body as LeaseBody;
    await eventually(
      async () => ((await service.call(lockPath(resource))).body as { held: boolean }).held === false,
      { timeoutMs: 10_000, what: 'the short lease expired' },
    );
    const response = await service.call(lockPath(resource, 'leases', expiring.leaseId), { method: 'DELETE' });
    expect(response.status).toBe(204);
    expect((await acquire(resource)).status).toBe(201);
  });

  it('GET /v1/locks/{resource} tells held and token, never a lease id', async () => {
    const resource = unique('inspect');
    const free = conforms('GET', LOCK, await service.call(lockPath(resource)));
    expect(free.status).toBe(200);
    expect(free.body).toEqual({ resource, held: false });
    const lease = (await acquire(resource)).body as LeaseBody;
    const held = conforms('GET', LOCK, await service.call(lockPath(resource)));
    expect(held.body).toEqual({ resource, held: true, token: lease.token });
    expect(held.text).not.toContain(lease.leaseId);
    expect(held.headers.get('cache-control')).toBe('no-store');
  });

  it('handles resource names that need percent-encoding: slashes, spaces, unicode, 256 bytes', async () => {
    for (const resource of [
      'a/b/c',
      'with space?&#%',
      'über/документ/🙂',
      'x'.repeat(256),
      'ü'.repeat(128),
    ]) {
      const granted = await acquire(resource);
      expect(granted.status, resource).toBe(201);
      const lease = granted.body as LeaseBody;
      expect(lease.resource).toBe(resource);
      expect((await service.call(lockPath(resource))).body).toMatchObject({ resource, held: true });
      expect(
        (await service.call(lockPath(resource, 'leases', lease.leaseId), { method: 'DELETE' })).status,
      ).toBe(204);
    }
  });

  it('GET /healthz answers 200 without touching Redis', async () => {
    const response = conforms('GET', '/healthz', await service.call('/healthz'));
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ status: 'ok' });
  });

  it('GET /readyz answers 200 with every node reachable, master, correctly configured and voting', async () => {
    const response = conforms('GET', '/readyz', await service.call('/readyz'));
    expect(response.status).toBe(200);
    const body = response.body as {
      ready: boolean;
      quorum: number;
      nodeCount: number;
      votingNodes: number;
      nodes: { address: string; reachable: boolean; role: string; configOk: boolean; latencyMs: number }[];
    };
    expect(body).toMatchObject({ ready: true, quorum: 3, nodeCount: 5, votingNodes: 5 });
    expect(body.nodes).toHaveLength(5);
    for (const node of body.nodes) {
      expect(node).toMatchObject({
        reachable: true,
        role: 'master',
        configOk: true,
        problems: [],
        voting: true,
      });
      expect(node.latencyMs).toBeGreaterThanOrEqual(0);
    }
    expect(body.nodes.map((n) => n.address)).toEqual(redis.urls.map((u) => u.replace('redis://', '')));
  });

  it('GET /metrics exposes grants, denials by reason, extend and release outcomes and latencies', async () => {
    const response = await service.call('/metrics');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await metric('fenced_lease_grants_total')).toBeGreaterThan(0);
    expect(await metric('fenced_lease_denials_total', 'reason="locked"')).toBeGreaterThan(0);
    expect(await metric('fenced_lease_extends_total', 'outcome="extended"')).toBeGreaterThan(0);
    expect(await metric('fenced_lease_extends_total', 'outcome="lost"')).toBeGreaterThan(0);
    expect(await metric('fenced_lease_releases_total', 'outcome="released"')).toBeGreaterThan(0);
    expect(response.text).toContain(
      'fenced_operation_duration_seconds_bucket{le="0.005",operation="acquire"',
    );
    expect(response.text).toContain(
      'fenced_http_request_duration_seconds_count{method="POST",route="/v1/locks/:resource/leases",status="201"}',
    );
    expect(response.text).not.toMatch(/leases\/[A-Za-z0-9_-]{22}/);
  });

  it('GET /openapi.json serves a valid OpenAPI 3.1 document', async () => {
    const response = await service.call('/openapi.json');
    expect(response.status).toBe(200);
    const result = await new Validator().validate(response.body as Record<string, unknown>);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    const doc = response.body as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths).sort()).toEqual(
      [
        '/healthz',
        '/metrics',
        '/openapi.json',
        '/readyz',
        LOCK,
        LEASES,
        LEASE,
        EXTEND,
        '/v1/leases',
        '/v1/leases/{leaseId}',
        '/v1/leases/{leaseId}/extend',
      ].sort(),
    );
  });

  /** The value of one sample of the service's metrics (summed over label sets matching `labels`). */
  async function metric(name: string, labels = ''): Promise<number> {
    const text = (await service.call('/metrics')).text;
    let sum = 0;
    for (const line of text.split('\n')) {
      if (!line.startsWith(name)) continue;
      const [series, value] = line.split(' ');
      if (series === name || (series?.startsWith(`${name}{`) && series.includes(labels)))
        sum += Number(value);
    }
    return sum;
  }
});
