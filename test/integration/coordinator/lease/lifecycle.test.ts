import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { Coordinator } from '@fenced/coordinator';
import { InvalidRequestError, LeaseLostError, LockedError, MAX_TOKEN } from '@fenced/shared';
import type { RedisNodes } from '@fenced/test-utils/redis-cluster';
import {
  startCoordinatorFixture,
  unique,
  type CoordinatorFixture,
} from '../../../fixtures/coordinator-fixture.js';

let env: RedisNodes;
let coordinator: Coordinator;
let cluster: CoordinatorFixture;

beforeAll(async () => {
  cluster = await startCoordinatorFixture(5, { coordinator: { nodeTimeoutMs: 1_000 }, raw: false });
  ({ env, coordinator } = cluster);
});

afterAll(async () => {
  await cluster?.close();
});

describe('lease lifecycle', () => {
  it('grants, extends with the same token, and releases a lease', async () => {
    const resource = unique('lifecycle');
    const lease = await coordinator.acquire(resource, { ttlMs: 5_000 });
    expect(lease.resource).toBe(resource);
    expect(lease.id).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(lease.token).toBeGreaterThan(0n);
    expect(lease.token).toBeLessThanOrEqual(MAX_TOKEN);
    expect(lease.validityMs).toBeGreaterThan(0);
    expect(lease.remainingMs()).toBeGreaterThan(0);

    expect(await coordinator.inspect(resource)).toEqual({ held: true, token: lease.token });
    expect(await coordinator.tryAcquire(resource, { ttlMs: 5_000 })).toBeNull();
    await expect(coordinator.acquire(resource, { ttlMs: 5_000 })).rejects.toBeInstanceOf(LockedError);

    const token = lease.token;
    await lease.extend(8_000);
    expect(lease.token).toBe(token);
    expect(lease.ttlMs).toBe(8_000);

    const byId = await coordinator.extend(resource, lease.id, 6_000);
    expect(byId.token).toBe(token);

    await lease.release();
    await lease.release();
    expect(lease.remainingMs()).toBeLessThanOrEqual(0);
    expect(await coordinator.inspect(resource)).toEqual({ held: false });

    const next = await coordinator.acquire(resource, { ttlMs: 5_000 });
    expect(next.token).toBeGreaterThan(token);
    await next.release();
  });

  it('releases through await using', async () => {
    const resource = unique('dispose');
    {
      await using lease = await coordinator.acquire(resource, { ttlMs: 5_000 });
      expect((await coordinator.inspect(resource)).held).toBe(true);
      expect(lease.token).toBeGreaterThan(0n);
    }
    expect((await coordinator.inspect(resource)).held).toBe(false);
  });

  it('lets a lease expire, then grants it again with a larger token', async () => {
    const resource = unique('expiry');
    const first = await coordinator.acquire(resource, { ttlMs: 200, waitMs: 5_000 });
    const second = await coordinator.acquire(resource, { ttlMs: 5_000, waitMs: 10_000 });
    expect(first.remainingMs()).toBeLessThanOrEqual(0);
    expect(second.token).toBeGreaterThan(first.token);
    await second.release();
  });

  it('releases an expired lease without throwing or hanging', async () => {
    const resource = unique('late-release');
    const lease = await coordinator.acquire(resource, { ttlMs: 100, waitMs: 5_000 });
    await new Promise((r) => setTimeout(r, 200));
    await expect(lease.release()).resolves.toBeUndefined();
    await expect(coordinator.release(resource, lease.id)).resolves.toBeUndefined();
  });

  it('reports LeaseLostError when extending a lease another holder took over', async () => {
    const resource = unique('lost');
    const lease = await coordinator.acquire(resource, { ttlMs: 100, waitMs: 5_000 });
    const successor = await coordinator.acquire(resource, { ttlMs: 5_000, waitMs: 10_000 });
    await expect(coordinator.extend(resource, lease.id, 5_000)).rejects.toBeInstanceOf(LeaseLostError);
    await expect(lease.extend()).rejects.toBeInstanceOf(LeaseLostError);
    // The late extend and the late release leave the successor alone (F11).
    await lease.release();
    expect(await coordinator.inspect(resource)).toEqual({ held: true, token: successor.token });
    await successor.release();
  });

  it('never hands out a lease that is already expired', async () => {
    const resource = unique('fresh');
    for (let i = 0; i < 20; i++) {
      const lease = await coordinator.acquire(resource, { ttlMs: 30, waitMs: 1_000 });
      expect(lease.validityMs).toBeGreaterThan(coordinator.settings.minValidityMs);
      expect(lease.remainingMs()).toBeGreaterThan(0);
      await lease.release();
    }
  });

  it('keys resources with braces apart from each other', async () => {
    const a = await coordinator.acquire(`{x}${randomUUID()}`, { ttlMs: 5_000 });
    const name = `}{%${randomUUID()}`;
    const b = await coordinator.acquire(name, { ttlMs: 5_000 });
    const redis = new Redis(env.urls[0]!);
    try {
      const keys = await redis.keys(`fenced:{*${name.slice(3)}}:lease`);
      expect(keys).toEqual([`fenced:{%7D%7B%25${name.slice(3)}}:lease`]);
    } finally {
      redis.disconnect();
    }
    await a.release();
    await b.release();
  });

  it("stops waiting when the signal aborts, with the signal's reason", async () => {
    const resource = unique('abort');
    const holder = await coordinator.acquire(resource, { ttlMs: 30_000 });
    const controller = new AbortController();
    const waiting = coordinator.acquire(resource, {
      ttlMs: 5_000,
      waitMs: 60_000,
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(new Error('caller gave up')), 100);
    await expect(waiting).rejects.toThrow('caller gave up');
    await holder.release();
  });

  it('rejects bad arguments with InvalidRequestError saying what is allowed', async () => {
    const cases: Array<[string, unknown]> = [
      ['', { ttlMs: 1_000 }],
      ['x'.repeat(257), { ttlMs: 1_000 }],
      ['bell\u0007', { ttlMs: 1_000 }],
      ['ok', { ttlMs: 0 }],
      ['ok', { ttlMs: -5 }],
      ['ok', { ttlMs: 1.5 }],
      ['ok', { ttlMs: 3_600_001 }],
      ['ok', { ttlMs: 1_000, waitMs: -1 }],
      ['ok', { ttlMs: 1_000, waitMs: Number.NaN }],
      ['ok', null],
    ];
    for (const [resource, options] of cases) {
      await expect(coordinator.acquire(resource, options as { ttlMs: number })).rejects.toBeInstanceOf(
        InvalidRequestError,
      );
    }
    await expect(coordinator.acquire('ok', { ttlMs: 0 })).rejects.toThrow(/ttlMs must be an integer from/);
    await expect(coordinator.release('ok', 'not a lease id!')).rejects.toBeInstanceOf(InvalidRequestError);
  });
});
