import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Coordinator } from '@fenced/coordinator';
import { CoordinatorClosedError, type Lease, type MultiLease } from '@fenced/coordinator';
import { LeaseLostError } from '@fenced/shared';
import type { RedisNodes } from '@fenced/test-utils/redis-cluster';
import type { LeaseProtocol } from '../../../../packages/coordinator/src/protocol/lease-protocol.js';
import {
  eventually,
  startCoordinatorFixture,
  unique,
  type CoordinatorFixture,
} from '../../../fixtures/coordinator-fixture.js';

// Self-renewing leases (`autoExtend`, lease-watch.ts) on real Redis nodes: kept for many ttls with one token,
// the signal aborts with LeaseLostError soon after a majority is lost, onLost runs once, and no timer outlives
// a release, a loss or `coordinator.close()`.

let env: RedisNodes;
let coordinator: Coordinator;
let cluster: CoordinatorFixture;

beforeAll(async () => {
  cluster = await startCoordinatorFixture(3, { redis: { useExisting: false }, raw: false });
  ({ env, coordinator } = cluster);
});

afterEach(async () => {
  for (const node of env.nodes) {
    node.resume();
    if (!node.running) await node.restart({ keepData: true });
  }
  await cluster.closeOthers();
  // Every node answers the shared coordinator again before the next test.
  await eventually(
    () =>
      Promise.all(env.urls.map((_, i) => coordinator.nodeStatus().then((s) => s[i]?.voting === true))).then(
        (votes) => votes.every(Boolean),
      ),
    { timeoutMs: 10_000, what: 'every node voting again' },
  );
});

afterAll(async () => {
  await cluster?.close();
});

/**
 * Counts the extensions a coordinator sends: every keeper extends through `extendLease` of the steps its leases
 * were granted by (the coordinator's private `leases`).
 */
function countExtensions(c: Coordinator): { readonly count: number } {
  const counter = { count: 0 };
  const steps = (c as unknown as { leases: LeaseProtocol }).leases;
  const extendLease = steps.extendLease.bind(steps);
  steps.extendLease = (...args) => {
    counter.count++;
    return extendLease(...args);
  };
  return counter;
}

/**
 * After a release, a loss or a close: no keeper extends any more, and no expiry timer fires (a leftover one
 * would abort the signal of a released lease once its ttl passed). Waits `ttlMs` twice to see it.
 */
async function expectNoTimers(
  lease: Lease | MultiLease,
  extensions: { readonly count: number },
  ttlMs: number,
): Promise<void> {
  expect(lease.autoExtending).toBe(false);
  const before = extensions.count;
  const aborted = lease.signal.aborted;
  await sleep(2 * ttlMs);
  expect(extensions.count).toBe(before);
  expect(lease.signal.aborted).toBe(aborted);
}

/**
 * Records when the lease's signal aborts and how much validity the lease reported at that moment (negative:
 * how long after its own end). Abort listeners run synchronously, before the lease changes its state.
 */
function watchAbort(lease: Lease | MultiLease): { abortedAt?: number; remainingAtAbort?: number } {
  const seen: { abortedAt?: number; remainingAtAbort?: number } = {};
  lease.signal.addEventListener('abort', () => {
    seen.abortedAt = performance.now();
    seen.remainingAtAbort = lease.remainingMs();
  });
  return seen;
}

