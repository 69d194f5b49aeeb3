// The per-node floor and folding (DESIGN §3, "memory bounded by active resources"), and restart repairs that start
// over, on real nodes. Tokens here are seeded far above the time-derived first proposal, so a register lost by folding
// (instead of moved into the floor) would show as a token going backwards: the proposal's clock cannot hide it.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { Coordinator } from '@fenced/coordinator';
import { proxyEach } from '@fenced/test-utils/fault-proxy';
import { loadScriptSource } from '../../../../packages/coordinator/src/scripts/scripts.js';
import type { RedisNodes } from '@fenced/test-utils/redis-cluster';
import {
  eventually,
  keysOf,
  nodeKeysOf,
  startCoordinatorFixture,
  type CoordinatorFixture,
} from '../../../fixtures/coordinator-fixture.js';
import { tokenKeyPattern } from '../../../fixtures/keys.js';

let env: RedisNodes;
let raw: Redis[];
let cluster: CoordinatorFixture;

beforeAll(async () => {
  // The raw clients ignore their errors: restarts below reset them.
  cluster = await startCoordinatorFixture(3, { coordinator: false });
  ({ env, raw } = cluster);
});

afterAll(async () => {
  await cluster?.close();
});

/** Keys under `prefix` on one node. */
async function keysUnder(client: Redis, prefix: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 5_000);
    found.push(...keys);
    cursor = next;
  } while (cursor !== '0');
  return found;
}

/** Runs `task` for every item with at most `concurrency` at a time. */
async function pool<T, R>(
  items: readonly T[],
  concurrency: number,
  task: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await task(items[i]!);
      }
    }),
  );
  return results;
}

describe('folding idle registers into the floor', () => {
  it('leaves a handful of keys per node after 20 000 resources went idle, and tokens still grow', async () => {
    const prefix = `fold-${randomUUID().slice(0, 8)}`;
    // A generous node timeout: 64 acquires at once on a saturated machine may wait seconds for fsync-always nodes,
    // and this test is about folding, not about how fast a node answers.
    const options = {
      nodes: env.urls,
      keyPrefix: prefix,
      maxTtlMs: 2_000,
      tokenRetentionMs: 3_000,
      nodeTimeoutMs: 30_000,
    };
    // The longest ttl the namespace allows, and a wait: an attempt slowed past its validity is retried, not failed.
    const acquireOptions = { ttlMs: 2_000, waitMs: 120_000 };
    const resources = Array.from({ length: 20_000 }, (_, i) => `order:${i}`);
    const first = new Coordinator(options);
    await first.ready(); // initializes the fresh namespace (a node holding registers already is not fresh)
    // Registers far above any time-derived proposal: every first token comes from the registers, not the clock.
    const seeded = (BigInt(Date.now()) << 21n) + 1_000_000n;
    await Promise.all(
      raw.map(async (client) => {
        const pipeline = client.pipeline();
        resources.forEach((r, i) => pipeline.set(keysOf(r, prefix).token, (seeded + BigInt(i)).toString()));
        await pipeline.exec();
      }),
    );

    let before: bigint[];
    try {
      before = await pool(resources, 64, async (resource) => {
        const lease = await first.acquire(resource, acquireOptions);
        await lease.release();
        return lease.token;
      });
      // Each node keeps only its incarnation key, its floor and the fold lock once the retention has passed.
      await eventually(
        async () => {
          const counts = await Promise.all(raw.map(async (c) => (await keysUnder(c, prefix)).length));
          return counts.every((n) => n <= 5);
        },
        { what: 'the idle registers to be folded', timeoutMs: 40_000, intervalMs: 500 },
      );
      for (const client of raw) {
        const keys = await keysUnder(client, prefix);
        expect(keys.filter((k) => k.endsWith(':token'))).toEqual([]);
        expect(BigInt((await client.get(nodeKeysOf(prefix).floor))!)).toBeGreaterThanOrEqual(
          seeded + BigInt(resources.length - 1),
        );
      }
    } finally {
      await first.close();
    }

    // A fresh process locks every resource again: each token is above the one it had before.
    const second = new Coordinator(options);
    try {
      const after = await pool(resources, 64, async (resource) => {
        const lease = await second.acquire(resource, acquireOptions);
        await lease.release();
        return lease.token;
      });
      const backwards = resources.filter((_, i) => after[i]! <= before[i]!);
      expect(backwards).toEqual([]);
    } finally {
      await second.close();
    }
    // 40 000 fsync-always cycles on three nodes: a budget for a loaded two-core machine, not a measurement.
  }, 300_000);

  it('never folds the register of a resource with a live lease', async () => {
    const prefix = `fold-live-${randomUUID().slice(0, 8)}`;
    const coordinator = new Coordinator({
      nodes: env.urls,
      keyPrefix: prefix,
      maxTtlMs: 2_000,
      tokenRetentionMs: 2_000,
      nodeTimeoutMs: 30_000,
    });
    try {
      const held = await coordinator.acquire('held', { ttlMs: 2_000 });
      const idle = await coordinator.acquire('idle', { ttlMs: 2_000 });
      await idle.release();
      // Keep `held` alive past the retention; `idle` goes.
      await eventually(
        async () => {
          await held.extend(2_000);
          return (await raw[0]!.exists(keysOf('idle', prefix).token)) === 0;
        },
        { what: 'the idle register to be folded', timeoutMs: 40_000, intervalMs: 500 },
      );
      expect(await raw[0]!.exists(keysOf('held', prefix).token)).toBe(1);
      await held.release();
    } finally {
      await coordinator.close();
    }
  });
});

