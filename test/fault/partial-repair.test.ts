// F27: a repair attempt stops after part of its copy landed; the sources fold before the next attempt, which another
// process runs. The review's schedule, on real processes (DESIGN §3, "what a repair leaves behind must be harmless,
// whenever it stops"):
//
// Three nodes T (0), S1 (1), S2 (2); every register seeded far above every time floor (x), so no clock hides a token
// going backwards. P0 grants each resource on all three nodes (registers a = x + 1). P1, cut off from S1, grants each
// again: tokens t > a, promised by T and S2 only. S2 is paused (SIGSTOP); T restarts empty. P2 starts T's repair: it
// seals and reads S1 and streams S1's registers (a) into T, then cannot read S2 — and P2 is closed (the cut). S2
// resumes; both sources fold every register into their floors (fold.lua, the real script). P3's attempt claims T once
// P2's marker expired, raises T's floor to the sources' highest (t) and sends no register: T keeps P2's leftovers a.
// B, cut off from S2, then acquires each resource on T and S1.
//
// The rule under test: a node never answers below its floor (include/decimal-token.lua, read_register). T answers
// max(a, t) = t, so B's token is above P1's. The negative control deletes T's floor before B (the floor not
// consulted: T answers its leftovers a, as the rule switched off does): B's token repeats P1's (G2), and the checker
// must say so. The mutation table's row 25 switches the rule itself off in the Lua and this test kills it.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proxyEach, type FaultProxies } from '@fenced/test-utils/fault-proxy';
import { History } from '@fenced/test-utils/history';
import { loadScripts, runScript } from '../../packages/coordinator/src/scripts/scripts.js';
import { nodeStateKeys, tokenKeyPattern } from '../../packages/coordinator/src/keys/key-layout.js';
import { interpretReply } from '../../packages/coordinator/src/scripts/script-results.js';
import { FaultWorld, seedRegistersAhead, tokenKey, unique } from '../fixtures/fault/fault-world.js';
import {
  guardedCriticalSections,
  judge,
  recordedAcquire,
  until,
  type Verdict,
} from '../fixtures/fault/verdict.js';
import { holderIncrement, recordedIncrement } from '../fixtures/fault/counter-ops.js';

const T = 0;
const S1 = 1;
const S2 = 2;
/** Resources granted and repaired together. */
const RESOURCES = 3;
/**
 * Registers on S1 in all: a repair streams a source's registers to T in raise batches of 1 000 (nodes/repair.ts,
 * Copier), so a whole number of batches puts every one of them on T before the repair stops. The rest are idle
 * registers of other resources, below every token here.
 */
const S1_REGISTERS = 2_000;

let world: FaultWorld;
const linkSets: FaultProxies[] = [];

beforeAll(async () => {
  world = await FaultWorld.start({ nodes: 3, initialize: false });
});

afterAll(async () => {
  world?.redis.nodes[S2]?.resume();
  await Promise.allSettled(linkSets.map((l) => l.stop()));
  await world?.close();
});

async function linksCutFrom(node: number): Promise<FaultProxies> {
  const set = await proxyEach(world.urls);
  linkSets.push(set);
  set.proxies[node]!.setMode('blackhole');
  return set;
}

/** Folds every register of a node into its floor with the real fold.lua (no idle minimum), pass after pass. */
async function foldAll(client: Redis, prefix: string): Promise<void> {
  await loadScripts(client);
  const k = nodeStateKeys(prefix);
  let cursor = '0';
  do {
    const reply = interpretReply(
      'fold',
      await runScript(
        client,
        'fold',
        [k.incarnation, k.floor, `${k.fold}:test-${randomUUID()}`],
        [cursor, 1000, tokenKeyPattern(prefix), 0, 60_000],
      ),
    );
    if (reply.kind !== 'folded') throw new Error(`fold refused: ${reply.kind}`);
    cursor = reply.cursor;
  } while (cursor !== '0');
}

interface Outcome {
  readonly verdict: Verdict;
  readonly notes: string;
}

async function partialRepairThenFold(control: 'protected' | 'floor-not-consulted'): Promise<Outcome> {
  try {
    return await schedule(control);
  } finally {
    world.redis.nodes[S2]!.resume();
  }
}

