import { QuorumUnavailableError } from '@fenced/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorClient } from '@fenced/coordinator/client';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { QUORUM_UNAVAILABLE_MESSAGE } from '../../../packages/service/src/http/app.js';
import { ResponseValidator } from './response-validator.js';
import {
  eventually,
  lockPath,
  startTestService,
  uniqueResource,
  type TestService,
} from './service-harness.js';

interface Readiness {
  ready: boolean;
  votingNodes: number;
  nodes: { node: number; reachable: boolean; voting: boolean }[];
  error?: { code: string; message: string };
}

describe('coordinator HTTP API: readiness and quorum loss', () => {
  let redis: RedisNodes;
  let service: TestService;
  let validator: ResponseValidator;

  beforeAll(async () => {
    // Kills and restarts nodes: needs servers this test owns (local processes).
    redis = await startRedisNodes(5, { useExisting: false, backend: 'process' });
    service = await startTestService(redis.urls);
    validator = new ResponseValidator((await service.call('/openapi.json')).body as Record<string, unknown>);
  });
  afterAll(async () => {
    await service?.close();
    await redis?.stop();
  });

  async function metric(name: string, labels: string): Promise<number> {
    const line = (await service.call('/metrics')).text
      .split('\n')
      .find((l) => l.startsWith(`${name}{${labels}}`));
    return line === undefined ? 0 : Number(line.split(' ')[1]);
  }

  it('turns /readyz to 503 when a majority of nodes is down, answers 503 QUORUM_UNAVAILABLE, and recovers', async () => {
    const resource = uniqueResource('quorum');
    expect((await service.call('/readyz')).status).toBe(200);
    const held = await service.call(lockPath(resource, 'leases'), {
      method: 'POST',
      json: { ttlMs: 60_000 },
    });
    const { leaseId } = held.body as { leaseId: string };

    const majority = redis.nodes.slice(0, 3);
    await Promise.all(majority.map((node) => node.kill()));
    try {
      const readiness = await service.call('/readyz');
      expect(readiness.status).toBe(503);
      expect(validator.check('GET', '/readyz', 503, readiness.body)).toEqual([]);
      const body = readiness.body as Readiness;
      expect(body.ready).toBe(false);
      expect(body.votingNodes).toBe(2);
      expect(body.error?.code).toBe('QUORUM_UNAVAILABLE');
      expect(body.nodes.map((n) => n.reachable)).toEqual([false, false, false, true, true]);
      expect(body.nodes.map((n) => n.voting)).toEqual([false, false, false, true, true]);
      expect((await service.call('/healthz')).status).toBe(200);

      const calls = {
        acquire: await service.call(lockPath(uniqueResource('q'), 'leases'), {
          method: 'POST',
          json: { ttlMs: 1000 },
        }),
        extend: await service.call(lockPath(resource, 'leases', leaseId, 'extend'), {
          method: 'POST',
          json: { ttlMs: 1000 },
        }),
        // Another lease id: a release the nodes miss is retried in the background once they are back, and the
        // lease held here must survive the outage for the check below.
        release: await service.call(lockPath(resource, 'leases', 'AAAAAAAAAAAAAAAAAAAAAA'), {
          method: 'DELETE',
        }),
        inspect: await service.call(lockPath(resource)),
      };
      for (const [name, response] of Object.entries(calls)) {
        expect(response.status, name).toBe(503);
        // A stable message for API clients: no node address, no ioredis internals.
        expect(response.body, name).toEqual({
          error: { code: 'QUORUM_UNAVAILABLE', message: QUORUM_UNAVAILABLE_MESSAGE },
        });
        expect(response.text, name).not.toMatch(
          /127\.0\.0\.1|:\d{4,5}\b|Stream isn't writeable|enableOfflineQueue/,
        );
        expect(response.headers.get('retry-after'), name).toBe('1');
        // The operator's detail is in the log: one warn line for the request, with each down node's reason.
        const lines = service.logs
          .map(
            (line) =>
              JSON.parse(line) as {
                level: number;
                msg: string;
                requestId?: string;
                nodes?: { node: number; reason: string }[];
              },
          )
          .filter(
            (line) =>
              line.msg === 'quorum unavailable' && line.requestId === response.headers.get('x-request-id'),
          );
        expect(lines, name).toHaveLength(1);
        expect(lines[0]!.level, name).toBe(40);
        expect(
          lines[0]!.nodes?.map((n) => n.node),
          name,
        ).toEqual(expect.arrayContaining([0, 1, 2]));
        expect(lines[0]!.nodes?.[0]?.reason, name).toMatch(/\S/);
      }
      expect(await metric('fenced_quorum_failures_total', 'operation="acquire"')).toBeGreaterThan(0);
      expect(await metric('fenced_lease_denials_total', 'reason="quorum_unavailable"')).toBeGreaterThan(0);
      expect((await service.call('/metrics')).text).toMatch(
        /fenced_node_errors_total\{node="0",operation="[a-z-]+"\} [1-9]/,
      );

      // The client retries 503s with bounded, jittered backoff, then gives up with the typed error.
      const client = new CoordinatorClient({ baseUrl: service.url, maxAttempts: 3, retryBaseDelayMs: 10 });
      await expect(client.inspect(resource)).rejects.toBeInstanceOf(QuorumUnavailableError);
    } finally {
      await Promise.all(majority.map((node) => node.restart()));
    }

    // Ready as soon as a quorum is back; wait for the last node to reconnect too before checking all five.
    await eventually(
      async () => ((await service.call('/readyz')).body as Readiness).votingNodes === 5,
      20_000,
      'every node voting again',
    );
    const recovered = (await service.call('/readyz')).body as Readiness;
    expect(recovered).toMatchObject({ ready: true, votingNodes: 5 });
    // The nodes kept their data (appendfsync always): the lease granted before is still there.
    expect((await service.call(lockPath(resource))).body).toMatchObject({ held: true });
    expect((await service.call(lockPath(resource, 'leases', leaseId), { method: 'DELETE' })).status).toBe(
      204,
    );
  });

  it('lets a client ride out a quorum outage by retrying its acquire', async () => {
    const resource = uniqueResource('retry');
    const majority = redis.nodes.slice(2, 5);
    await Promise.all(majority.map((node) => node.kill()));
    const before = await metric('fenced_lease_denials_total', 'reason="quorum_unavailable"');
    const client = new CoordinatorClient({
      baseUrl: service.url,
      maxAttempts: 1_000,
      retryBaseDelayMs: 20,
      retryMaxDelayMs: 100,
    });
    const acquiring = client.acquire(resource, { ttlMs: 5000 });
    try {
      await eventually(
        async () => (await metric('fenced_lease_denials_total', 'reason="quorum_unavailable"')) > before,
        10_000,
        'a refused attempt',
      );
    } finally {
      await Promise.all(majority.map((node) => node.restart()));
    }
    const lease = await acquiring;
    expect(lease.resource).toBe(resource);
    expect((await client.inspect(resource)).token).toBe(lease.token);
    await lease.release();
  });
});
