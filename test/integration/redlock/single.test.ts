import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import Redlock, { ExecutionError, ResourceLockedError } from '@fenced/redlock';
import { freePort } from '@fenced/test-utils/free-port';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { lockTtl, lockValue, storedToken } from './redlock-fixture.js';

// node-redlock v5's src/single.test.ts, ported to @fenced/redlock on one real Redis node. Every adaptation is
// commented with what fenced changes and why; the cluster variant of the original is not ported (fenced nodes are
// standalone masters, DESIGN §3).

// As in the original: a Redlock that initializes the nodes records a maximum TTL that every integer duration fits
// (REDLOCK_MAX_TTL_MS), so this is granted as one lease of this length.
const LONG = Math.floor(Number.MAX_SAFE_INTEGER / 10);

/**
 * "The lock expiration was off by more than 200ms". Adapted: the original compared `floor(pttl / 200)` with
 * `floor(duration / 200)`, which fails whenever a millisecond has passed and the duration is a multiple of 200.
 */
async function expectTtlNear(node: Redis, resource: string, duration: number): Promise<void> {
  const pttl = await lockTtl(node, resource);
  expect(pttl).toBeGreaterThan(duration - 200);
  expect(pttl).toBeLessThanOrEqual(duration);
}

let env: RedisNodes;
let redis: Redis;
const redlocks: Redlock[] = [];

function newRedlock(...args: Parameters<typeof createRedlock>): Redlock {
  const redlock = createRedlock(...args);
  redlocks.push(redlock);
  return redlock;
}
function createRedlock(settings?: ConstructorParameters<typeof Redlock>[1]): Redlock {
  return new Redlock([redis], settings);
}

beforeAll(async () => {
  env = await startRedisNodes(1);
  redis = new Redis(env.urls[0]!);
});

afterAll(async () => {
  // Each Redlock closes its coordinator; the shared client is closed once, here.
  await Promise.all(redlocks.map((r) => r.coordinator.close()));
  redis?.disconnect();
  await env?.stop();
});