describe('autoExtend', () => {
  it('keeps a lease for ten times its ttl with the same token, then stops every timer on release', async () => {
    const resource = unique('kept');
    const ttlMs = 500;
    const lost: unknown[] = [];
    const extensions = countExtensions(coordinator);
    const lease = await coordinator.acquire(resource, {
      ttlMs,
      autoExtend: true,
      onLost: (e) => lost.push(e),
    });
    expect(lease.autoExtending).toBe(true);
    const token = lease.token;

    const workUntil = performance.now() + 10 * ttlMs;
    while (performance.now() < workUntil) {
      await sleep(100);
      expect(lease.signal.aborted).toBe(false);
      expect(lease.remainingMs()).toBeGreaterThan(0);
    }
    // Held on a majority, by this grant: a lease left alone would have expired nine ttls ago.
    expect(await coordinator.inspect(resource)).toEqual({ held: true, token });
    expect(lease.token).toBe(token);
    expect(lost).toEqual([]);
    expect(extensions.count).toBeGreaterThanOrEqual(10);

    await lease.release();
    expect(lease.signal.aborted).toBe(false); // released, not lost
    await expectNoTimers(lease, extensions, ttlMs);
    expect(await coordinator.inspect(resource)).toEqual({ held: false });
    expect(lost).toEqual([]);
  });

  it('keeps a multi-resource lease too, and stops at the end of an await using block', async () => {
    const [a, b] = [unique('a'), unique('b')];
    const extensions = countExtensions(coordinator);
    let kept: MultiLease | undefined;
    {
      await using lease = await coordinator.acquire([a, b], { ttlMs: 400, autoExtend: true });
      kept = lease;
      await sleep(2_000);
      expect(lease.signal.aborted).toBe(false);
      for (const r of [a, b]) {
        expect(await coordinator.inspect(r)).toEqual({ held: true, token: lease.tokens.get(r) });
      }
    }
    expect(extensions.count).toBeGreaterThan(0);
    await expectNoTimers(kept, extensions, 400);
    expect((await coordinator.inspect(a)).held).toBe(false);
  });

  it('aborts the signal with LeaseLostError within one ttl of the lease end when a majority is paused', async (ctx) => {
    const why = env.missing('pause');
    if (why) ctx.skip(why);
    const ttlMs = 1_000;
    const lost: LeaseLostError[] = [];
    const extensions = countExtensions(coordinator);
    const lease = await coordinator.acquire(unique('paused'), {
      ttlMs,
      autoExtend: true,
      onLost: (e) => lost.push(e),
    });
    const seen = watchAbort(lease);
    await sleep(2 * ttlMs); // a few extensions first
    expect(lease.signal.aborted).toBe(false);

    env.nodes[1]!.pause();
    env.nodes[2]!.pause();
    const pausedAt = performance.now();
    // The lease ends at most one ttl after the pause; the signal must follow within one more ttl.
    await eventually(() => lease.signal.aborted, { timeoutMs: 2 * ttlMs });
    expect(seen.abortedAt! - pausedAt).toBeLessThanOrEqual(2 * ttlMs);
    expect(seen.remainingAtAbort!).toBeGreaterThan(-ttlMs);
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(lost).toEqual([lease.signal.reason]);

    env.nodes[1]!.resume();
    env.nodes[2]!.resume();
    await expectNoTimers(lease, extensions, ttlMs); // the keeper is gone with the lease
    expect(lost).toHaveLength(1);
    await lease.release();
  });

  it('aborts a multi-resource lease when a majority is killed, and calls onLost once', async (ctx) => {
    const why = env.missing('kill', 'restart');
    if (why) ctx.skip(why);
    const ttlMs = 800;
    const lost: LeaseLostError[] = [];
    const c = cluster.another();
    const extensions = countExtensions(c);
    const lease = await c.acquire([unique('x'), unique('y')], {
      ttlMs,
      autoExtend: true,
      onLost: (e) => lost.push(e),
    });
    const seen = watchAbort(lease);
    await Promise.all([env.nodes[0]!.kill(), env.nodes[2]!.kill()]);
    const killedAt = performance.now();
    await eventually(() => lease.signal.aborted, { timeoutMs: 2 * ttlMs });
    expect(seen.abortedAt! - killedAt).toBeLessThanOrEqual(2 * ttlMs);
    expect(seen.remainingAtAbort!).toBeGreaterThan(-ttlMs);
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(lost).toEqual([lease.signal.reason]);
    await expectNoTimers(lease, extensions, ttlMs);
    expect(lost).toHaveLength(1);
  });

  it('stops kept leases on close(): the signal aborts, onLost runs once, no timer is left', async () => {
    const c = cluster.another();
    await c.ready();
    const extensions = countExtensions(c);
    const lost: LeaseLostError[] = [];
    const lease = await c.acquire(unique('closed'), {
      ttlMs: 5_000,
      autoExtend: true,
      onLost: (e) => lost.push(e),
    });
    const multi = await c.acquire([unique('m1'), unique('m2')], { ttlMs: 5_000, autoExtend: true });
    expect(lease.autoExtending && multi.autoExtending).toBe(true);
    await c.close();
    for (const kept of [lease, multi]) {
      expect(kept.signal.reason).toBeInstanceOf(LeaseLostError);
      expect((kept.signal.reason as LeaseLostError).cause).toBeInstanceOf(CoordinatorClosedError);
      await expectNoTimers(kept, extensions, 100);
    }
    expect(lost).toEqual([lease.signal.reason]);
    await c.close();
    expect(lost).toHaveLength(1);
  });

  it('without autoExtend: the signal aborts when the lease runs out, never on release', async () => {
    const ttlMs = 300;
    const released = await coordinator.acquire(unique('released'), { ttlMs });
    expect(released.autoExtending).toBe(false);
    const releasedSignal = released.signal; // arms the expiry timer
    await released.release();

    const lease = await coordinator.acquire(unique('expiring'), { ttlMs });
    const seen = watchAbort(lease);
    await eventually(() => lease.signal.aborted, { timeoutMs: 2 * ttlMs });
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(seen.remainingAtAbort!).toBeLessThanOrEqual(0);
    expect(seen.remainingAtAbort!).toBeGreaterThan(-ttlMs);
    await expect(lease.extend()).rejects.toBeInstanceOf(LeaseLostError);

    await sleep(ttlMs);
    expect(releasedSignal.aborted).toBe(false);
  });

  it('refuses a non-boolean autoExtend and a non-function onLost', async () => {
    await expect(
      coordinator.acquire('x', { ttlMs: 1_000, autoExtend: 'yes' as unknown as boolean }),
    ).rejects.toThrow(/autoExtend/);
    await expect(
      coordinator.acquire('x', { ttlMs: 1_000, onLost: 1 as unknown as () => void }),
    ).rejects.toThrow(/onLost/);
  });
});
