// F4, F5: clocks that jump — a Redis node's (through the LD_PRELOAD clock shim; the machine clock is never
// touched) and a client process's. Redlock's timing assumptions break; tokens and the guard must not.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Lease } from '@fenced/coordinator';
import { ClockShim } from '@fenced/test-utils/clock-shim';
import { proxyEach, type FaultProxies } from '@fenced/test-utils/fault-proxy';
import { History } from '@fenced/test-utils/history';
import {
  holderIncrement,
  readOutside,
  recordedIncrement,
  type WriteMode,
} from '../fixtures/fault/counter-ops.js';
import { FaultWorld, unique } from '../fixtures/fault/fault-world.js';
import { judge, recordedAcquire, recordedRelease, sleep, type Verdict } from '../fixtures/fault/verdict.js';
import { WorkerProcess } from '../fixtures/fault/worker-process.js';

/** Node 2 runs on its own clock. */
const SHIFTED = 2;

let world: FaultWorld;
let nodeClock: ClockShim;
let clientClock: ClockShim;
const linkSets: FaultProxies[] = [];

beforeAll(async () => {
  nodeClock = await ClockShim.create();
  clientClock = await ClockShim.create();
  world = await FaultWorld.start({ nodeOptions: (i) => (i === SHIFTED ? { env: nodeClock.env } : {}) });
});

afterAll(async () => {
  await Promise.allSettled(linkSets.map((l) => l.stop()));
  await world?.close();
  await nodeClock?.dispose();
  await clientClock?.dispose();
});

async function linksCutFrom(nodes: number[]): Promise<FaultProxies> {
  const set = await proxyEach(world.urls);
  linkSets.push(set);
  for (const i of nodes) set.proxies[i]!.setMode('blackhole');
  return set;
}

/**
 * B, the newer holder, increments; then A, whose lease the clock fault cut short and which still believes it
 * holds it, increments late (from the value it read earlier, when unguarded); both release.
 */
async function newerThenStaleWrite(
  history: History,
  mode: WriteMode,
  bLease: Lease,
  aLease: Lease,
  aRead: bigint,
): Promise<void> {
  await recordedIncrement(history, world.store, holderIncrement('B', bLease, mode));
  await recordedIncrement(
    history,
    world.store,
    holderIncrement('A', aLease, mode, mode === 'unguarded' ? { readBefore: aRead } : {}),
  ).catch(() => undefined);
  await recordedRelease(history, 'B', bLease);
  await recordedRelease(history, 'A', aLease);
}

describe('a node clock jumping forward while a client is cut off (F4)', () => {
  /**
   * A reaches only nodes 0-2 and is granted there. Node 2's clock then jumps past A's ttl, so A's key expires
   * there early. B reaches only nodes 2-4 and is granted too: two clients each see a majority. B increments;
   * then A, which still believes it holds the lease, increments.
   */
  async function twoMajorities(mode: WriteMode): Promise<Verdict> {
    const resource = unique('f4');
    await world.ensureCounter(resource);
    const history = new History();
    const aLinks = await linksCutFrom([3, 4]);
    const bLinks = await linksCutFrom([0, 1]);
    const a = world.coordinator({ nodes: aLinks.urls });
    const b = world.coordinator({ nodes: bLinks.urls });
    try {
      const aLease = await recordedAcquire(history, 'A', a, resource, { ttlMs: 3_000 });
      if (!aLease) throw new Error('A did not get the lease');
      const aRead = await readOutside(world.store, resource);
      await nodeClock.jump(10_000, { clocks: 'realtime' });
      const bLease = await recordedAcquire(history, 'B', b, resource, { ttlMs: 3_000 });
      if (!bLease) throw new Error('B did not get the lease: the clock jump did not expire A’s key');
      await newerThenStaleWrite(history, mode, bLease, aLease, aRead);
    } finally {
      await nodeClock.reset();
    }
    return judge(world, history, [resource]);
  }

  it('lets two clients hold the lease at once, yet tokens stay ordered and the older write is refused', async () => {
    const verdict = await twoMajorities('guarded');
    expect(verdict.violations).toEqual([]);
    expect(verdict.overlaps).toBeGreaterThan(0); // the lock did fail: both held it
    expect(verdict.info.join('\n')).toMatch(/final 1, 1 increments ok/);
  });

  it('negative control: without the guard the older holder overwrites the newer one', async () => {
    const verdict = await twoMajorities('unguarded');
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/below the high-water mark/);
    expect(verdict.violations.join('\n')).toMatch(/lost update/);
  });
});

