import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { Coordinator } from '@fenced/coordinator';
import { LeaseLostError, LockedError } from '@fenced/shared';
import type { RedisNodes } from '@fenced/test-utils/redis-cluster';
import {
  keysOf,
  nodeKeysOf,
  startCoordinatorFixture,
  unique,
  type CoordinatorFixture,
} from '../../fixtures/coordinator-fixture.js';

let env: RedisNodes;
let coordinator: Coordinator;
let raw: Redis[];
let cluster: CoordinatorFixture;
const leaseKey = (resource: string): string => keysOf(resource).lease;

beforeAll(async () => {
  cluster = await startCoordinatorFixture(5, { coordinator: { nodeTimeoutMs: 1_000 } });
  ({ env, coordinator, raw } = cluster);
});

afterAll(async () => {
  await cluster?.close();
});

describe('contention', () => {
  it('never lets two workers hold the lease at once when there are no faults', async () => {
    const resource = unique('mutex');
    const intervals: Array<{ start: number; end: number; token: bigint }> = [];
    const workers = 4;
    const iterations = 12;
    // Separate coordinators, as separate processes would be.
    const clients = Array.from(
      { length: workers },
      () => new Coordinator({ nodes: env.urls, nodeTimeoutMs: 1_000 }),
    );
    try {
      await Promise.all(
        clients.map(async (client) => {
          for (let i = 0; i < iterations; i++) {
            const lease = await client.acquire(resource, { ttlMs: 10_000, waitMs: 30_000 });
            const start = performance.now();
            await sleep(Math.random() * 3);
            intervals.push({ start, end: performance.now(), token: lease.token });
            await lease.release();
          }
        }),
      );
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
    expect(intervals).toHaveLength(workers * iterations);
    intervals.sort((a, b) => a.start - b.start);
    for (let i = 1; i < intervals.length; i++) {
      expect(intervals[i]!.start).toBeGreaterThanOrEqual(intervals[i - 1]!.end);
      // Fencing tokens follow the same order as the critical sections.
      expect(intervals[i]!.token).toBeGreaterThan(intervals[i - 1]!.token);
    }
  });

  it('wakes a waiter on release instead of waiting for the retry fallback', async () => {
    const resource = unique('handover');
    const holder = await coordinator.acquire(resource, { ttlMs: 30_000 });
    const retryDelayMs = 5_000;
    const waiterClient = new Coordinator({ nodes: env.urls, nodeTimeoutMs: 1_000, retryDelayMs });
    try {
      await waiterClient.ready();
      let releasedAt = 0;
      const waiting = waiterClient.acquire(resource, { ttlMs: 5_000, waitMs: 20_000 }).then((lease) => ({
        lease,
        wokeAfterMs: performance.now() - releasedAt,
      }));
      await sleep(300); // let the waiter fail its attempts and subscribe
      releasedAt = performance.now();
      await holder.release();
      const { lease, wokeAfterMs } = await waiting;
      // Without the release message the waiter would sleep for the holder's remaining ttl (~30 s) or the retry
      // delay (5 s): getting it sooner proves the pub/sub wake-up (a logic check, not a latency threshold).
      expect(wokeAfterMs).toBeLessThan(retryDelayMs);
      expect(lease.token).toBeGreaterThan(holder.token);
      await lease.release();
    } finally {
      await waiterClient.close();
    }
  });

  it('hands each release to one waiter of the process, the longest waiting, and passes it on in order', async () => {
    const resource = unique('wake-one');
    // A fallback far beyond the test: every grant below comes from a release message.
    const client = new Coordinator({ nodes: env.urls, nodeTimeoutMs: 1_000, retryDelayMs: 60_000 });
    const heldChecks = async (): Promise<number> => {
      const stats = await Promise.all(raw.map((r) => r.info('commandstats')));
      return stats.reduce((sum, s) => sum + Number(/cmdstat_pttl:calls=(\d+)/.exec(s)?.[1] ?? 0), 0);
    };
    const order: number[] = [];
    const waiters: Promise<unknown>[] = [];
    try {
      // The holder shares the waiters' connections, so every node sees its release before their next acquire:
      // an attempt that then finds the lease held was woken for a release that was not its own.
      const holder = await client.acquire(resource, { ttlMs: 30_000 });
      const leases = Array.from({ length: 4 }, async (_, i) => {
        await sleep(150 * i); // arrive one after another
        const lease = await client.acquire(resource, { ttlMs: 30_000, waitMs: 30_000 });
        order.push(i);
        return lease;
      });
      waiters.push(...leases.map((p) => p.catch(() => undefined)));
      await sleep(900); // every waiter has failed its first attempts and subscribed
      const before = await heldChecks();
      await holder.release();
      const first = await leases[0]!;
      await sleep(300); // room for any other waiter to be woken, attempt and find the lease held
      // An attempt that finds the lease held asks each node for its ttl (PTTL): none did, so no other waiter
      // was woken by this release.
      expect(await heldChecks()).toBe(before);
      expect(order).toEqual([0]);
      await first.release();
      for (const lease of leases.slice(1)) await (await lease).release();
      expect(order).toEqual([0, 1, 2, 3]);
    } finally {
      await client.close();
      await Promise.all(waiters);
    }
  });

  it('grants despite foreign keys on a minority of nodes, and refuses with them on a majority', async () => {
    const minority = unique('foreign-minority');
    await Promise.all(raw.slice(0, 2).map((r) => r.set(leaseKey(minority), 'someone-else|1', 'PX', 30_000)));
    const lease = await coordinator.acquire(minority, { ttlMs: 5_000 });
    expect(
      (await Promise.all(raw.map((r) => r.get(leaseKey(minority))))).filter((v) => v?.startsWith(lease.id)),
    ).toHaveLength(3);
    await lease.release();
    expect(await raw[0]!.get(leaseKey(minority))).toBe('someone-else|1'); // a release never touches a foreign key

    const majority = unique('foreign-majority');
    await Promise.all(raw.slice(0, 3).map((r) => r.set(leaseKey(majority), 'someone-else|1', 'PX', 30_000)));
    expect(await coordinator.tryAcquire(majority, { ttlMs: 5_000 })).toBeNull();
    await expect(coordinator.acquire(majority, { ttlMs: 5_000, waitMs: 200 })).rejects.toBeInstanceOf(
      LockedError,
    );
    // The failed attempts released their partial grants on the two free nodes.
    expect(await raw[3]!.get(leaseKey(majority))).toBeNull();
    expect(await raw[4]!.get(leaseKey(majority))).toBeNull();
  });

  it('keeps retrying past partial grants until enough foreign keys expire', async () => {
    const resource = unique('partial');
    await raw[2]!.set(leaseKey(resource), 'someone-else|1', 'PX', 300);
    await Promise.all(raw.slice(3).map((r) => r.set(leaseKey(resource), 'someone-else|1', 'PX', 30_000)));
    const lease = await coordinator.acquire(resource, { ttlMs: 5_000, waitMs: 10_000 });
    const values = await Promise.all(raw.map((r) => r.get(leaseKey(resource))));
    expect(values.slice(0, 3).every((v) => v === `${lease.id}|${lease.token}`)).toBe(true);
    await lease.release();
  });

  it('treats a key holding the same lease id as a vote for the retrying acquire', async () => {
    // An earlier attempt of the same acquire reached nodes 0-2 and its release did not: the retry must count
    // those keys as its own votes, not as another holder.
    const resource = unique('own-id');
    const client = raw[0]!;
    const { loadScripts, runScript } = await import('../../../packages/coordinator/src/scripts/scripts.js');
    await loadScripts(client);
    await client.set(leaseKey(resource), 'attempt-id-0123456789|5', 'PX', 30_000);
    const node = nodeKeysOf();
    const keys = [
      node.incarnation,
      node.floor,
      node.seal,
      node.settings,
      leaseKey(resource),
      keysOf(resource).record,
      keysOf(resource).token,
    ];
    const epoch = (await client.get(node.seal)) ?? '';
    const mine = await runScript(client, 'acquire', keys, [
      'attempt-id-0123456789',
      5_000,
      '100',
      epoch,
      env.urls.length,
    ]);
    expect(mine).toEqual([[1, 1]]);
    const [theirs] = (await runScript(client, 'acquire', keys, [
      'other-id-0123456789ab',
      5_000,
      '101',
      epoch,
      env.urls.length,
    ])) as unknown[][];
    expect(theirs![0]).toBe(2);
    await client.del(leaseKey(resource));
  });
});

describe('using', () => {
  it('extends the lease while the routine runs, keeps the token, and releases at the end', async () => {
    const resource = unique('using');
    let seen: bigint | undefined;
    const result = await coordinator.using(resource, { ttlMs: 300 }, async (lease, signal) => {
      seen = lease.token;
      await sleep(1_000); // more than three ttls
      expect(signal.aborted).toBe(false);
      expect(await coordinator.inspect(resource)).toEqual({ held: true, token: lease.token });
      return 'done';
    });
    expect(result).toBe('done');
    expect(seen).toBeDefined();
    expect(await coordinator.inspect(resource)).toEqual({ held: false });
  });

  it('aborts the signal with LeaseLostError when an extension fails', async () => {
    const resource = unique('using-lost');
    const reason = await coordinator.using(resource, { ttlMs: 300 }, async (_lease, signal) => {
      await Promise.all(raw.map((r) => r.del(leaseKey(resource)))); // someone wiped the lease
      return new Promise<unknown>((resolve) =>
        signal.addEventListener('abort', () => resolve(signal.reason)),
      );
    });
    expect(reason).toBeInstanceOf(LeaseLostError);
  });

  it("never hides the routine's own error, and still releases", async () => {
    const resource = unique('using-error');
    await expect(
      coordinator.using(resource, { ttlMs: 5_000 }, async () => {
        await sleep(1);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await coordinator.inspect(resource)).toEqual({ held: false });
  });
});
