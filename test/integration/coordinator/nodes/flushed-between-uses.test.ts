// Every node flushed between two uses (FLUSHALL in a test's set-up, say): the next acquire works within a caller's
// short retry window. The first vote that finds too few nodes initialized makes the coordinator look at every node at
// once (NodeSet.noteAbstentions), not at its next one-second re-check: every node is reachable and empty, so the
// nodes are initialized afresh, and a retry a few tens of milliseconds later is granted. (A Coordinator's own acquire
// counts nodes that answer "not initialized" as unavailable, not as a wait: it throws QUORUM_UNAVAILABLE at once and
// the caller retries, as the Redlock's retries do here.)
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redlock } from '@fenced/redlock';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';

let env: RedisNodes;
let raw: Redis[];

beforeAll(async () => {
  env = await startRedisNodes(3);
  raw = env.urls.map((url) => new Redis(url));
});

afterAll(async () => {
  for (const client of raw ?? []) client.disconnect();
  await env?.stop();
});

describe('every node flushed between two uses', () => {
  it('a Redlock with retryCount 3 and retryDelay 50 locks again after the flush', async () => {
    const clients = env.urls.map((url) => new Redis(url));
    const redlock = new Redlock(clients, { retryCount: 3, retryDelay: 50, retryJitter: 0 });
    try {
      const first = await redlock.acquire(['flushed'], 2_000);
      await redlock.release(first);
      await Promise.all(raw.map((client) => client.flushall()));
      const again = await redlock.acquire(['flushed'], 2_000);
      expect(again.token).toBeDefined();
      await redlock.release(again);
    } finally {
      await redlock.quit();
      for (const client of clients) client.disconnect();
    }
  });
});
