import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Coordinator, type AttemptReport } from '@fenced/coordinator';
import { LockedError } from '@fenced/shared';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { keysOf } from '../../../fixtures/keys.js';

// Waiting for a resource on real nodes (protocol/waiters.ts): what wakes a waiter, counted in rounds.

let env: RedisNodes;
let clients: Redis[];
let coordinator: Coordinator;

beforeAll(async () => {
  env = await startRedisNodes(3);
  clients = env.urls.map((url) => new Redis(url));
  coordinator = new Coordinator({ nodes: env.urls, retryDelayMs: 100, retryJitterMs: 0 });
  await coordinator.ready();
});

afterAll(async () => {
  await coordinator?.close();
  for (const client of clients ?? []) client.disconnect();
  await env?.stop();
});

describe('a waiter', () => {
  it('is not woken by the undo of its own partial grant', async () => {
    // Another holder on two nodes of three, for longer than the wait: every round is granted on the third node
    // only, and undone there, which the node publishes as a release of this waiter's lease id.
    const resource = `own-undo-${randomUUID()}`;
    const lease = keysOf(resource).lease;
    for (const client of clients.slice(1)) await client.set(lease, 'another-holder', 'PX', 60_000);
    const reports: AttemptReport[] = [];
    const waited = coordinator.acquire(resource, {
      ttlMs: 5_000,
      waitMs: 1_000,
      onAttempt: (report) => void reports.push(report),
    });
    await expect(waited).rejects.toBeInstanceOf(LockedError);
    // The first round; one more once subscribed (a release may have come in between); one at the end of the wait,
    // which the holder's 60 s outlasts. Woken by its own undo, it ran a round every round trip instead.
    expect(reports.length).toBeLessThanOrEqual(3);
    const firstVotes = await reports[0]!.votes;
    expect(firstVotes[0]).toEqual({ vote: 'for' });
    expect(await clients[0]!.get(lease)).toBeNull();
    for (const client of clients.slice(1)) await client.del(lease);
  });
});
