// F24: a node is flushed (FLUSHALL) or restarts empty under load. Acquires go on with the majority, and the node
// votes again within seconds — the sealed repair (DESIGN §3) has no wait — not after a TTL-long one. The cluster's
// maxTtlMs here is 60 s: the old repair sat out that long before the node could vote again.
//
// The load: C (reaching every node) runs guarded increments on resource L before, during and after the loss. A, cut
// off from node 2, has completed guarded sections on resource R (registers far above every time floor), so R's
// latest token rests on nodes 0 and 1 only. Node 0 is flushed (or restarted without its data) under C's load.
// Afterwards B, cut off from node 1, acquires R on nodes 0 and 2: only a repaired node 0 carries A's token into that
// majority. The negative control flushes node 0 and puts its incarnation key back at once (restart detection off):
// B's majority then misses A's grants and its token goes backwards.
//
// What is recorded, not asserted to the millisecond: how long after the flush node 0 voted again. The assertion is
// only that it voted again before a TTL-long wait (60 s) would have ended.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proxyEach, type FaultProxies } from '@fenced/test-utils/fault-proxy';
import { History } from '@fenced/test-utils/history';
import { FaultWorld, seedRegistersAhead, unique } from '../fixtures/fault/fault-world.js';
import { holderIncrement, recordedIncrement } from '../fixtures/fault/counter-ops.js';
import {
  guardedCriticalSections,
  judge,
  recordedAcquire,
  recordedRelease,
  until,
  type Verdict,
} from '../fixtures/fault/verdict.js';
import { runClients, type WorkloadClient } from '../fixtures/fault/workload.js';

/** The cluster's maxTtlMs: what the old repair made a flushed node wait. */
const MAX_TTL_MS = 60_000;
const TTL_MS = 2_000;

let world: FaultWorld;
const linkSets: FaultProxies[] = [];

beforeAll(async () => {
  world = await FaultWorld.start({ nodes: 3, initialize: false });
});

afterAll(async () => {
  await Promise.allSettled(linkSets.map((l) => l.stop()));
  await world?.close();
});

async function linksCutFrom(nodes: number[]): Promise<FaultProxies> {
  const set = await proxyEach(world.urls);
  linkSets.push(set);
  for (const i of nodes) set.proxies[i]!.setMode('blackhole');
  return set;
}

type Loss = 'flushall' | 'restart-empty' | 'flushall-undetected';

interface FlushOutcome {
  readonly verdict: Verdict;
  /** ms from the loss until node 0 held its incarnation key again. */
  readonly votedAgainAfterMs: number;
  /** Increments that completed after the loss, while and after node 0 was repaired. */
  readonly incrementsAfterLoss: number;
  readonly notes: string;
}