describe('@fenced/redlock on a single instance (ported from node-redlock)', () => {
  it('refuses to use a non-integer duration', async () => {
    const redlock = newRedlock();
    const duration = Number.MAX_SAFE_INTEGER / 10;
    await expect(redlock.acquire(['{redlock}float'], duration)).rejects.toThrow(
      'Duration must be an integer value in milliseconds.',
    );
  });

  it('keeps a lock longer than maxTtlMs: the lease on the node never exceeds maxTtlMs and is extended until the duration is over', async () => {
    const maxTtlMs = 2_000;
    // Its own key prefix: the maximum TTL is a setting of the cluster (recorded on the nodes under the prefix), and
    // the other tests here share these nodes with the default one.
    const keyPrefix = 'fenced-max-ttl';
    const redlock = newRedlock({ maxTtlMs, keyPrefix });
    const duration = 3 * maxTtlMs;

    const lock = await redlock.acquire(['{redlock}long'], duration);
    expect(lock.expiration).toBeGreaterThan(Date.now() + maxTtlMs);
    expect(await lockTtl(redis, '{redlock}long')).toBeLessThanOrEqual(maxTtlMs);
    const token = await storedToken(redis, '{redlock}long', keyPrefix);

    // Past the first lease's ttl, the same grant still holds the resource: extended, with the same token.
    await sleep(maxTtlMs + 500);
    expect(await lockValue(redis, '{redlock}long')).toBe(lock.value);
    expect(await lockTtl(redis, '{redlock}long')).toBeLessThanOrEqual(maxTtlMs);
    expect(await storedToken(redis, '{redlock}long', keyPrefix)).toBe(token);
    expect(lock.token).toBe(token);

    // Once the requested duration is over, the lock is gone, as it would have expired.
    await sleep(Math.max(0, lock.expiration - Date.now()) + 100);
    expect(await redis.get('{redlock}long')).toBeNull();
  });

  it('acquires, extends, and releases a single lock', async () => {
    const redlock = newRedlock();
    const duration = LONG;

    let lock = await redlock.acquire(['{redlock}a'], duration);
    expect(await lockValue(redis, '{redlock}a')).toBe(lock.value);
    await expectTtlNear(redis, '{redlock}a', duration);
    // fenced addition: the lock carries the fencing token the node stores with it.
    expect(lock.token).toBe(await storedToken(redis, '{redlock}a'));

    lock = await lock.extend(3 * duration);
    expect(await lockValue(redis, '{redlock}a')).toBe(lock.value);
    await expectTtlNear(redis, '{redlock}a', 3 * duration);
    expect(lock.token).toBe(await storedToken(redis, '{redlock}a'));

    await lock.release();
    expect(await redis.get('{redlock}a')).toBeNull();
  });

  it('acquires, extends, and releases a multi-resource lock', async () => {
    const redlock = newRedlock();
    const duration = LONG;

    let lock = await redlock.acquire(['{redlock}a1', '{redlock}a2'], duration);
    for (const r of ['{redlock}a1', '{redlock}a2']) {
      expect(await lockValue(redis, r)).toBe(lock.value);
      await expectTtlNear(redis, r, duration);
      // fenced addition: one token per resource.
      expect(lock.tokens.get(r)).toBe(await storedToken(redis, r));
    }
    expect(lock.token).toBeUndefined();

    lock = await lock.extend(3 * duration);
    for (const r of ['{redlock}a1', '{redlock}a2']) {
      expect(await lockValue(redis, r)).toBe(lock.value);
      await expectTtlNear(redis, r, 3 * duration);
    }

    await lock.release();
    expect(await redis.get('{redlock}a1')).toBeNull();
    expect(await redis.get('{redlock}a2')).toBeNull();
  });

  it('locks fail when redis is unreachable', async () => {
    const unreachable = new Redis({
      host: '127.0.0.1',
      // Adapted: a free loopback port rather than 6379, where a developer may run a Redis of their own.
      port: await freePort(),
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      autoResubscribe: false,
      retryStrategy: () => null,
      reconnectOnError: () => false,
    });
    unreachable.on('error', () => undefined);
    const redlock = new Redlock([unreachable]);
    const errors: Error[] = [];
    redlock.on('error', (e: Error) => errors.push(e));
    try {
      const error: unknown = await redlock.acquire(['{redlock}b'], LONG).then(
        () => new Error('This lock should not be acquired.'),
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ExecutionError);
      const attempts = await Promise.allSettled((error as ExecutionError).attempts);
      expect(attempts.length).toBe(11);
      for (const e of attempts) {
        expect(e.status).toBe('fulfilled');
        if (e.status === 'fulfilled') {
          expect(e.value.votesAgainst.size).toBe(1);
          // The error the client's own calls failed with, as redlock reports it.
          for (const v of e.value.votesAgainst.values()) expect(v.message).toBe('Connection is closed.');
        }
      }
      // The node's failure is reported on the `error` event, as redlock does.
      expect(errors.length).toBeGreaterThan(0);
    } finally {
      await redlock.coordinator.close();
      unreachable.disconnect();
    }
  });

  it('locks automatically expire', async () => {
    const redlock = newRedlock();
    const duration = 200;

    const lock = await redlock.acquire(['{redlock}d'], duration);
    expect(await lockValue(redis, '{redlock}d')).toBe(lock.value);

    await sleep(300);

    const lock2 = await redlock.acquire(['{redlock}d'], duration);
    expect(await lockValue(redis, '{redlock}d')).toBe(lock2.value);
    // fenced addition: the later lock has the larger token.
    expect(lock2.token! > lock.token!).toBe(true);

    await lock2.release();
    expect(await redis.get('{redlock}d')).toBeNull();
  });

  it('individual locks are exclusive', async () => {
    const redlock = newRedlock();
    const duration = LONG;

    const lock = await redlock.acquire(['{redlock}c'], duration);
    expect(await lockValue(redis, '{redlock}c')).toBe(lock.value);
    await expectTtlNear(redis, '{redlock}c', duration);

    const error: unknown = await redlock.acquire(['{redlock}c'], duration).then(
      () => new Error('This lock should not be acquired.'),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ExecutionError);
    const attempts = await Promise.allSettled((error as ExecutionError).attempts);
    expect(attempts.length).toBe(11);
    for (const e of attempts) {
      expect(e.status).toBe('fulfilled');
      if (e.status === 'fulfilled') {
        for (const v of e.value.votesAgainst.values()) expect(v).toBeInstanceOf(ResourceLockedError);
      }
    }

    await lock.release();
    expect(await redis.get('{redlock}c')).toBeNull();
  });

  it('overlapping multi-locks are exclusive', async () => {
    const redlock = newRedlock();
    const duration = LONG;

    const lock = await redlock.acquire(['{redlock}c1', '{redlock}c2'], duration);
    expect(await lockValue(redis, '{redlock}c1')).toBe(lock.value);
    expect(await lockValue(redis, '{redlock}c2')).toBe(lock.value);

    const error: unknown = await redlock.acquire(['{redlock}c2', '{redlock}c3'], duration).then(
      () => new Error('This lock should not be acquired.'),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ExecutionError);
    expect((error as ExecutionError).attempts.length).toBe(11);
    expect(await lockValue(redis, '{redlock}c1')).toBe(lock.value);
    expect(await lockValue(redis, '{redlock}c2')).toBe(lock.value);
    expect(await redis.get('{redlock}c3')).toBeNull();
    for (const e of await Promise.allSettled((error as ExecutionError).attempts)) {
      expect(e.status).toBe('fulfilled');
      if (e.status === 'fulfilled') {
        for (const v of e.value.votesAgainst.values()) expect(v).toBeInstanceOf(ResourceLockedError);
      }
    }

    await lock.release();
    for (const r of ['{redlock}c1', '{redlock}c2', '{redlock}c3']) {
      expect(await redis.get(r)).toBeNull();
    }
  });

  it('the `using` helper acquires, extends, and releases locks', async () => {
    const redlock = newRedlock();
    const duration = 500;

    const value = await redlock.using(
      ['{redlock}x'],
      duration,
      { automaticExtensionThreshold: 200 },
      async (signal) => {
        const held = await lockValue(redis, '{redlock}x');
        expect(typeof held).toBe('string');
        // Wait to ensure that the lock is extended.
        await sleep(700);
        expect(signal.aborted).toBe(false);
        expect(signal.error).toBeUndefined();
        expect(await lockValue(redis, '{redlock}x')).toBe(held);
        return held;
      },
    );

    expect(typeof value).toBe('string');
    expect(await redis.get('{redlock}x')).toBeNull();
  });

  it('the `using` helper is exclusive', async () => {
    const redlock = newRedlock();
    const duration = 500;
    let locked = false;
    const routine = async (signal: AbortSignal & { error?: Error }): Promise<string | null> => {
      expect(locked).toBe(false);
      locked = true;
      const held = await lockValue(redis, '{redlock}y');
      expect(typeof held).toBe('string');
      await sleep(700);
      expect(signal.error).toBeUndefined();
      expect(signal.aborted).toBe(false);
      expect(await lockValue(redis, '{redlock}y')).toBe(held);
      locked = false;
      return held;
    };
    // Adapted: the original awaited each `using` inside Promise.all, so they never overlapped; here both run at
    // once, and the second waits for the first (its retry window, 10 × 300 ms, covers the 700 ms routine).
    const [lock1, lock2] = await Promise.all([
      redlock.using(['{redlock}y'], duration, { automaticExtensionThreshold: 200 }, routine),
      redlock.using(['{redlock}y'], duration, { automaticExtensionThreshold: 200 }, routine),
    ]);
    expect(lock1).not.toBe(lock2);
    expect(await redis.get('{redlock}y')).toBeNull();
  });
});
