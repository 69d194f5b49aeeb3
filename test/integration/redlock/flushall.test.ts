// FLUSHALL between tests, as redlock users' test setups do (node-redlock's own suite deletes every key before its
// tests). One flushed node is repaired by the sealed repair while the other two vote; every node flushed is a
// cluster with no state left anywhere, which a running Redlock initializes afresh as a new one would
// (nodes/node-set.ts, afterProbe, holds the argument).
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Redlock from '@fenced/redlock';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { lockValue } from './redlock-fixture.js';

let env: RedisNodes;
let clients: Redis[];
const redlocks: Redlock[] = [];

function newRedlock(settings?: ConstructorParameters<typeof Redlock>[1]): Redlock {
  const redlock = new Redlock(clients, settings);
  redlocks.push(redlock);
  return redlock;
}

beforeAll(async () => {
  env = await startRedisNodes(3, { useExisting: false });
  clients = env.urls.map((url) => new Redis(url).on('error', () => undefined));
});

afterAll(async () => {
  await Promise.all(redlocks.map((r) => r.coordinator.close()));
  for (const client of clients ?? []) client.disconnect();
  await env?.stop();
});

describe('@fenced/redlock and FLUSHALL', () => {
  it('grants at once after one node was flushed (the other two vote; the flushed one is repaired)', async () => {
    const redlock = newRedlock({ retryCount: 0 });
    const first = await redlock.acquire(['{flush}one'], 10_000);
    await first.release();
    await clients[0]!.flushall();

    const next = await redlock.acquire(['{flush}one'], 10_000);
    expect(next.token! > first.token!).toBe(true);
    expect(await lockValue(clients[1]!, '{flush}one')).toBe(next.value);
    await next.release();
  });

  it('a running Redlock grants again after every node was flushed, with a larger token', async () => {
    const redlock = newRedlock();
    const first = await redlock.acquire(['{flush}all'], 10_000);
    await first.release();
    await Promise.all(clients.map((c) => c.flushall()));

    // Until granted: the nodes are found empty and initialized afresh.
    const next = await redlock.acquire(['{flush}all'], 10_000, { retryCount: -1 });
    // The nodes hold no register any more; this process's proposal (above what it saw, and the time floor) is
    // what keeps the token above the one before the loss.
    expect(next.token! > first.token!).toBe(true);
    // A quorum holds the lease: under load one node may still be answering NOT_INITIALIZED when the others
    // were initialized afresh and granted (it is repaired on a later use, as in the first test).
    const holders = await Promise.all(clients.map((client) => lockValue(client, '{flush}all')));
    expect(holders.filter((value) => value === next.value).length).toBeGreaterThanOrEqual(2);
    await next.release();
  }, 30_000);

  it('a new Redlock on nodes whose every key was deleted (as node-redlock’s suite does) grants at once', async () => {
    await Promise.all(
      clients.map(async (c) => {
        const keys = await c.keys('*');
        if (keys.length > 0) await c.del(keys);
      }),
    );
    const redlock = newRedlock({ retryCount: 0 });
    const lock = await redlock.acquire(['{flush}new'], 10_000);
    expect(await lockValue(clients[2]!, '{flush}new')).toBe(lock.value);
    await lock.release();
  });
});