async function lossUnderLoad(loss: Loss): Promise<FlushOutcome> {
  const keyPrefix = `f24-${randomUUID().slice(0, 8)}`;
  const options = { keyPrefix, maxTtlMs: MAX_TTL_MS };
  const raw: Redis[] = await world.connectedClients(world.urls);
  const init = world.coordinator(options);
  await init.ready();
  await world.closeCoordinator(init);
  const resource = unique('f24-r');
  const loaded = unique('f24-load');
  await world.ensureCounter(resource);
  await world.ensureCounter(loaded);
  await seedRegistersAhead(raw, resource, keyPrefix);
  const history = new History();

  const aLinks = await linksCutFrom([2]);
  const a = world.coordinator({ ...options, nodes: aLinks.urls });
  await guardedCriticalSections(world, history, 'A', a, resource, 3);
  await world.closeCoordinator(a);

  const clients: WorkloadClient[] = [
    { name: 'C1', coordinator: world.coordinator(options), store: world.store },
    { name: 'C2', coordinator: world.coordinator(options), store: world.store },
  ];
  for (const c of clients) await c.coordinator.ready();
  let stopped = false;
  const load = runClients(history, clients, {
    resource: loaded,
    protection: 'protected',
    ttlMs: TTL_MS,
    waitMs: 5_000,
    maxCycles: 1_000,
    stop: () => stopped,
  });
  const oks = (): number =>
    history.events.filter((e) => e.op === 'increment' && e.kind === 'ok' && e.resource === loaded).length;
  await until('the load runs', () => oks() >= 6);

  const incarnation = `${keyPrefix}:node:incarnation`;
  const lostAt = performance.now();
  const okBefore = oks();
  if (loss === 'restart-empty') {
    await world.redis.nodes[0]!.restart({ keepData: false });
    await world.nodesAnswer([raw[0]!]);
  } else if (loss === 'flushall-undetected') {
    // Flush and put the incarnation key back in one transaction: no probe or script of the running load can see
    // the node empty in between (a client that did would start a repair, and the loss would not go undetected).
    await raw[0]!.multi().flushall().set(incarnation, 'pretend-nothing-happened').exec();
  } else {
    await raw[0]!.flushall();
  }
  await until('node 0 votes again', async () => (await raw[0]!.exists(incarnation)) === 1, MAX_TTL_MS);
  const votedAgainAfterMs = performance.now() - lostAt;
  const okAtVote = oks();
  await until('increments go on after the node voted again', () => oks() >= okAtVote + 4);
  stopped = true;
  await load;
  const incrementsAfterLoss = oks() - okBefore;

  // B: a fresh process that reaches nodes 0 and 2 only.
  const bLinks = await linksCutFrom([1]);
  const b = world.coordinator({ ...options, nodes: bLinks.urls });
  const bLease = await recordedAcquire(history, 'B', b, resource, { ttlMs: TTL_MS, waitMs: 10_000 });
  if (!bLease) throw new Error('B did not get the lease');
  // A stale token is refused by the guard (G1); the checker still sees the token that went backwards (G2).
  await recordedIncrement(history, world.store, holderIncrement('B', bLease, 'guarded')).catch(
    () => undefined,
  );
  await recordedRelease(history, 'B', bLease);
  for (const c of clients) await world.closeCoordinator(c.coordinator);
  await world.closeCoordinator(b);
  aLinks.release();
  bLinks.release();
  const notesTail = `; load increments ${oks()}`;
  const notes =
    `${loss}: node 0 voted again ${votedAgainAfterMs.toFixed(0)} ms after the loss; ` +
    `${incrementsAfterLoss} increments completed after it${notesTail}`;
  console.log(`F24 ${notes}`);
  return {
    verdict: await judge(world, history, [resource, loaded]),
    votedAgainAfterMs,
    incrementsAfterLoss,
    notes,
  };
}

describe('a node flushed or restarted empty under load (F24)', () => {
  it('FLUSHALL: acquires go on with the majority, and the node votes again long before a TTL-long wait would end', async () => {
    const outcome = await lossUnderLoad('flushall');
    expect(outcome.verdict.violations, outcome.notes).toEqual([]);
    expect(outcome.votedAgainAfterMs, outcome.notes).toBeLessThan(MAX_TTL_MS);
    expect(outcome.incrementsAfterLoss, outcome.notes).toBeGreaterThan(0);
  });

  it('restart without its data: the same', async () => {
    const outcome = await lossUnderLoad('restart-empty');
    expect(outcome.verdict.violations, outcome.notes).toEqual([]);
    expect(outcome.votedAgainAfterMs, outcome.notes).toBeLessThan(MAX_TTL_MS);
    expect(outcome.incrementsAfterLoss, outcome.notes).toBeGreaterThan(0);
  });

  it('negative control: a flushed node whose loss goes undetected votes at once, and B’s token goes backwards', async () => {
    const outcome = await lossUnderLoad('flushall-undetected');
    expect(outcome.verdict.ok, outcome.notes).toBe(false);
    expect(outcome.verdict.violations.join('\n')).toMatch(/tokens: /);
  });
});