describe('the fold lock of a paced pass', () => {
  it('is renewed by a step once half of it is gone, and by no earlier step', async () => {
    const prefix = `fold-lock-${randomUUID().slice(0, 8)}`;
    // The default retention: this process's own passes (every minute) stay out of the way.
    const coordinator = new Coordinator({ nodes: env.urls, keyPrefix: prefix });
    await coordinator.ready(); // initializes the namespace: fold.lua refuses an empty node
    await coordinator.close();
    const node = nodeKeysOf(prefix);
    const intervalMs = 10_000;
    const fold = (cursor: string): Promise<unknown> =>
      raw[0]!.eval(
        loadScriptSource('fold'),
        3,
        node.incarnation,
        node.floor,
        node.foldLock,
        cursor,
        500,
        tokenKeyPattern(prefix),
        1,
        intervalMs,
      );
    const lockMs = (): Promise<number> => raw[0]!.pttl(node.foldLock);

    expect(await fold('0')).toEqual([1, expect.any(String), 0]);
    expect(await lockMs()).toBeGreaterThan(intervalMs / 2);
    expect(await fold('0')).toEqual([11]); // a second pass finds it busy
    // More than half left: a step of the pass leaves the lock as it is.
    await raw[0]!.pexpire(node.foldLock, 0.6 * intervalMs);
    await fold('1');
    expect(await lockMs()).toBeLessThanOrEqual(0.6 * intervalMs);
    // Less than half left: the step renews it for a whole interval.
    await raw[0]!.pexpire(node.foldLock, 0.3 * intervalMs);
    await fold('1');
    expect(await lockMs()).toBeGreaterThan(0.6 * intervalMs);
    // Lapsed during a pause: the step takes it again, so no other process starts a pass beside this one.
    await raw[0]!.del(node.foldLock);
    await fold('1');
    expect(await lockMs()).toBeGreaterThan(0.6 * intervalMs);
    expect(await fold('0')).toEqual([11]);
  });
});

