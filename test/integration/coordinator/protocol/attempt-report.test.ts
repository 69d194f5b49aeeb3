import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Coordinator, type AttemptReport } from '@fenced/coordinator';
import { InvalidRequestError } from '@fenced/shared';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { keysOf } from '../../../fixtures/keys.js';

// The coordinator's per-node report of every attempt (`onAttempt`, lease/attempt-report.ts) on real nodes: what
// each node's own reply was, whatever the outcome.

let env: RedisNodes;
let clients: Redis[];
let coordinator: Coordinator;

beforeAll(async () => {
  env = await startRedisNodes(3);
  clients = env.urls.map((url) => new Redis(url));
  coordinator = new Coordinator({ nodes: env.urls });
  // Initializes the fresh nodes before any test plants a key on them.
  await coordinator.ready();
});

afterAll(async () => {
  await coordinator?.close();
  for (const client of clients ?? []) client.disconnect();
  await env?.stop();
});

describe('onAttempt: every node its own vote', () => {
  it('acquire, extend and release report a node holding another value as against, the others as for', async () => {
    const resource = `report-${randomUUID()}`;
    const lease = keysOf(resource).lease;
    await clients[2]!.set(lease, 'another-holder', 'PX', 60_000);
    const reports: AttemptReport[] = [];
    const onAttempt = (report: AttemptReport): number => reports.push(report);
    const granted = await coordinator.acquire([resource], { ttlMs: 5_000, onAttempt });
    await granted.extend(5_000, { onAttempt });
    await granted.release({ onAttempt });
    expect(reports.map((r) => [r.operation, r.resources, r.succeeded])).toEqual([
      ['acquire', [resource], true],
      ['extend', [resource], true],
      ['release', [resource], true],
    ]);
    const [acquired, extended, released] = await Promise.all(reports.map((r) => r.votes));
    expect(acquired).toEqual([
      { vote: 'for' },
      { vote: 'for' },
      { vote: 'against', applied: 0, reason: 'held', resource },
    ]);
    // The third node never held this lease: it refuses to extend or release it.
    for (const votes of [extended, released]) {
      expect(votes).toEqual([
        { vote: 'for' },
        { vote: 'for' },
        { vote: 'against', applied: 0, reason: 'not-held', resource },
      ]);
    }
    expect(await clients[2]!.get(lease)).toBe('another-holder');
    await clients[2]!.del(lease);
  });

  it('reports every round of a refused acquire, and a hook that throws changes nothing', async () => {
    const resource = `report-${randomUUID()}`;
    const lease = keysOf(resource).lease;
    for (const client of clients.slice(1)) await client.set(lease, 'another-holder', 'PX', 60_000);
    const reports: AttemptReport[] = [];
    const refused = await coordinator.tryAcquire(resource, {
      ttlMs: 5_000,
      onAttempt: (report) => {
        reports.push(report);
        throw new Error('a hook that throws');
      },
    });
    expect(refused).toBeNull();
    expect(reports.length).toBe(1);
    expect(reports[0]!.succeeded).toBe(false);
    expect(await reports[0]!.votes).toEqual([
      { vote: 'for' },
      { vote: 'against', applied: 0, reason: 'held', resource },
      { vote: 'against', applied: 0, reason: 'held', resource },
    ]);
    // The grant on the first node was undone before the attempt returned.
    expect(await clients[0]!.exists(lease)).toBe(0);
    for (const client of clients) await client.del(lease);
  });

  it('refuses an onAttempt that is not a function, saying what it got', async () => {
    const error: unknown = await coordinator
      .acquire('report-bad-hook', { ttlMs: 5_000, onAttempt: 'yes' as unknown as () => void })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect((error as Error).message).toBe('onAttempt must be a function (or left out), got string');
  });
});
