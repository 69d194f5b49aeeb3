import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { lockPath, startTestService, uniqueResource, type TestService } from './service-harness.js';

const KEY_A = 'key-a-0123456789abcdef';
const KEY_B = 'key-b-fedcba9876543210';

describe('coordinator HTTP API: authentication and logs', () => {
  let redis: RedisNodes;
  let open: TestService;
  let guarded: TestService;
  let guardedHealth: TestService;
  let quiet: TestService;

  beforeAll(async () => {
    redis = await startRedisNodes(5, { useExisting: false });
    // Three instances starting at once on a fresh cluster, as replicas do: start-up waits for the cluster
    // that one of them initializes.
    [open, guarded, guardedHealth] = await Promise.all([
      startTestService(redis.urls),
      startTestService(redis.urls, { FENCED_API_KEYS: `${KEY_A},${KEY_B}` }),
      startTestService(redis.urls, { FENCED_API_KEYS: KEY_A, FENCED_HEALTH_AUTH: 'required' }),
    ]);
    // The production default of FENCED_ACCESS_LOG_LEVEL (an empty variable counts as unset).
    quiet = await startTestService(redis.urls, { FENCED_ACCESS_LOG_LEVEL: '' });
  });
  afterAll(async () => {
    await Promise.all([open?.close(), guarded?.close(), guardedHealth?.close(), quiet?.close()]);
    await redis?.stop();
  });

  it('serves every request without a key when no keys are configured', async () => {
    const resource = uniqueResource('open');
    const granted = await open.call(lockPath(resource, 'leases'), { method: 'POST', json: { ttlMs: 1000 } });
    expect(granted.status).toBe(201);
    // A key sent to a service without keys is simply not looked at.
    expect((await open.call(lockPath(resource), { apiKey: 'whatever-0123456789' })).status).toBe(200);
  });

  it.each([
    ['no Authorization header', {}],
    ['a wrong key', { authorization: 'Bearer not-a-configured-key-123' }],
    ['a prefix of a key', { authorization: `Bearer ${KEY_A.slice(0, -1)}` }],
    ['a key with an extra character', { authorization: `Bearer ${KEY_A}x` }],
    ['a key in another case', { authorization: `Bearer ${KEY_A.toUpperCase()}` }],
    ['the Basic scheme', { authorization: `Basic ${Buffer.from(`user:${KEY_A}`).toString('base64')}` }],
    ['a bare key', { authorization: KEY_A }],
    ['an empty bearer', { authorization: 'Bearer ' }],
    ['two keys', { authorization: `Bearer ${KEY_A} ${KEY_B}` }],
  ])('answers 401 UNAUTHORIZED to %s, on every /v1 route', async (_name, headers) => {
    const resource = uniqueResource('unauthorized');
    const calls = [
      guarded.call(lockPath(resource, 'leases'), { method: 'POST', json: { ttlMs: 1000 }, headers }),
      guarded.call(lockPath(resource, 'leases', 'AAAAAAAAAAAAAAAAAAAAAA', 'extend'), {
        method: 'POST',
        json: { ttlMs: 1000 },
        headers,
      }),
      guarded.call(lockPath(resource, 'leases', 'AAAAAAAAAAAAAAAAAAAAAA'), { method: 'DELETE', headers }),
      guarded.call(lockPath(resource), { headers }),
    ];
    for (const response of await Promise.all(calls)) {
      expect(response.status).toBe(401);
      expect(response.body).toEqual({
        error: { code: 'UNAUTHORIZED', message: expect.any(String) as string },
      });
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="fenced"');
    }
    // And nothing was acquired on the way.
    expect((await open.call(lockPath(resource))).body).toEqual({ resource, held: false });
  });

  it('checks the key before reading the body, so an unauthenticated 1 MB body is still a 401', async () => {
    const response = await guarded.call(lockPath(uniqueResource('big'), 'leases'), {
      method: 'POST',
      json: { ttlMs: 1000, pad: 'x'.repeat(1024 * 1024) },
    });
    expect(response.status).toBe(401);
  });

  it('serves every configured key, with the Bearer scheme in any case', async () => {
    const resource = uniqueResource('authorized');
    const granted = await guarded.call(lockPath(resource, 'leases'), {
      method: 'POST',
      json: { ttlMs: 5000 },
      apiKey: KEY_A,
    });
    expect(granted.status).toBe(201);
    const { leaseId } = granted.body as { leaseId: string };
    const extended = await guarded.call(lockPath(resource, 'leases', leaseId, 'extend'), {
      method: 'POST',
      json: { ttlMs: 5000 },
      headers: { authorization: `bearer ${KEY_B}` },
    });
    expect(extended.status).toBe(200);
    expect((await guarded.call(lockPath(resource), { apiKey: KEY_B })).body).toMatchObject({ held: true });
    expect(
      (await guarded.call(lockPath(resource, 'leases', leaseId), { method: 'DELETE', apiKey: KEY_A })).status,
    ).toBe(204);
  });

  it('keeps health, readiness and metrics public by default, and the OpenAPI document always', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics', '/openapi.json']) {
      expect((await guarded.call(path)).status, path).toBe(200);
    }
    const doc = (await guarded.call('/openapi.json')).body as { security: unknown };
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
  });

  it('asks for the key on health, readiness and metrics when FENCED_HEALTH_AUTH=required', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      const without = await guardedHealth.call(path);
      expect(without.status, path).toBe(401);
      expect((without.body as { error: { code: string } }).error.code).toBe('UNAUTHORIZED');
      expect((await guardedHealth.call(path, { apiKey: KEY_B })).status, path).toBe(401);
      expect((await guardedHealth.call(path, { apiKey: KEY_A })).status, path).toBe(200);
    }
    expect((await guardedHealth.call('/openapi.json')).status).toBe(200);
  });

  it('writes one log line per request, with the route pattern, and never a lease id or an API key', async () => {
    const resource = uniqueResource('logs');
    const before = guarded.logs.length;
    const leaseIds: string[] = [];
    const granted = await guarded.call(lockPath(resource, 'leases'), {
      method: 'POST',
      json: { ttlMs: 5000 },
      apiKey: KEY_A,
    });
    const { leaseId } = granted.body as { leaseId: string };
    leaseIds.push(leaseId);
    await guarded.call(lockPath(resource, 'leases', leaseId, 'extend'), {
      method: 'POST',
      json: { ttlMs: 5000 },
      apiKey: KEY_B,
    });
    await guarded.call(lockPath(resource, 'leases', leaseId), { method: 'DELETE', apiKey: KEY_A });
    // A lease id in a failing call, a wrong key, and an id-like value in a bad path.
    await guarded.call(lockPath(resource, 'leases', leaseId, 'extend'), {
      method: 'POST',
      json: { ttlMs: 5000 },
      apiKey: KEY_A,
    });
    await guarded.call(lockPath(resource, 'leases', leaseId, 'extend'), {
      method: 'POST',
      json: { ttlMs: 5000 },
      apiKey: 'wrong-key-but-still-secret-42',
    });
    await guarded.call(`${lockPath(resource, 'leases', leaseId)}/unknown-action`, {
      method: 'POST',
      apiKey: KEY_A,
    });
    // Same for the public service: a lease granted and lost there.
    const openGrant = await open.call(lockPath(resource + '-open', 'leases'), {
      method: 'POST',
      json: { ttlMs: 5000 },
    });
    leaseIds.push((openGrant.body as { leaseId: string }).leaseId);
    await open.call(lockPath(resource + '-open', 'leases', leaseIds[1]!), { method: 'DELETE' });

    const lines = guarded.logs.slice(before).map((l) => JSON.parse(l) as Record<string, unknown>);
    const requests = lines.filter((l) => l.msg === 'request');
    expect(requests.map((l) => [l.method, l.route, l.status])).toEqual([
      ['POST', '/v1/locks/:resource/leases', 201],
      ['POST', '/v1/locks/:resource/leases/:leaseId/extend', 200],
      ['DELETE', '/v1/locks/:resource/leases/:leaseId', 204],
      ['POST', '/v1/locks/:resource/leases/:leaseId/extend', 409],
      ['POST', '(unmatched)', 401],
      ['POST', '(unmatched)', 404],
    ]);
    for (const line of requests) {
      expect(line).toMatchObject({
        durationMs: expect.any(Number) as number,
        requestId: expect.any(String) as string,
      });
    }

    const everything = [...guarded.logs, ...open.logs, ...guardedHealth.logs].join('\n');
    for (const secret of [...leaseIds, KEY_A, KEY_B, 'wrong-key-but-still-secret-42']) {
      expect(everything).not.toContain(secret);
    }
    expect(everything).not.toMatch(/[Bb]earer/);
  });

  it('logs no line for a successful request at the default access-log level, and still logs the failures', async () => {
    const resource = uniqueResource('quiet');
    const before = quiet.logs.length;
    const granted = await quiet.call(lockPath(resource, 'leases'), { method: 'POST', json: { ttlMs: 5000 } });
    const { leaseId } = granted.body as { leaseId: string };
    expect((await quiet.call(lockPath(resource, 'leases', leaseId), { method: 'DELETE' })).status).toBe(204);
    expect((await quiet.call(lockPath(resource, 'leases'), { method: 'POST', json: {} })).status).toBe(400);
    const requests = quiet.logs
      .slice(before)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'request');
    expect(requests.map((l) => [l.method, l.route, l.status])).toEqual([
      ['POST', '/v1/locks/:resource/leases', 400],
    ]);
  });
});
