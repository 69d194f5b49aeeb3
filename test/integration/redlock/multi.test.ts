import { generateKeyPairSync } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import Redlock, { ExecutionError, ResourceLockedError, type RedlockAbortSignal } from '@fenced/redlock';
import { LeaseLostError, verifyProof, leaseIdDigest } from '@fenced/shared';
import { runExample } from '../../../examples/redlock-drop-in.js';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { lockTtl, lockValue } from './redlock-fixture.js';

// node-redlock v5's src/multi.test.ts, ported to @fenced/redlock on three real Redis nodes, then the behaviours
// fenced deliberately changes (README "Migrating from redlock"). Adaptations are commented.

// As in the original (granted as one lease of this length: see single.test.ts).
const LONG = Math.floor(Number.MAX_SAFE_INTEGER / 10);

let env: RedisNodes;
let redisA: Redis;
let redisB: Redis;
let redisC: Redis;
const redlocks: Redlock[] = [];

function newRedlock(settings?: ConstructorParameters<typeof Redlock>[1]): Redlock {
  const redlock = new Redlock([redisA, redisB, redisC], settings);
  redlocks.push(redlock);
  return redlock;
}

/** "The lock expiration was off by more than 200ms" (adapted from a floor(x / 200) comparison, see single.test). */
async function expectTtlNear(node: Redis, resource: string, duration: number): Promise<void> {
  const pttl = await lockTtl(node, resource);
  expect(pttl).toBeGreaterThan(duration - 200);
  expect(pttl).toBeLessThanOrEqual(duration);
}

beforeAll(async () => {
  env = await startRedisNodes(3);
  [redisA, redisB, redisC] = env.urls.map((url) => new Redis(url)) as [Redis, Redis, Redis];
});

afterAll(async () => {
  await Promise.all(redlocks.map((r) => r.coordinator.close()));
  for (const r of [redisA, redisB, redisC]) r?.disconnect();
  await env?.stop();
});

describe('@fenced/redlock on three instances (ported from node-redlock)', () => {
  it('acquires, extends, and releases a single lock', async () => {
    const redlock = newRedlock();
    const duration = LONG;

    let lock = await redlock.acquire(['{redlock}a'], duration);
    for (const node of [redisA, redisB, redisC]) {
      expect(await lockValue(node, '{redlock}a')).toBe(lock.value);
      await expectTtlNear(node, '{redlock}a', duration);
    }

    lock = await lock.extend(3 * duration);
    for (const node of [redisA, redisB, redisC]) {
      expect(await lockValue(node, '{redlock}a')).toBe(lock.value);
      await expectTtlNear(node, '{redlock}a', 3 * duration);
    }

    await lock.release();
    for (const node of [redisA, redisB, redisC]) expect(await node.get('{redlock}a')).toBeNull();
  });

  it('succeeds when a minority of clients fail', async () => {
    const redlock = newRedlock();
    const duration = LONG;

    // Set a value on redisC so that lock acquisition fails there.
    await redisC.set('{redlock}b', 'other');

    let lock = await redlock.acquire(['{redlock}b'], duration);
    expect(await lockValue(redisA, '{redlock}b')).toBe(lock.value);
    expect(await lockValue(redisB, '{redlock}b')).toBe(lock.value);
    expect(await redisC.get('{redlock}b')).toBe('other');
    await expectTtlNear(redisA, '{redlock}b', duration);
    await expectTtlNear(redisB, '{redlock}b', duration);
    expect(await redisC.pttl('{redlock}b')).toBe(-1);

    lock = await lock.extend(3 * duration);
    expect(await lockValue(redisA, '{redlock}b')).toBe(lock.value);
    expect(await lockValue(redisB, '{redlock}b')).toBe(lock.value);
    expect(await redisC.get('{redlock}b')).toBe('other');
    await expectTtlNear(redisA, '{redlock}b', 3 * duration);
    await expectTtlNear(redisB, '{redlock}b', 3 * duration);
    expect(await redisC.pttl('{redlock}b')).toBe(-1);

    await lock.release();
    expect(await redisA.get('{redlock}b')).toBeNull();
    expect(await redisB.get('{redlock}b')).toBeNull();
    expect(await redisC.get('{redlock}b')).toBe('other');
    await redisC.del('{redlock}b');
  });

  it('fails when a majority of clients fail', async () => {
    const redlock = newRedlock();

    await redisB.set('{redlock}c', 'other1');
    await redisC.set('{redlock}c', 'other2');

    const error: unknown = await redlock.acquire(['{redlock}c'], LONG).then(
      () => new Error('This lock should not be acquired.'),
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ExecutionError);
    // As redlock: one entry per attempt, retryCount + 1 of them.
    const attempts = await Promise.allSettled((error as ExecutionError).attempts);
    expect(attempts.length).toBe(11);
    // The partial grant on redisA was released before giving up.
    expect(await redisA.get('{redlock}c')).toBeNull();
    expect(await redisB.get('{redlock}c')).toBe('other1');
    expect(await redisC.get('{redlock}c')).toBe('other2');
    for (const e of attempts) {
      expect(e.status).toBe('fulfilled');
      if (e.status === 'fulfilled') {
        for (const v of e.value.votesAgainst.values()) {
          expect(v).toBeInstanceOf(ResourceLockedError);
          expect(v.message).toBe('The operation was applied to: 0 of the 1 requested resources.');
        }
      }
    }

    await redisB.del('{redlock}c');
    await redisC.del('{redlock}c');
  });
});

