import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { ResponseValidator } from '../../fixtures/response-validator.js';
import {
  lockPath,
  startTestService,
  unique,
  type TestResponse,
  type TestService,
} from '../../fixtures/service-fixture.js';

// The multi-resource routes (`/v1/leases`) against the real service, Coordinator and Redis nodes. Every response
// is checked against the OpenAPI document the service serves, as in lock-api.test.ts.
describe('coordinator HTTP API: multi-resource leases', () => {
  let redis: RedisNodes;
  let service: TestService;
  let validator: ResponseValidator;

  beforeAll(async () => {
    redis = await startRedisNodes(3, { useExisting: false });
    service = await startTestService(redis.urls, { FENCED_MIN_TTL_MS: '100' });
    const openapi = await service.call('/openapi.json');
    validator = new ResponseValidator(openapi.body as Record<string, unknown>);
  });
  afterAll(async () => {
    await service?.close();
    await redis?.stop();
  });

  const LEASES = '/v1/leases';
  const EXTEND = '/v1/leases/{leaseId}/extend';
  const LEASE = '/v1/leases/{leaseId}';

  interface MultiLeaseBody {
    resources: string[];
    leaseId: string;
    tokens: Record<string, string>;
    ttlMs: number;
    validityMs: number;
    expiresAt: string;
  }

  function conforms(method: string, template: string, response: TestResponse): TestResponse {
    expect(validator.check(method, template, response.status, response.body)).toEqual([]);
    return response;
  }

  async function acquire(body: unknown): Promise<TestResponse> {
    return conforms('POST', LEASES, await service.call('/v1/leases', { method: 'POST', json: body }));
  }
  async function extend(leaseId: string, body: unknown): Promise<TestResponse> {
    return conforms(
      'POST',
      EXTEND,
      await service.call(`/v1/leases/${leaseId}/extend`, { method: 'POST', json: body }),
    );
  }
  async function release(leaseId: string, body: unknown): Promise<TestResponse> {
    return conforms(
      'DELETE',
      LEASE,
      await service.call(`/v1/leases/${leaseId}`, { method: 'DELETE', json: body }),
    );
  }
  async function held(resource: string): Promise<{ held: boolean; token?: string }> {
    const { body } = await service.call(lockPath(resource));
    const { held: isHeld, token } = body as { held: boolean; token?: string };
    return token === undefined ? { held: isHeld } : { held: isHeld, token };
  }
  function expectInvalid(response: TestResponse): void {
    expect(response.status).toBe(400);
    expect((response.body as { error: { code: string } }).error.code).toBe('INVALID_REQUEST');
  }

  it('POST /v1/leases grants every resource: 201 with sorted resources, one token each, one lease id', async () => {
    const [b, a, c] = [unique('b'), unique('a'), unique('c')];
    const response = await acquire({ resources: [b, a, c], ttlMs: 10_000, waitMs: 0 });
    expect(response.status).toBe(201);
    const lease = response.body as MultiLeaseBody;
    expect(Object.keys(lease).sort()).toEqual([
      'expiresAt',
      'leaseId',
      'resources',
      'tokens',
      'ttlMs',
      'validityMs',
    ]);
    expect(lease.resources).toEqual([a, b, c].sort());
    expect(Object.keys(lease.tokens).sort()).toEqual(lease.resources);
    for (const resource of lease.resources) {
      expect(lease.tokens[resource]).toMatch(/^[1-9][0-9]*$/);
      expect(await held(resource)).toEqual({ held: true, token: lease.tokens[resource] });
    }
    expect(lease.ttlMs).toBe(10_000);
    expect(lease.validityMs).toBeGreaterThan(0);
    expect(lease.validityMs).toBeLessThan(10_000);
    expect(response.headers.get('cache-control')).toBe('no-store');
    await release(lease.leaseId, { resources: lease.resources });
  });

  it('extend keeps every token; DELETE releases every resource and is idempotent', async () => {
    const resources = [unique('x'), unique('y')];
    const lease = (await acquire({ resources, ttlMs: 5_000 })).body as MultiLeaseBody;
    const extended = await extend(lease.leaseId, { resources, ttlMs: 20_000 });
    expect(extended.status).toBe(200);
    const after = extended.body as MultiLeaseBody;
    expect(after.tokens).toEqual(lease.tokens);
    expect(after.leaseId).toBe(lease.leaseId);
    expect(after.ttlMs).toBe(20_000);
    expect(after.validityMs).toBeGreaterThan(5_000);

    expect((await release(lease.leaseId, { resources })).status).toBe(204);
    for (const resource of resources) expect(await held(resource)).toEqual({ held: false });
    expect((await release(lease.leaseId, { resources })).status).toBe(204);
    const late = await extend(lease.leaseId, { resources, ttlMs: 5_000 });
    expect(late.status).toBe(409);
    expect((late.body as { error: { code: string } }).error.code).toBe('LEASE_LOST');
  });

  it('answers 409 LOCKED when another lease holds a resource, and holds nothing of the request', async () => {
    const [shared, other] = [unique('shared'), unique('other')];
    const first = (await acquire({ resources: [shared, unique('first')], ttlMs: 10_000 }))
      .body as MultiLeaseBody;
    const refused = await acquire({ resources: [other, shared], ttlMs: 10_000, waitMs: 100 });
    expect(refused.status).toBe(409);
    expect((refused.body as { error: { code: string } }).error.code).toBe('LOCKED');
    expect(await held(other)).toEqual({ held: false });
    await release(first.leaseId, { resources: first.resources });
  });

  it('is exclusive with single-resource leases on the same resource, both ways', async () => {
    const [single, free] = [unique('single'), unique('free')];
    const one = await service.call(lockPath(single, 'leases'), { method: 'POST', json: { ttlMs: 10_000 } });
    expect(one.status).toBe(201);
    const blocked = await acquire({ resources: [single, free], ttlMs: 10_000 });
    expect(blocked.status).toBe(409);
    expect(await held(free)).toEqual({ held: false });
    const { leaseId } = one.body as { leaseId: string };
    await service.call(lockPath(single, 'leases', leaseId), { method: 'DELETE' });

    const multi = (await acquire({ resources: [single, free], ttlMs: 10_000 })).body as MultiLeaseBody;
    const refused = await service.call(lockPath(free, 'leases'), { method: 'POST', json: { ttlMs: 10_000 } });
    expect(refused.status).toBe(409);
    expect((refused.body as { error: { code: string } }).error.code).toBe('LOCKED');
    await release(multi.leaseId, { resources: multi.resources });
    const after = await service.call(lockPath(free, 'leases'), { method: 'POST', json: { ttlMs: 1_000 } });
    expect(after.status).toBe(201);
  });

  it('answers LEASE_LOST when one resource was taken over, and releases the rest of the set', async () => {
    const [taken, kept] = [unique('taken'), unique('kept')];
    const lease = (await acquire({ resources: [taken, kept], ttlMs: 10_000 })).body as MultiLeaseBody;
    // One resource released through the single-resource route (same lease id), then granted to someone else.
    await service.call(lockPath(taken, 'leases', lease.leaseId), { method: 'DELETE' });
    const thief = await service.call(lockPath(taken, 'leases'), { method: 'POST', json: { ttlMs: 10_000 } });
    expect(thief.status).toBe(201);

    const lost = await extend(lease.leaseId, { resources: [taken, kept], ttlMs: 10_000 });
    expect(lost.status).toBe(409);
    expect((lost.body as { error: { code: string } }).error.code).toBe('LEASE_LOST');
    expect((await held(taken)).token).toBe((thief.body as { token: string }).token);
    // The release of the rest runs in the background after the answer: poll until it lands.
    for (let i = 0; i < 100 && (await held(kept)).held; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await held(kept)).toEqual({ held: false });
  });

  it('validates bodies like the single-resource routes: 400 INVALID_REQUEST, nothing acquired', async () => {
    const ok = unique('ok');
    const tooMany = Array.from({ length: 65 }, (_, i) => `${ok}-${i}`);
    const bad: unknown[] = [
      { ttlMs: 1_000 },
      { resources: [], ttlMs: 1_000 },
      { resources: ok, ttlMs: 1_000 },
      { resources: tooMany, ttlMs: 1_000 },
      { resources: [ok, ok], ttlMs: 1_000 },
      { resources: [ok, ''], ttlMs: 1_000 },
      { resources: [ok, 'bad\u0001name'], ttlMs: 1_000 },
      { resources: [ok, 'x'.repeat(257)], ttlMs: 1_000 },
      { resources: [ok, 7], ttlMs: 1_000 },
      { resources: [ok], ttlMs: 1_000, extra: true },
      { resources: [ok], ttlMs: 10 },
      { resources: [ok], ttlMs: 1_000, waitMs: -1 },
      [ok],
    ];
    for (const body of bad) expectInvalid(await acquire(body));
    expect(await held(ok)).toEqual({ held: false });
    // 64 distinct resources are accepted.
    const sixtyFour = (await acquire({ resources: tooMany.slice(0, 64), ttlMs: 5_000 }))
      .body as MultiLeaseBody;
    expect(sixtyFour.resources).toHaveLength(64);
    await release(sixtyFour.leaseId, { resources: sixtyFour.resources });

    const lease = (await acquire({ resources: [ok], ttlMs: 5_000 })).body as MultiLeaseBody;
    expectInvalid(await extend(lease.leaseId, { resources: [ok, ok], ttlMs: 5_000 }));
    expectInvalid(await extend(lease.leaseId, { ttlMs: 5_000 }));
    expectInvalid(await extend('short', { resources: [ok], ttlMs: 5_000 }));
    expectInvalid(await release(lease.leaseId, {}));
    expectInvalid(await release(lease.leaseId, { resources: [] }));
    const noBody = await service.call(`/v1/leases/${lease.leaseId}`, { method: 'DELETE' });
    expectInvalid(conforms('DELETE', LEASE, noBody));
    expect((await held(ok)).held).toBe(true);
    await release(lease.leaseId, { resources: [ok] });
  });
});