async function schedule(control: 'protected' | 'floor-not-consulted'): Promise<Outcome> {
  const keyPrefix = `f27-${randomUUID().slice(0, 8)}`;
  // Short markers are not needed: P3 waits for P2's marker like any process would.
  const options = { keyPrefix, maxTtlMs: 10_000, nodeTimeoutMs: 500 };
  const raw = await world.connectedClients(world.urls);
  const init = world.coordinator(options);
  await init.ready();
  await world.closeCoordinator(init);
  const resources = Array.from({ length: RESOURCES }, () => unique('f27'));
  for (const resource of resources) {
    await world.ensureCounter(resource);
    await seedRegistersAhead(raw, resource, keyPrefix);
  }
  const history = new History();

  // P0 on every node: registers a on T, S1 and S2.
  const p0 = world.coordinator(options);
  for (const resource of resources) await guardedCriticalSections(world, history, 'P0', p0, resource, 1);
  await world.closeCoordinator(p0);
  const a = new Map<string, string>();
  for (const resource of resources) a.set(resource, (await raw[S1]!.get(tokenKey(resource, keyPrefix)))!);

  // P1 without S1: tokens t > a on T and S2 only.
  const p1Links = await linksCutFrom(S1);
  const p1 = world.coordinator({ ...options, nodes: p1Links.urls });
  for (const resource of resources) await guardedCriticalSections(world, history, 'P1', p1, resource, 1);
  await world.closeCoordinator(p1);

  // Other resources' idle registers on S1, so that the copy streams whole raise batches.
  const filler = Array.from({ length: S1_REGISTERS - RESOURCES }, (_, i) => [
    tokenKey(`f27-idle-${i}`, keyPrefix),
    '5',
  ]);
  await raw[S1]!.mset(...filler.flat());

  // S2 paused, T restarted empty; P2's repair copies S1 into T and cannot read S2; P2 is closed mid-repair.
  world.redis.nodes[S2]!.pause();
  await world.redis.nodes[T]!.restart({ keepData: false });
  await world.nodesAnswer([raw[T]!]);
  const p2 = world.coordinator(options);
  void p2.ready().catch(() => undefined); // starts its probes (and so T's repair); it has no quorum to be ready
  await until(
    "P2's repair copied S1's registers into T",
    async () => {
      for (const resource of resources) {
        if ((await raw[T]!.get(tokenKey(resource, keyPrefix))) !== a.get(resource)) return false;
      }
      return true;
    },
    30_000,
  );
  await world.closeCoordinator(p2);
  const leftovers = resources.map((r) => a.get(r));

  // S2 resumes; the sources fold every register into their floors.
  world.redis.nodes[S2]!.resume();
  await world.nodesAnswer([raw[S2]!]);
  await foldAll(raw[S1]!, keyPrefix);
  await foldAll(raw[S2]!, keyPrefix);

  // P3's attempt: raises T's floor, sends no register (the sources hold none); T votes again.
  const state = nodeStateKeys(keyPrefix);
  const p3 = world.coordinator(options);
  void p3.ready().catch(() => undefined); // starts its probes, and so its repair of T
  await until(
    'T votes again after P3 repaired it',
    async () => (await raw[T]!.exists(state.incarnation)) === 1,
    60_000,
  );
  await world.closeCoordinator(p3);
  const stillThere = await Promise.all(resources.map((r) => raw[T]!.get(tokenKey(r, keyPrefix))));
  const floor = await raw[T]!.get(state.floor);
  if (control === 'floor-not-consulted') await raw[T]!.del(state.floor);

  // B on T and S1 only.
  const bLinks = await linksCutFrom(S2);
  const b = world.coordinator({ ...options, nodes: bLinks.urls });
  for (const resource of resources) {
    const lease = await recordedAcquire(history, 'B', b, resource, { ttlMs: 2_000, waitMs: 10_000 });
    if (!lease) throw new Error('B did not get the lease');
    await recordedIncrement(history, world.store, holderIncrement('B', lease, 'guarded')).catch(
      () => undefined,
    );
    await lease.release();
  }
  await world.closeCoordinator(b);
  const notes =
    `${control}: P2's leftovers on T ${leftovers.join(', ')} (after P3: ${stillThere.join(', ')}), ` +
    `T's floor ${floor}`;
  console.log(`F27 ${notes}`);
  return { verdict: await judge(world, history, resources), notes };
}

describe('a repair attempt that stops after part of its copy landed (F27)', () => {
  it("P2 closed mid-copy, the sources fold, P3 repairs: T never answers below its floor, and B's tokens stay above P1's", async () => {
    const outcome = await partialRepairThenFold('protected');
    // The schedule happened: P2's leftovers were still on T when B acquired.
    expect(outcome.notes).not.toMatch(/after P3: (null|, )/);
    expect(outcome.verdict.violations, outcome.notes).toEqual([]);
  });

  it("negative control: T's floor not consulted, its leftovers answer, and B's tokens repeat P1's", async () => {
    const outcome = await partialRepairThenFold('floor-not-consulted');
    expect(outcome.verdict.ok, outcome.notes).toBe(false);
    expect(outcome.verdict.violations.join('\n')).toMatch(/tokens: /);
  });
});
