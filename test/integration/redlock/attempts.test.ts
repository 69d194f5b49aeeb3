import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import Redlock, { ExecutionError, ResourceLockedError } from '@fenced/redlock';
import { LeaseLostError } from '@fenced/shared';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { lockValue } from './redlock-fixture.js';

// redlock v5 semantics its users rely on, beyond what node-redlock's own tests check: attempts counted per
// attempt (also on success), `retryCount: -1`, and the `error` event of a long lock whose keeper lost it.

let env: RedisNodes;
let nodes: Redis[];
const redlocks: Redlock[] = [];

function newRedlock(settings?: ConstructorParameters<typeof Redlock>[1]): Redlock {
  const redlock = new Redlock(nodes, settings);
  redlocks.push(redlock);
  return redlock;
}

beforeAll(async () => {
  env = await startRedisNodes(3);
  nodes = env.urls.map((url) => new Redis(url));
});

afterAll(async () => {
  await Promise.all(redlocks.map((r) => r.coordinator.close()));
  for (const node of nodes ?? []) node.disconnect();
  await env?.stop();
});

describe('@fenced/redlock attempts', () => {
  it('retryCount -1 keeps trying until granted; the lock lists every attempt, the refused ones first', async () => {
    const holder = newRedlock();
    const waiter = newRedlock({ retryCount: -1, retryDelay: 50, retryJitter: 0 });
    const held = await holder.acquire(['{attempts}forever'], 60_000);
    const pending = waiter.acquire(['{attempts}forever'], 5_000);
    // Held for more than one retry delay (plus one attempt's round), so the waiter was refused at least once.
    await sleep(300);
    await held.release();
    const lock = await pending;
    const attempts = await Promise.all(lock.attempts);
    expect(attempts.length).toBeGreaterThan(1);
    for (const refused of attempts.slice(0, -1)) {
      expect(refused.votesFor.size).toBe(0);
      expect(refused.votesAgainst.size).toBe(3);
      for (const vote of refused.votesAgainst.values()) expect(vote).toBeInstanceOf(ResourceLockedError);
    }
    expect(attempts.at(-1)!.votesFor.size).toBe(3);
    expect(attempts.at(-1)!.votesAgainst.size).toBe(0);
    await lock.release();
  });

  it('retryCount 0 makes exactly one attempt', async () => {
    const holder = newRedlock();
    const held = await holder.acquire(['{attempts}once'], 60_000);
    const error: unknown = await newRedlock({ retryCount: 0 })
      .acquire(['{attempts}once'], 1_000)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ExecutionError);
    expect((error as ExecutionError).attempts.length).toBe(1);
    await held.release();
  });
});

describe('@fenced/redlock locks longer than maxTtlMs', () => {
  it('emits an `error` (ExecutionError caused by LeaseLostError) and zeroes expiration when the keeper loses the lock', async () => {
    const maxTtlMs = 1_000;
    // Its own key prefix: the maximum TTL is the cluster's setting under a prefix, and the other tests share the nodes.
    const keyPrefix = 'fenced-max-ttl';
    const redlock = newRedlock({ maxTtlMs, keyPrefix });
    const errors: Error[] = [];
    redlock.on('error', (error: Error) => errors.push(error));
    const lock = await redlock.acquire(['{attempts}kept'], 10 * maxTtlMs);
    expect(await lockValue(nodes[0]!, '{attempts}kept')).toBe(lock.value);
    // Another holder on every node: the keeper's next extension finds it.
    for (const node of nodes) await node.set('{attempts}kept', 'successor', 'PX', 60_000);
    for (let i = 0; i < 200 && errors.length === 0; i++) await sleep(20);
    const lost = errors.find((e) => e instanceof ExecutionError);
    expect(lost).toBeInstanceOf(ExecutionError);
    expect(lost!.cause).toBeInstanceOf(LeaseLostError);
    expect(lock.expiration).toBe(0);
    // The successor's keys are untouched.
    for (const node of nodes) expect(await node.get('{attempts}kept')).toBe('successor');
    for (const node of nodes) await node.del('{attempts}kept');
  });
});
