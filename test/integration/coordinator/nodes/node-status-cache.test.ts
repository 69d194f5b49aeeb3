// The node view for scrapers: cachedNodeStatus() calls no node, recentNodeStatus(maxAgeMs) probes only when the
// view is older than maxAgeMs, and concurrent callers share one probe round. Counted on the nodes themselves
// (INFO commandstats: the probe's PING), not by timing.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Coordinator } from '@fenced/coordinator';
import { startCoordinatorFixture, type CoordinatorFixture } from '../../../fixtures/coordinator-fixture.js';

let coordinator: Coordinator;
let observers: Redis[];
let cluster: CoordinatorFixture;

beforeAll(async () => {
  cluster = await startCoordinatorFixture(3, {
    coordinator: { keyPrefix: `status-${randomUUID().slice(0, 8)}` },
  });
  ({ coordinator, raw: observers } = cluster);
});

afterAll(async () => {
  await cluster?.close();
});

/** PINGs each node has served so far (the coordinator's probes; nothing else here sends PING). */
async function pings(): Promise<number[]> {
  return Promise.all(
    observers.map(async (observer) => {
      const match = /cmdstat_ping:calls=(\d+)/.exec(await observer.info('commandstats'));
      return match === null ? 0 : Number(match[1]);
    }),
  );
}

describe('the cached node view', () => {
  it('answers from the last probes without calling any node', async () => {
    const before = await pings();
    const statuses = coordinator.cachedNodeStatus();
    expect(statuses.map((s) => s.voting)).toEqual([true, true, true]);
    await Promise.all(Array.from({ length: 10 }, () => coordinator.recentNodeStatus(600_000)));
    expect(await pings()).toEqual(before);
  });

  it('probes every node once for concurrent callers when the view is too old', async () => {
    const before = await pings();
    const views = await Promise.all(Array.from({ length: 10 }, () => coordinator.recentNodeStatus(0)));
    expect(views.every((v) => v.length === 3 && v.every((s) => s.reachable && s.voting))).toBe(true);
    expect(await pings()).toEqual(before.map((n) => n + 1));
  });

  it('refuses a negative age', () => {
    expect(() => coordinator.recentNodeStatus(-1)).toThrow(/maxAgeMs/);
  });
});