describe('@fenced/redlock where fenced deliberately differs', () => {
  it('gives every lock a fencing token that grows from one holder to the next', async () => {
    const redlock = newRedlock();
    const first = await redlock.acquire(['{fenced}t'], 1_000);
    await first.release();
    const second = await redlock.acquire(['{fenced}t'], 1_000);
    expect(second.token! > first.token!).toBe(true);
    await second.release();
  });

  it('releases a lock that already expired without an error (redlock threw ExecutionError)', async () => {
    const redlock = newRedlock();
    const lock = await redlock.acquire(['{fenced}expired'], 100);
    await sleep(200);
    await expect(lock.release()).resolves.toEqual({ attempts: expect.any(Array) as unknown });
    expect(lock.expiration).toBe(0);
  });

  it('refuses to extend an expired lock, as redlock does', async () => {
    const redlock = newRedlock();
    const lock = await redlock.acquire(['{fenced}late'], 100);
    await sleep(200);
    await expect(lock.extend(1_000)).rejects.toThrow('Cannot extend an already-expired lock.');
  });

  it('reports a lock taken over while held as a lost lock (ExecutionError caused by LeaseLostError)', async () => {
    const redlock = newRedlock();
    const lock = await redlock.acquire(['{fenced}lost'], LONG);
    // Another holder on every node (the keys expire, a successor takes over).
    for (const node of [redisA, redisB, redisC]) await node.set('{fenced}lost', 'successor');
    const error: unknown = await lock.extend(LONG).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ExecutionError);
    expect((error as ExecutionError).cause).toBeInstanceOf(LeaseLostError);
    for (const node of [redisA, redisB, redisC]) await node.del('{fenced}lost');
  });

  it('aborts the `using` signal with signal.error once the lock is lost', async () => {
    const redlock = newRedlock();
    let seen: RedlockAbortSignal | undefined;
    await redlock.using(['{fenced}using-lost'], 500, { automaticExtensionThreshold: 200 }, async (signal) => {
      seen = signal;
      for (const node of [redisA, redisB, redisC]) await node.set('{fenced}using-lost', 'successor');
      // The extension at 200 ms of validity left finds the successor.
      for (let i = 0; i < 100 && !signal.aborted; i++) await sleep(10);
    });
    expect(seen?.aborted).toBe(true);
    expect(seen?.error).toBeInstanceOf(ExecutionError);
    expect(seen?.reason).toBe(seen?.error);
    for (const node of [redisA, redisB, redisC]) await node.del('{fenced}using-lost');
  });

  it('signs every resource of a lock when given a signing key', async () => {
    const key = generateKeyPairSync('ed25519');
    const redlock = newRedlock({ signingKey: { id: 'k1', privateKey: key.privateKey } });
    const lock = await redlock.acquire(['{fenced}s1', '{fenced}s2'], 5_000);
    for (const resource of lock.resources) {
      const proof = lock.proofs!.get(resource)!;
      const claims = {
        resource,
        token: lock.tokens.get(resource)!,
        leaseIdDigest: leaseIdDigest(lock.value),
      };
      expect(verifyProof(new Map([['k1', key.publicKey]]), proof, claims)).toBe('k1');
    }
    await lock.release();
  });
});

describe('examples/redlock-drop-in.ts', () => {
  it('runs a redlock v5 program whose only change is its import', async () => {
    const clients = env.urls.map((url) => new Redis(url));
    try {
      expect(await runExample(clients)).toEqual({ balances: { 'account:1': 85, 'account:2': 15 } });
    } finally {
      for (const client of clients) client.disconnect();
    }
  });
});
