import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Coordinator, type MultiLease } from '@fenced/coordinator';
import { InvalidRequestError, LeaseLostError, LockedError, QuorumUnavailableError } from '@fenced/shared';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';

// Multi-resource leases (protocol/acquire-within.ts) on real Redis nodes: all or nothing, exclusive per resource,
// no deadlock or livelock between overlapping sets taken in different orders, and never a partial grant left.

let env: RedisNodes;
let coordinator: Coordinator;
let raw: Redis[];
const unique = (name: string): string => `${name}-${randomUUID()}`;
const leaseKey = (resource: string): string => `fenced:{${resource}}:lease`;

beforeAll(async () => {
  env = await startRedisNodes(3);
  coordinator = new Coordinator({ nodes: env.urls });
  await coordinator.ready();
  raw = env.urls.map((url) => new Redis(url));
});

afterAll(async () => {
  raw?.forEach((r) => r.disconnect());
  await coordinator?.close();
  await env?.stop();
});

/** Not held on a majority, and no lease key of ours left on any node. */
async function expectFree(resource: string): Promise<void> {
  expect(await coordinator.inspect(resource)).toEqual({ held: false });
  for (const node of raw) expect(await node.exists(leaseKey(resource))).toBe(0);
}

describe('multi-resource leases', () => {
  it('grants every resource with its own token, one validity, and releases them as one', async () => {
    const [a, b, c] = [unique('a'), unique('b'), unique('c')];
    const lease = await coordinator.acquire([c, a, b, a], { ttlMs: 10_000 });
    expect(lease.resources).toEqual([a, b, c].sort());
    expect(lease.tokens.size).toBe(3);
    for (const resource of lease.resources) {
      expect(await coordinator.inspect(resource)).toEqual({ held: true, token: lease.tokens.get(resource) });
    }
    expect(lease.validityMs).toBeGreaterThan(9_000);
    expect(lease.validityMs).toBeLessThanOrEqual(10_000);
    expect(lease.proofs).toBeUndefined();
    expect('token' in lease).toBe(false);
    expect(lease.fences().map((f) => f.resource)).toEqual(lease.resources);

    const before = lease.remainingMs();
    await sleep(50);
    await lease.extend(20_000);
    expect(lease.remainingMs()).toBeGreaterThan(before);
    expect(lease.tokens.get(a)).toBe((await coordinator.inspect(a)).token);

    await lease.release();
    for (const resource of lease.resources) await expectFree(resource);
    await lease.release(); // idempotent
    await expect(lease.extend()).rejects.toBeInstanceOf(LeaseLostError);
  });

  it('refuses an empty list and bad names before touching any node', async () => {
    await expect(coordinator.acquire([], { ttlMs: 1_000 })).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(coordinator.acquire(['ok', ''], { ttlMs: 1_000 })).rejects.toBeInstanceOf(
      InvalidRequestError,
    );
    await expectFree('ok');
  });

  it('supports await using and using() with arrays', async () => {
    const [a, b] = [unique('a'), unique('b')];
    {
      await using lease = await coordinator.acquire([a, b], { ttlMs: 5_000 });
      expect((await coordinator.inspect(b)).held).toBe(true);
      expect(lease.resources).toHaveLength(2);
    }
    await expectFree(a);
    await expectFree(b);
    // A ttl well above an event-loop stall on a loaded machine, and work three times as long: the keeper extends the
    // whole set.
    const tokens = await coordinator.using([b, a], { ttlMs: 1_000 }, async (lease, signal) => {
      await sleep(3_000);
      expect(signal.aborted).toBe(false);
      return lease.tokens;
    });
    expect(tokens.size).toBe(2);
    await expectFree(a);
    await expectFree(b);
  });

  it('never lets two overlapping multi-leases hold a resource at once when there are no faults', async () => {
    const pool = Array.from({ length: 4 }, (_, i) => unique(`pool${i}`));
    const holders = new Map<string, number>();
    let overlaps = 0;
    let granted = 0;
    const clients = Array.from({ length: 4 }, () => new Coordinator({ nodes: env.urls }));
    try {
      await Promise.all(
        clients.map(async (client, w) => {
          for (let i = 0; i < 10; i++) {
            // Two or three resources of four, in a random order: every pair of requests overlaps.
            const set = [...pool].sort(() => Math.random() - 0.5).slice(0, 2 + ((w + i) % 2));
            const lease = await client.acquire(set, { ttlMs: 10_000, waitMs: 30_000 });
            granted++;
            for (const r of lease.resources) {
              if ((holders.get(r) ?? 0) > 0) overlaps++;
              holders.set(r, (holders.get(r) ?? 0) + 1);
            }
            await sleep(Math.random() * 5);
            for (const r of lease.resources) holders.set(r, holders.get(r)! - 1);
            await lease.release();
          }
        }),
      );
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
    expect(granted).toBe(40);
    expect(overlaps).toBe(0);
    for (const r of pool) await expectFree(r);
  });

  it('lets A,B and B,A requests under contention all finish within their waits (no deadlock, no livelock)', async () => {
    const [a, b] = [unique('A'), unique('B')];
    const clients = Array.from({ length: 4 }, () => new Coordinator({ nodes: env.urls }));
    const started = performance.now();
    try {
      const results = await Promise.allSettled(
        clients.map(async (client, w) => {
          for (let i = 0; i < 15; i++) {
            const lease: MultiLease = await client.acquire(w % 2 === 0 ? [a, b] : [b, a], {
              ttlMs: 5_000,
              waitMs: 10_000,
            });
            await sleep(1);
            await lease.release();
          }
        }),
      );
      expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
    // 60 hand-overs; a livelock would spend the waits (10 s each) and fail above.
    expect(performance.now() - started).toBeLessThan(20_000);
    await expectFree(a);
    await expectFree(b);
  });

  it('leaves no partial grant behind when the wait runs out', async () => {
    const [a, b, c] = [unique('a'), unique('b'), unique('c')].sort();
    const blocker = await coordinator.acquire(b!, { ttlMs: 10_000 });
    const error: unknown = await coordinator
      .acquire([a!, b!, c!], { ttlMs: 10_000, waitMs: 300 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockedError);
    expect((error as LockedError).resource).toBe(b);
    await expectFree(a!);
    await expectFree(c!);
    expect(await coordinator.tryAcquire([a!, b!, c!], { ttlMs: 10_000 })).toBeNull();
    await expectFree(a!);
    expect(await coordinator.inspect(b!)).toEqual({ held: true, token: blocker.token });
    await blocker.release();
    // The resource that blocked is free again: the same request now gets all three.
    const lease = await coordinator.acquire([a!, b!, c!], { ttlMs: 10_000, waitMs: 1_000 });
    expect(lease.tokens.get(b!)! > blocker.token).toBe(true);
    await lease.release();
  });

  it('is woken by the release of the resource that blocked it, not by its timed fallback', async () => {
    const [a, b] = [unique('a'), unique('b')].sort();
    const blocker = await coordinator.acquire(b!, { ttlMs: 60_000 });
    const waiting = coordinator.acquire([a!, b!], { ttlMs: 10_000, waitMs: 30_000 });
    await sleep(300);
    const released = performance.now();
    await blocker.release();
    const lease = await waiting;
    // The fallback would be the holder's remaining ttl (~60 s).
    expect(performance.now() - released).toBeLessThan(5_000);
    await lease.release();
  });

  it('leaves no partial grant behind when a later resource fails on a majority of nodes', async () => {
    const [a, b, c] = [unique('a'), unique('b'), unique('c')].sort();
    // A lease key of the wrong type on two of three nodes: the acquire script fails there (a node error, not a
    // holder), so the round fails after `a` was granted.
    await raw[1]!.hset(leaseKey(c!), 'x', '1');
    await raw[2]!.hset(leaseKey(c!), 'x', '1');
    try {
      await expect(coordinator.acquire([a!, b!, c!], { ttlMs: 10_000, waitMs: 0 })).rejects.toBeInstanceOf(
        QuorumUnavailableError,
      );
      await expectFree(a!);
      await expectFree(b!);
    } finally {
      await raw[1]!.del(leaseKey(c!));
      await raw[2]!.del(leaseKey(c!));
    }
  });

  it('leaves no partial grant behind when the caller aborts the wait', async () => {
    const [a, b] = [unique('a'), unique('b')].sort();
    const blocker = await coordinator.acquire(b!, { ttlMs: 10_000 });
    const controller = new AbortController();
    const waiting = coordinator.acquire([a!, b!], {
      ttlMs: 10_000,
      waitMs: 30_000,
      signal: controller.signal,
    });
    await sleep(200);
    controller.abort(new Error('stop'));
    await expect(waiting).rejects.toThrow('stop');
    await expectFree(a!);
    await blocker.release();
  });
});
