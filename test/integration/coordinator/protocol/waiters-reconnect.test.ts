import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Coordinator } from '@fenced/coordinator';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';

let env: RedisNodes;

beforeAll(async () => {
  env = await startRedisNodes(3, { useExisting: false });
});

afterAll(async () => {
  await env?.stop();
});

describe('release wake-ups across node restarts', () => {
  it('still wakes a waiter by pub/sub after every node restarted (its subscriptions are renewed)', async () => {
    const resource = `reconnect-${randomUUID()}`;
    const holder = new Coordinator({ nodes: env.urls, nodeTimeoutMs: 1_000 });
    // The fallback would only retry when the holder's 60 s lease runs out, far beyond the wait: only a
    // release message can hand the lease over within it.
    const waiter = new Coordinator({ nodes: env.urls, nodeTimeoutMs: 1_000, retryDelayMs: 60_000 });
    try {
      const lease = await holder.acquire(resource, { ttlMs: 60_000 });
      const waiting = waiter.acquire(resource, { ttlMs: 5_000, waitMs: 20_000 });
      await sleep(300); // the waiter has failed once and subscribed
      for (const node of env.nodes) await node.restart({ keepData: true });
      // Both coordinators reconnect on their own; a release needs a majority of them back.
      for (let i = 0; i < 100 && (await holder.nodeStatus()).some((n) => !n.voting); i++) await sleep(50);
      await sleep(300); // the waiter's subscriber connections are back and have resubscribed
      const released = performance.now();
      await lease.release();
      const next = await waiting;
      // Without a release message the waiter would get the lease only from its last attempt when its 20 s wait
      // ends; handed over well before that, it was woken by pub/sub (not a performance bound: a logic check).
      expect(performance.now() - released).toBeLessThan(10_000);
      expect(next.token).toBeGreaterThan(lease.token);
      await next.release();
    } finally {
      await Promise.all([holder.close(), waiter.close()]);
    }
  });
});