describe('a restart repair', () => {
  /**
   * The repair takes no wait, so the tests hold its reads of the sources in the network (a fault proxy in front of
   * each node) to act while it runs: a repair is then seen `reading`, and the node can restart again under it.
   */
  it('starts over when the node restarts empty again during the repair, and then completes', async (ctx) => {
    const why = env.missing('restartWithoutData');
    if (why) ctx.skip(why);
    const prefix = `repair-again-${randomUUID().slice(0, 8)}`;
    const links = await proxyEach(env.urls);
    const coordinator = new Coordinator({ nodes: links.urls, keyPrefix: prefix, maxTtlMs: 3_000 });
    coordinator.on('nodeError', () => undefined);
    const problems: string[] = [];
    coordinator.on('repairProgress', (event) => problems.push(event.repair.detail));
    try {
      await coordinator.ready();
      const lease = await coordinator.acquire('r', { ttlMs: 1_000 });
      await lease.release();
      const target = env.nodes[2]!;
      for (const i of [0, 1]) links.proxies[i]!.setMode('hold', { direction: 'to-server' });
      await target.restart({ keepData: false });
      // A probe finds the node empty and starts its repair, whose reads of nodes 0 and 1 wait in the proxies.
      await eventually(async () => (await coordinator.nodeStatus())[2]!.reachable, {
        what: 'the probe to reach it',
      });
      const repair = coordinator.repairNode(2);
      await eventually(
        () => Promise.resolve(coordinator.cachedNodeStatus()[2]!.repair?.phase === 'reading'),
        { what: 'the repair to seal and read its sources' },
      );
      await target.restart({ keepData: false }); // again, while the repair runs: its marker is gone
      for (const i of [0, 1]) links.proxies[i]!.release();
      // The repair starts over; its new claim may find the connection to the node restarted under it still down,
      // and then gives up for now — the background re-check repairs the node (below, the probes start it too).
      await repair.catch(() => undefined);
      await eventually(async () => (await coordinator.nodeStatus())[2]!.voting, {
        what: 'the node to vote again',
      });
      // The first repair's work was lost with the second restart: the node was sealed-and-read for again, either by
      // the same repair starting over or (when its new claim found the connection still down) by the re-check's.
      const reads = problems.filter((p) => /sealing and reading/.test(p)).length;
      expect(problems.some((p) => /starts over/.test(p)) || reads >= 2, problems.join('\n')).toBe(true);
      const direct = raw[2]!;
      expect(BigInt((await direct.get(keysOf('r', prefix).token)) ?? '0')).toBeGreaterThanOrEqual(
        lease.token,
      );
      const next = await coordinator.acquire('r', { ttlMs: 1_000 });
      expect(next.token).toBeGreaterThan(lease.token);
      await next.release();
    } finally {
      await coordinator.close();
      await links.stop();
    }
  });

  it('runs in one process at a time: a second process that finds the node empty waits for the first', async (ctx) => {
    const why = env.missing('restartWithoutData');
    if (why) ctx.skip(why);
    const prefix = `repair-two-${randomUUID().slice(0, 8)}`;
    const links = await proxyEach(env.urls);
    const first = new Coordinator({ nodes: links.urls, keyPrefix: prefix, maxTtlMs: 2_000 });
    const second = new Coordinator({ nodes: env.urls, keyPrefix: prefix, maxTtlMs: 2_000 });
    for (const c of [first, second]) c.on('nodeError', () => undefined);
    const seen: string[] = [];
    second.on('repairProgress', (event) => seen.push(event.repair.detail));
    try {
      await first.ready();
      await second.ready();
      for (const i of [0, 2]) links.proxies[i]!.setMode('hold', { direction: 'to-server' });
      await env.nodes[1]!.restart({ keepData: false });
      await eventually(async () => (await first.nodeStatus())[1]!.reachable, {
        what: 'the first process to reach it',
      });
      const firstRepair = first.repairNode(1);
      await eventually(() => Promise.resolve(first.cachedNodeStatus()[1]!.repair?.phase === 'reading'), {
        what: 'the first process to read its sources',
      });
      const secondRepair = second.repairNode(1);
      await eventually(() => Promise.resolve(seen.some((s) => /waiting/.test(s))), {
        what: 'the second process to wait',
      });
      for (const i of [0, 2]) links.proxies[i]!.release();
      await Promise.all([firstRepair, secondRepair]);
      await eventually(
        async () => {
          const [a, b] = await Promise.all([first.nodeStatus(), second.nodeStatus()]);
          return a[1]!.voting && b[1]!.voting;
        },
        { what: 'both processes to see the node vote again' },
      );
      expect(seen.join('\n')).toMatch(/another process is repairing it; waiting/);
    } finally {
      await first.close();
      await second.close();
      await links.stop();
    }
  });
});
