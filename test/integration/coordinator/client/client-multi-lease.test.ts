import { setTimeout as sleep } from 'node:timers/promises';
import { inspect } from 'node:util';
import { LeaseLostError, LockedError } from '@fenced/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientMultiLease, CoordinatorClient } from '@fenced/coordinator/client';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { startTestService, unique, type TestService } from '../../../fixtures/service-fixture.js';

// The typed client's multi-resource leases (`client.acquire([...])` over `/v1/leases`) against the real service.
describe('CoordinatorClient multi-resource leases', () => {
  let redis: RedisNodes;
  let service: TestService;
  let client: CoordinatorClient;

  beforeAll(async () => {
    redis = await startRedisNodes(3, { useExisting: false });
    service = await startTestService(redis.urls, { FENCED_MIN_TTL_MS: '100' });
    client = new CoordinatorClient({ baseUrl: service.url });
  });
  afterAll(async () => {
    await service?.close();
    await redis?.stop();
  });

  it('acquires every resource with its own bigint token, extends with the same tokens, and releases', async () => {
    const [a, b] = [unique('a'), unique('b')];
    const lease = await client.acquire([b, a, b], { ttlMs: 5_000 });
    expect(lease).toBeInstanceOf(ClientMultiLease);
    expect(lease.resources).toEqual([a, b].sort());
    for (const resource of [a, b]) {
      expect(typeof lease.tokens.get(resource)).toBe('bigint');
      expect(await client.inspect(resource)).toEqual({ held: true, token: lease.tokens.get(resource) });
    }
    expect(lease.fences().map((f) => f.token)).toEqual(lease.resources.map((r) => lease.tokens.get(r)));
    expect(lease.remainingMs()).toBeGreaterThan(0);
    expect(JSON.stringify(lease)).not.toContain(lease.id);
    expect(inspect(lease)).not.toContain(lease.id);

    const tokens = new Map(lease.tokens);
    await lease.extend(20_000);
    expect(lease.ttlMs).toBe(20_000);
    expect(lease.tokens).toEqual(tokens);
    await lease.release();
    expect(lease.released).toBe(true);
    for (const resource of [a, b]) expect(await client.inspect(resource)).toEqual({ held: false });
    await expect(lease.extend()).rejects.toBeInstanceOf(LeaseLostError);
  });

  it('throws LockedError (tryAcquire: null) when a resource is held, by a single or a multi lease', async () => {
    const [shared, other] = [unique('shared'), unique('other')];
    const single = await client.acquire(shared, { ttlMs: 5_000 });
    await expect(client.acquire([other, shared], { ttlMs: 5_000, waitMs: 50 })).rejects.toBeInstanceOf(
      LockedError,
    );
    expect(await client.tryAcquire([other, shared], { ttlMs: 5_000 })).toBeNull();
    expect(await client.inspect(other)).toEqual({ held: false });
    await single.release();
    {
      await using multi = await client.acquire([shared, other], { ttlMs: 5_000 });
      expect(await client.tryAcquire(other, { ttlMs: 5_000 })).toBeNull();
      expect(multi.resources).toHaveLength(2);
    }
    expect(await client.inspect(shared)).toEqual({ held: false });
  });

  it('keeps a multi lease with autoExtend for five ttls, and stops on release', async () => {
    const resources = [unique('k1'), unique('k2')];
    const lease = await client.acquire(resources, { ttlMs: 400, autoExtend: true });
    const tokens = new Map(lease.tokens);
    await sleep(2_000);
    expect(lease.signal.aborted).toBe(false);
    for (const r of resources) expect(await client.inspect(r)).toEqual({ held: true, token: tokens.get(r) });
    await lease.release();
    expect(lease.autoExtending).toBe(false);
    for (const r of resources) expect(await client.inspect(r)).toEqual({ held: false });
  });

  it('refuses bad lists before sending anything', async () => {
    await expect(client.acquire([], { ttlMs: 1_000 })).rejects.toThrow(/non-empty/);
    await expect(client.acquire(['ok', ''], { ttlMs: 1_000 })).rejects.toThrow();
    const many = Array.from({ length: 65 }, (_, i) => `r${i}`);
    await expect(client.acquire(many, { ttlMs: 1_000 })).rejects.toThrow(/at most 64/);
  });
});
