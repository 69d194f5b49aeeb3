import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Coordinator } from '@fenced/coordinator';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { eventually, keysOf } from '../../../fixtures/coordinator-fixture.js';

let env: RedisNodes;

beforeAll(async () => {
  env = await startRedisNodes(3, { useExisting: false });
});

afterAll(async () => {
  await env?.stop();
});

/** How many connections of each node are subscribed to `channel` (0 for a node that does not answer). */
async function subscribersPerNode(channel: string): Promise<number[]> {
  return Promise.all(
    env.urls.map(async (url) => {
      const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0 }).on(
        'error',
        () => undefined,
      );
      try {
        await client.connect();
        const reply = (await client.call('PUBSUB', 'NUMSUB', channel)) as [string, number];
        return Number(reply[1]);
      } catch {
        return 0;
      } finally {
        client.disconnect();
      }
    }),
  );
}

describe('release wake-ups across node restarts', () => {
  it('still wakes a waiter by pub/sub after every node restarted (its subscriptions are renewed)', async () => {
    const resource = `reconnect-${randomUUID()}`;
    const { channel } = keysOf(resource);
    // Generous node timeouts: on a saturated machine a node restarted with fsync-always may take seconds to answer,
    // and this test is about the wake-up, not about how fast a node answers.
    const holder = new Coordinator({ nodes: env.urls, nodeTimeoutMs: 15_000 });
    // The fallback would only retry when the holder's lease runs out, far beyond the wait: only a release message
    // can hand the lease over before the wait ends.
    const waiter = new Coordinator({ nodes: env.urls, nodeTimeoutMs: 15_000, retryDelayMs: 600_000 });
    try {
      const lease = await holder.acquire(resource, { ttlMs: 600_000 });
      const waiting = waiter.acquire(resource, { ttlMs: 5_000, waitMs: 90_000 });
      waiting.catch(() => undefined); // awaited below; a failure before that must not surface as unhandled
      await eventually(async () => (await subscribersPerNode(channel)).every((n) => n > 0), {
        what: 'the waiter to subscribe on every node',
        timeoutMs: 60_000,
      });
      for (const node of env.nodes) await node.restart({ keepData: true });
      // Both coordinators reconnect on their own; a release needs a majority of them back.
      await eventually(async () => (await holder.nodeStatus()).every((n) => n.voting), {
        what: 'the holder to see every node vote again',
        timeoutMs: 60_000,
        intervalMs: 50,
      });
      // The waiter's subscriber connections are back and have resubscribed (a restarted node forgot them).
      await eventually(async () => (await subscribersPerNode(channel)).every((n) => n > 0), {
        what: 'the waiter to resubscribe on every restarted node',
        timeoutMs: 60_000,
      });
      const released = performance.now();
      await lease.release();
      const next = await waiting;
      // Without a release message the waiter would get the lease only from its last attempt when its 90 s wait
      // ends; handed over long before that, it was woken by pub/sub (not a performance bound: a logic check).
      expect(performance.now() - released).toBeLessThan(45_000);
      expect(next.token).toBeGreaterThan(lease.token);
      await next.release();
    } finally {
      await Promise.all([holder.close(), waiter.close()]);
    }
  }, 240_000);
});