describe('clocks jumping backward (F5)', () => {
  /**
   * Node 2's clock jumps back an hour while A holds the lease, so A's key there outlives the lease by an hour.
   * A stops using its lease without releasing it (a paused holder); B gets a majority without node 2, and A's
   * late write follows B's.
   */
  async function nodeClockBackward(mode: WriteMode): Promise<Verdict> {
    const resource = unique('f5-node');
    await world.ensureCounter(resource);
    const history = new History();
    const c = world.coordinator();
    try {
      const aLease = await recordedAcquire(history, 'A', c, resource, { ttlMs: 600 });
      if (!aLease) throw new Error('A did not get the lease');
      const aRead = await readOutside(world.store, resource);
      await nodeClock.jump(-3_600_000, { clocks: 'realtime' });
      await sleep(800);
      const bLease = await recordedAcquire(history, 'B', c, resource, { ttlMs: 3_000, waitMs: 10_000 });
      if (!bLease) throw new Error('B did not get the lease');
      await newerThenStaleWrite(history, mode, bLease, aLease, aRead);
    } finally {
      await nodeClock.reset();
    }
    return judge(world, history, [resource]);
  }

  it('on a node: the stale key only costs that node’s vote; the late holder is refused', async () => {
    const verdict = await nodeClockBackward('guarded');
    expect(verdict.violations).toEqual([]);
    expect(verdict.info.join('\n')).toMatch(/final 1, 1 increments ok/);
  });

  it('negative control: on a node, without the guard the late holder overwrites its successor', async () => {
    const verdict = await nodeClockBackward('unguarded');
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/below the high-water mark/);
  });

  /**
   * A client process whose wall clock jumped back an hour (its own clock shim): its first proposal — derived from
   * the time — is an hour low. B grants and writes first; then A, then B again. With the quorum registers A's
   * proposal is refused and it proposes above what the nodes promised. The negative control takes A's
   * time-derived proposal as its token, as a clock-based token scheme would.
   */
  async function clientClockBackward(protection: 'protected' | 'clock-tokens'): Promise<Verdict> {
    const resource = unique('f5-client');
    await world.ensureCounter(resource);
    const history = new History();
    await clientClock.set(-3_600_000, { clocks: 'realtime' });
    const a = await WorkerProcess.start(
      'A',
      history,
      {
        redisUrls: world.urls,
        nodeTimeoutMs: 400,
        maxTtlMs: 3_000,
        databaseUrl: world.postgres.url,
        schema: world.schema.schema,
      },
      clientClock.env,
    );
    const b = world.coordinator();
    try {
      const bIncrements = async (n: number): Promise<void> => {
        const lease = await recordedAcquire(history, 'B', b, resource, { ttlMs: 3_000, waitMs: 10_000 });
        if (!lease) throw new Error('B did not get the lease');
        await recordedIncrement(
          history,
          world.store,
          holderIncrement('B', lease, 'guarded', { opId: `B${n}-${resource}` }),
        );
        await recordedRelease(history, 'B', lease);
      };
      await bIncrements(1);
      if (protection === 'protected') {
        const lease = await a.acquire(resource, { ttlMs: 3_000, waitMs: 10_000 });
        if (!lease) throw new Error('A did not get the lease');
        await a.increment(resource, { mode: 'guarded', opId: `A-${resource}` });
        await a.release();
      } else {
        const pending = history.invoke('A', 'acquire', resource);
        const token = BigInt(await a.now()) << 20n;
        pending.ok({ token, leaseId: 'clock-token' });
      }
      await bIncrements(2);
    } finally {
      await a.stop();
      await clientClock.reset();
    }
    return judge(world, history, [resource]);
  }

  it('on a client: its tokens still go above every earlier grant, and its write lands in order', async () => {
    const verdict = await clientClockBackward('protected');
    expect(verdict.violations).toEqual([]);
    expect(verdict.info.join('\n')).toMatch(/final 3, 3 increments ok/);
  });

  it('negative control: tokens taken from the client’s clock go backwards when it jumps back', async () => {
    const verdict = await clientClockBackward('clock-tokens');
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/yet its token is not larger/);
  });
});
