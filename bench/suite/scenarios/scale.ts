import type { Redis } from 'ioredis';
import { PerformanceObserver } from 'node:perf_hooks';
import { keyCounts, redisCpuSeconds, usedMemory } from '../environment.js';
import { repetitionsFor, type BenchPlan } from '../plan.js';
import type { HeldLock, LockLibrary } from '../lock-library.js';
import { forEachIndex, interleave, sleep, type RunState } from '../runner.js';
import { median } from '../statistics.js';
import type { BenchResults } from '../results.js';
import { num, table, type SectionView } from '../markdown.js';
import { FLOOR_NAME } from './floor.js';

/**
 * One library's pass over one level: acquire `level` distinct resources and hold them, then release them all. The
 * key counts of the floor (bench/suite/scenarios/floor.ts) are 2 per resource held (lease and register) and 1 idle (the
 * register, which nothing folds; it is deleted after the pass, see {@link runScale}).
 */
export interface ScalePass {
  /** Resources acquired (and held at once): the level, unless the phase cap stopped the pass first. */
  reached: number;
  stoppedAtCap: boolean;
  acquirePerSecond: number;
  releasePerSecond: number;
  /** reached / (acquire phase + release phase): acquire+release cycles per second over the whole pass. */
  cyclesPerSecond: number;
  /** Mean over the nodes of (used_memory with every lease held − before) / reached, in bytes. */
  heldBytesPerResource: number;
  /** The same once every lease was released (idle): what stays behind per resource, in bytes. */
  idleBytesPerResource: number;
  /** Mean over the nodes of the key count added while held, and left when idle. */
  heldKeysPerNode: number;
  idleKeysPerNode: number;
  /**
   * Per acquire+release cycle of the pass, over its acquire and release phases only: this process's CPU
   * (`process.cpuUsage`), the five nodes' CPU together (INFO cpu), and the collector's pause time in this process
   * (`gc` performance entries). What grows with the resource count shows here. Absent in older results.
   */
  clientCpuUsPerCycle?: number;
  redisCpuUsPerCycle?: number;
  gcUsPerCycle?: number;
  errors: number;
}

export interface ScaleCell {
  passes: ScalePass[];
  /** Medians over the passes (a single pass for the large levels). */
  acquirePerSecond: number;
  releasePerSecond: number;
  cyclesPerSecond: number;
  heldBytesPerResource: number;
  idleBytesPerResource: number;
  reached: number;
  stoppedAtCap: boolean;
  /** Medians over the passes of the keys per node added per resource while held, and left when idle. */
  heldKeysPerResource: number;
  idleKeysPerResource: number;
  /** Medians over the passes (see {@link ScalePass}); absent in older results. */
  clientCpuUsPerCycle?: number;
  redisCpuUsPerCycle?: number;
  gcUsPerCycle?: number;
  /**
   * For a library that folds idle registers (fenced): what is left once its retention has passed. Never for the
   * floor, whose registers nothing folds.
   */
  afterRetention?: AfterRetention;
}

/**
 * What a folding library leaves per resource once its token retention has passed and its fold passes have run:
 * measured after waiting `retentionMs` (+ 1 s, OBJECT IDLETIME's resolution) from the end of the library's last
 * pass, then until the key count stopped falling (bounded). Deltas are from before the first of `levels`, over every
 * resource the library used in those levels (each level, unless the plan waits only after the last one).
 */
export interface AfterRetention {
  levels: number[];
  resources: number;
  retentionMs: number;
  foldIntervalMs: number;
  /** From the end of the library's last pass until the measurement. */
  waitedMs: number;
  /**
   * Why the wait ended: the nodes were back to the key count before the levels (at most 2 more keys per node: the
   * floor and the fold lock), the count stopped falling for a fold interval + 2 s, or the wait hit its bound.
   */
  endedBy: 'back to the key count before' | 'stopped falling' | 'bound';
  /** Mean over the nodes of (used_memory − before the levels) / resources, in bytes. */
  bytesPerResource: number;
  /** Mean over the nodes of used_memory − before the levels, in bytes. */
  bytesPerNode: number;
  /** Mean over the nodes of (keys − before the levels) / resources. */
  keysPerResource: number;
  /** Mean over the nodes of keys − before the levels. */
  keysPerNode: number;
}

export interface ScaleResult {
  concurrency: number;
  phaseCapMs: number;
  ttlMs: number;
  foldWait: BenchPlan['scale']['foldWait'];
  /**
   * Whether each library's passes and waits ran with every other library's background work stopped (see
   * `onlyBackgroundOf`). Absent in results from before it was: there, fenced's fold passes went on during the
   * other libraries' passes.
   */
  onlyOwnBackground?: boolean;
  /**
   * Per folding library: how long the scenario waited at its start for the registers the earlier scenarios left to
   * be folded, and how many were left on all nodes together when it went on (0 unless the wait hit its bound).
   */
  drainedBefore: { library: string; waitedMs: number; registersLeft: number }[];
  /** level → library → cell */
  byLevel: Record<string, Record<string, ScaleCell>>;
  /** Keys and used_memory per node after the whole scenario (the fenced token registers stay). */
  finalKeysPerNode: number[];
  finalUsedMemoryPerNode: number[];
}

/**
 * Scenario 4: throughput and Redis memory with many distinct resources. Each pass acquires `level` new
 * resources at the plan's concurrency and holds them (memory per held resource), then releases them all
 * (memory left per idle resource: release deletes the lease key exactly as expiry would); a pass over few
 * resources repeats acquire-all/release-all over them until it has measured `minMeasureMs`. Passes of the same
 * level are interleaved over the libraries. Both phases are bounded by `phaseCapMs`; a pass that hits the cap
 * reports how many resources it reached.
 *
 * `libraries` may end with the floor (bench/suite/scenarios/floor.ts), the same writes with nothing else, so the decline
 * of a library's cycles per second from few to many resources can be told apart from the nodes' own. The floor
 * does not fold: no fold wait applies to it (only libraries with `folding` get one), and the keys it leaves
 * (`leftoverKeyPattern`: its registers) are deleted after each of its passes, outside the measured phases and
 * after the idle reading, so a million of them do not sit on the nodes during the other libraries' passes, nor
 * count as what fenced left after its retention.
 */
export async function runScale(
  libraries: readonly LockLibrary[],
  admin: readonly Redis[],
  plan: BenchPlan['scale'],
  state: RunState,
  bystanders: readonly LockLibrary[] = [],
): Promise<ScaleResult> {
  const gcPauses = observeGcPauses();
  const backgrounds = [...libraries, ...bystanders];
  try {
    // Libraries open in this process that this scenario does not measure do no background work during it.
    for (const library of bystanders) await library.background?.stop();
    return await measureScale(libraries, admin, plan, state, gcPauses, (library) =>
      onlyBackgroundOf(library, backgrounds),
    );
  } finally {
    gcPauses.stop();
    for (const library of backgrounds) await library.background?.start();
  }
}

/**
 * Stops the background work of every library in `all` but `library`, and starts `library`'s: what runs between a
 * library's calls (fenced's fold passes, which SCAN every key of every node) then weighs only on that library's
 * own passes and waits, not on another library's measured in the same run.
 */
export async function onlyBackgroundOf(library: LockLibrary, all: readonly LockLibrary[]): Promise<void> {
  for (const other of all) if (other !== library) await other.background?.stop();
  await library.background?.start();
}

/** The collector's pauses in this process since the call, summed (`gc` performance entries), until `stop()`. */
function observeGcPauses(): { readonly totalUs: number; stop(): void } {
  let totalUs = 0;
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) totalUs += entry.duration * 1_000;
  });
  observer.observe({ entryTypes: ['gc'] });
  return {
    get totalUs() {
      return totalUs;
    },
    stop: () => observer.disconnect(),
  };
}

/** What a pass's phases cost, summed over them (µs). */
interface PhaseCost {
  clientUs: number;
  redisUs: number;
  gcUs: number;
}

async function measureScale(
  libraries: readonly LockLibrary[],
  admin: readonly Redis[],
  plan: BenchPlan['scale'],
  state: RunState,
  gcPauses: { readonly totalUs: number },
  /** Leaves only `library`'s background work running (see {@link onlyBackgroundOf}). */
  backgroundOnly: (library: LockLibrary) => Promise<void>,
): Promise<ScaleResult> {
  /** Acquires resources 0 … level−1 and holds them (bounded by the cap): the held locks, and the phase's time. */
  const acquireAll = async (library: LockLibrary, level: number, tag: string, label: string) => {
    const held: (HeldLock | undefined)[] = [];
    const start = performance.now();
    const { stoppedAtDeadline } = await forEachIndex(
      level,
      plan.concurrency,
      async (i) => {
        try {
          held[i] = await library.acquire(`sc:${tag}:${i}`, plan.ttlMs);
        } catch (error) {
          state.failures.record('scale', library.name, error);
        }
      },
      {
        deadline: start + plan.phaseCapMs,
        onProgress: (done) => state.progress.update(`${label}: acquired ${done.toLocaleString('en-US')}`),
      },
    );
    const locks = held.filter((h): h is HeldLock => h !== undefined);
    return { locks, ms: performance.now() - start, stoppedAtDeadline, errors: held.length - locks.length };
  };
  const releaseAll = async (library: LockLibrary, locks: HeldLock[], label: string) => {
    let released = 0;
    let errors = 0;
    const start = performance.now();
    await forEachIndex(
      locks.length,
      plan.concurrency,
      async (i) => {
        try {
          await locks[i]!.release();
          released++;
        } catch (error) {
          errors++;
          state.failures.record('scale', library.name, error);
        }
      },
      {
        deadline: start + 2 * plan.phaseCapMs,
        onProgress: (done) => state.progress.update(`${label}: released ${done.toLocaleString('en-US')}`),
      },
    );
    return { released, errors, ms: performance.now() - start };
  };

  /** CPU of this process and of the nodes, and GC pauses, spent inside `phase`, added to `cost`. */
  const measured = async <T>(cost: PhaseCost, phase: () => Promise<T>): Promise<T> => {
    const redisBefore = await redisCpuSeconds(admin);
    const gcBefore = gcPauses.totalUs;
    const clientBefore = process.cpuUsage();
    const result = await phase();
    const client = process.cpuUsage(clientBefore);
    cost.gcUs += gcPauses.totalUs - gcBefore;
    cost.clientUs += client.user + client.system;
    cost.redisUs += ((await redisCpuSeconds(admin)) - redisBefore) * 1e6;
    return result;
  };

  const pass = async (library: LockLibrary, level: number, tag: string): Promise<ScalePass> => {
    const label = `scale ${level.toLocaleString('en-US')} ${library.name} ${tag}`;
    await sleep(plan.settleMs);
    const before = await usedMemory(admin);
    const keysBefore = await keyCounts(admin);
    const cost: PhaseCost = { clientUs: 0, redisUs: 0, gcUs: 0 };

    // Round 1 acquires every resource and holds them all while memory is read, then releases them all.
    const first = await measured(cost, () => acquireAll(library, level, tag, label));
    await sleep(plan.settleMs);
    const whileHeld = await usedMemory(admin);
    const keysWhileHeld = await keyCounts(admin);
    const firstRelease = await measured(cost, () => releaseAll(library, first.locks, label));
    await sleep(plan.settleMs);
    const idle = await usedMemory(admin);
    const keysIdle = await keyCounts(admin);

    // A small level is over in a fraction of a second; later rounds over the same resources extend the measured
    // time to `minMeasureMs`, so a thousand resources get as steady a throughput figure as a million.
    let acquired = first.locks.length;
    let released = firstRelease.released;
    let acquireMs = first.ms;
    let releaseMs = firstRelease.ms;
    let errors = first.errors + firstRelease.errors;
    for (let round = 2; round <= 1_000 && acquireMs + releaseMs < plan.minMeasureMs; round++) {
      const next = await measured(cost, () => acquireAll(library, level, tag, `${label} round ${round}`));
      const nextRelease = await measured(cost, () =>
        releaseAll(library, next.locks, `${label} round ${round}`),
      );
      acquired += next.locks.length;
      released += nextRelease.released;
      acquireMs += next.ms;
      releaseMs += nextRelease.ms;
      errors += next.errors + nextRelease.errors;
    }

    const reached = first.locks.length;
    const cycles = Math.min(acquired, released);
    const perResource = (after: number[]): number =>
      reached === 0 ? Number.NaN : meanDelta(before, after) / reached;
    return {
      reached,
      stoppedAtCap: first.stoppedAtDeadline,
      acquirePerSecond: acquired / (acquireMs / 1_000),
      releasePerSecond: released / (releaseMs / 1_000),
      cyclesPerSecond: cycles / ((acquireMs + releaseMs) / 1_000),
      heldBytesPerResource: perResource(whileHeld),
      idleBytesPerResource: perResource(idle),
      heldKeysPerNode: meanDelta(keysBefore, keysWhileHeld),
      idleKeysPerNode: meanDelta(keysBefore, keysIdle),
      clientCpuUsPerCycle: cost.clientUs / cycles,
      redisCpuUsPerCycle: cost.redisUs / cycles,
      gcUsPerCycle: cost.gcUs / cycles,
      errors,
    };
  };

  /** One pass, then the deletion of what the library leaves that nothing removes (see runScale). */
  const passAndClear = async (library: LockLibrary, level: number, tag: string): Promise<ScalePass> => {
    const measuredPass = await pass(library, level, tag);
    if (library.leftoverKeyPattern !== undefined) {
      state.progress.update(
        `scale ${level.toLocaleString('en-US')} ${library.name} ${tag}: deleting its leftover keys`,
      );
      await deleteKeys(admin, library.leftoverKeyPattern);
    }
    return measuredPass;
  };

  const folding = libraries.filter((l) => l.folding !== undefined);
  // Registers the earlier scenarios left would be folded in the middle of this one's measurements (and subtract
  // from its memory deltas): first wait until they are gone.
  const drained: ScaleResult['drainedBefore'] = [];
  if (plan.foldWait !== 'off') {
    for (const library of folding) {
      await backgroundOnly(library);
      drained.push(await drainRegisters(library, admin, state));
    }
  }
  /** What the levels since the last fold wait started from, and what the folding libraries used since. */
  const startSince = async () => {
    await sleep(plan.settleMs);
    return {
      memory: await usedMemory(admin),
      keys: await keyCounts(admin),
      levels: [] as number[],
      resources: new Map<string, number>(folding.map((l) => [l.name, 0])),
      lastPassEnd: new Map<string, number>(),
    };
  };
  let since = await startSince();

  const byLevel: ScaleResult['byLevel'] = {};
  for (const [levelIndex, level] of plan.levels.entries()) {
    const repetitions = repetitionsFor(plan, level, state.runs);
    const results = await interleave(libraries, repetitions, async (library, run) => {
      await backgroundOnly(library);
      const measured = await passAndClear(library, level, `${level}:${run}`);
      if (since.resources.has(library.name)) {
        since.resources.set(library.name, since.resources.get(library.name)! + measured.reached);
        since.lastPassEnd.set(library.name, performance.now());
      }
      return measured;
    });
    since.levels.push(level);
    const cells: Record<string, ScaleCell> = {};
    for (const [name, passes] of results) {
      const pick = (key: keyof ScalePass): number => median(passes.map((p) => Number(p[key])));
      cells[name] = {
        passes,
        acquirePerSecond: pick('acquirePerSecond'),
        releasePerSecond: pick('releasePerSecond'),
        cyclesPerSecond: pick('cyclesPerSecond'),
        heldBytesPerResource: pick('heldBytesPerResource'),
        idleBytesPerResource: pick('idleBytesPerResource'),
        reached: Math.min(...passes.map((p) => p.reached)),
        stoppedAtCap: passes.some((p) => p.stoppedAtCap),
        heldKeysPerResource: median(passes.map((p) => p.heldKeysPerNode / p.reached)),
        idleKeysPerResource: median(passes.map((p) => p.idleKeysPerNode / p.reached)),
        clientCpuUsPerCycle: pick('clientCpuUsPerCycle'),
        redisCpuUsPerCycle: pick('redisCpuUsPerCycle'),
        gcUsPerCycle: pick('gcUsPerCycle'),
      };
    }
    const isLast = levelIndex === plan.levels.length - 1;
    if (plan.foldWait === 'every-level' || (plan.foldWait === 'last-level' && isLast)) {
      for (const library of folding) {
        const cell = cells[library.name];
        if (cell === undefined) continue;
        await backgroundOnly(library);
        cell.afterRetention = await waitForFolding(library, since, admin, plan, state);
        state.progress.log(
          `scale ${level.toLocaleString('en-US')}: ${library.name} after its ${library.folding!.retentionMs / 1_000} s retention ` +
            `(waited ${(cell.afterRetention.waitedMs / 1_000).toFixed(1)} s, ${cell.afterRetention.endedBy}): ` +
            `${cell.afterRetention.bytesPerResource.toFixed(1)} B and ${cell.afterRetention.keysPerResource.toFixed(3)} keys per resource`,
        );
      }
      if (!isLast) since = await startSince();
    }
    byLevel[String(level)] = cells;
    state.progress.log(
      `scale ${level.toLocaleString('en-US')}: ${Object.entries(cells)
        .map(
          ([name, c]) =>
            `${name} ${Math.round(c.cyclesPerSecond)} cycles/s, ${Math.round(c.heldBytesPerResource)} B held, ${Math.round(c.idleBytesPerResource)} B idle${c.stoppedAtCap ? ` (cap: ${c.reached.toLocaleString('en-US')})` : ''}`,
        )
        .join('; ')}`,
    );
  }
  return {
    concurrency: plan.concurrency,
    phaseCapMs: plan.phaseCapMs,
    ttlMs: plan.ttlMs,
    foldWait: plan.foldWait,
    onlyOwnBackground: true,
    drainedBefore: drained,
    byLevel,
    finalKeysPerNode: await keyCounts(admin),
    finalUsedMemoryPerNode: await usedMemory(admin),
  };
}

/** Most keys per node a fully folded library may add: its floor and its fold lock. */
const NODE_KEYS_OF_FOLDING = 2;
/** How often the key count is read while waiting for the fold passes. */
const FOLD_POLL_MS = 500;

/**
 * Waits until `library`'s registers of the levels since `since` can have been folded — its retention (+ 1 s,
 * as fold.lua compares whole seconds of OBJECT IDLETIME, rounded up) after its last pass — then until the nodes
 * are back to the key count before those levels, or the count has stopped falling for a fold interval + 2 s (a
 * whole pass found nothing more), bounded by three more fold intervals + 60 s. Then reads what is left.
 */
async function waitForFolding(
  library: LockLibrary,
  since: {
    memory: number[];
    keys: number[];
    levels: number[];
    resources: Map<string, number>;
    lastPassEnd: Map<string, number>;
  },
  admin: readonly Redis[],
  plan: BenchPlan['scale'],
  state: RunState,
): Promise<AfterRetention> {
  const { retentionMs, intervalMs } = library.folding!;
  const lastPassEnd = since.lastPassEnd.get(library.name) ?? performance.now();
  const earliest = lastPassEnd + retentionMs + 1_000;
  const bound = earliest + 3 * intervalMs + 60_000;
  const label = `scale: waiting for ${library.name}'s fold passes (retention ${retentionMs / 1_000} s, a pass every ${intervalMs / 1_000} s)`;
  while (performance.now() < earliest) {
    state.progress.update(
      `${label}: ${((earliest - performance.now()) / 1_000).toFixed(0)} s to the retention`,
    );
    await sleep(Math.min(FOLD_POLL_MS, earliest - performance.now()));
  }
  let endedBy: AfterRetention['endedBy'] = 'bound';
  let lastCount = Number.POSITIVE_INFINITY;
  let lastFall = performance.now();
  while (performance.now() < bound) {
    const added = meanDelta(since.keys, await keyCounts(admin));
    state.progress.update(
      `${label}: ${Math.round(added).toLocaleString('en-US')} keys per node above before`,
    );
    if (added <= NODE_KEYS_OF_FOLDING) {
      endedBy = 'back to the key count before';
      break;
    }
    if (added < lastCount) {
      lastCount = added;
      lastFall = performance.now();
    } else if (performance.now() - lastFall >= intervalMs + 2_000) {
      endedBy = 'stopped falling';
      break;
    }
    await sleep(FOLD_POLL_MS);
  }
  await sleep(plan.settleMs);
  const memory = await usedMemory(admin);
  const keys = await keyCounts(admin);
  const resources = since.resources.get(library.name) ?? 0;
  const keysPerNode = meanDelta(since.keys, keys);
  return {
    levels: [...since.levels],
    resources,
    retentionMs,
    foldIntervalMs: intervalMs,
    waitedMs: performance.now() - lastPassEnd,
    endedBy,
    bytesPerResource: resources === 0 ? Number.NaN : meanDelta(since.memory, memory) / resources,
    bytesPerNode: meanDelta(since.memory, memory),
    keysPerResource: resources === 0 ? Number.NaN : keysPerNode / resources,
    keysPerNode,
  };
}

/**
 * Waits until none of `library`'s token registers is left on any node (they are folded once idle for its
 * retention), bounded by the retention plus two fold intervals plus 30 s.
 */
async function drainRegisters(
  library: LockLibrary,
  admin: readonly Redis[],
  state: RunState,
): Promise<{ library: string; waitedMs: number; registersLeft: number }> {
  const { retentionMs, intervalMs, registerPattern } = library.folding!;
  const start = performance.now();
  const bound = start + retentionMs + 2 * intervalMs + 30_000;
  let left = await countKeys(admin, registerPattern);
  while (left > 0 && performance.now() < bound) {
    state.progress.update(
      `scale: waiting for the ${left.toLocaleString('en-US')} ${library.name} registers of earlier scenarios to be folded`,
    );
    await sleep(1_000);
    left = await countKeys(admin, registerPattern);
  }
  if (performance.now() - start > 1_000) {
    state.progress.log(
      `scale: waited ${((performance.now() - start) / 1_000).toFixed(1)} s for ${library.name}'s earlier registers to be folded${left > 0 ? ` (${left} left)` : ''}`,
    );
  }
  return { library: library.name, waitedMs: performance.now() - start, registersLeft: left };
}

/**
 * Deletes the keys matching `pattern` on every node: SCAN, and UNLINK of each batch it returns (a SCAN goes on
 * correctly while the keys it returned are deleted). Bounded by the key count, as {@link countKeys}.
 */
async function deleteKeys(admin: readonly Redis[], pattern: string): Promise<void> {
  for (const client of admin) {
    let cursor = '0';
    const maxCalls = Math.ceil(((await client.dbsize()) + 1) / 10_000) * 4 + 100;
    for (let call = 0; call < maxCalls; call++) {
      const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 10_000);
      if (keys.length > 0) await client.unlink(...keys);
      cursor = next;
      if (cursor === '0') break;
    }
  }
}

/** Keys matching `pattern` on all nodes together (SCAN, bounded by the key count). */
async function countKeys(admin: readonly Redis[], pattern: string): Promise<number> {
  let total = 0;
  for (const client of admin) {
    let cursor = '0';
    const maxCalls = Math.ceil(((await client.dbsize()) + 1) / 10_000) * 4 + 100;
    for (let call = 0; call < maxCalls; call++) {
      const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 10_000);
      total += keys.length;
      cursor = next;
      if (cursor === '0') break;
    }
  }
  return total;
}

function meanDelta(before: readonly number[], after: readonly number[]): number {
  let sum = 0;
  for (let i = 0; i < before.length; i++) sum += after[i]! - before[i]!;
  return sum / before.length;
}

/**
 * Scenario 4's tables in the report: throughput, memory, CPU and GC per resource count and library, and what
 * fenced leaves after its retention.
 */
export function renderScale(results: BenchResults, { columns, chart }: SectionView): string[] {
  const r = results.results;
  if (r.scale === undefined) return [];
  const out: string[] = [];
  const scaleHasFloor = Object.values(r.scale.byLevel).some((cells) => cells[FLOOR_NAME] !== undefined);
  const scaleColumns = scaleHasFloor ? [...columns, FLOOR_NAME] : columns;
  const scaleNames = new Set(Object.values(r.scale.byLevel).flatMap((cells) => Object.keys(cells)));
  const folders = [...scaleNames].filter((n) => n === 'fenced' || n.startsWith('fenced@'));
  // Before the scenario stopped the others' background work during a library's pass, fenced's coordinator folded
  // on through every other library's passes.
  const sharedFolding =
    r.scale.onlyOwnBackground === true
      ? " Each library's passes ran with the other libraries' background work stopped (fenced's coordinators closed: no fold passes)."
      : folders.length > 0 && scaleNames.size > 1
        ? ` The libraries shared this run: ${folders.join(' and ')} kept running ${folders.length > 1 ? 'their' : 'its'} fold passes in the background during the other libraries' passes too (scanning their keys, and folding ${folders.length > 1 ? 'their' : 'its'} own idle registers), so at large levels every figure here includes that work.`
        : '';
  out.push(
    `### 4. Scale: many distinct resources`,
    '',
    ...chart('scale'),
    `Each pass acquires N new resources at concurrency ${r.scale.concurrency} and holds them all, then releases them all. Bytes are INFO used_memory deltas per resource, per node (the cluster holds 5×). "idle" is after the release, which leaves what expiry would. CPU and GC are per acquire+release cycle over the pass's acquire and release phases: the bench process, the five nodes together (INFO cpu), and this process's collector pauses. Each phase is capped at ${num(r.scale.phaseCapMs / 1_000)} s${results.kind === 'quick' ? '' : ' (acquire) / twice that (release)'}.` +
      (scaleHasFloor
        ? ` "${FLOOR_NAME}" is not a lock: the same Redis writes per cycle with nothing else (bench/suite/scenarios/floor.ts), so its decline from few to many resources is the nodes' own. It holds 2 keys per resource (lease and register) and leaves 1 (the register: nothing folds it, so the run deletes them after each of its passes, once measured).`
        : '') +
      sharedFolding,
    '',
    table(
      [
        'resources',
        'library',
        'reached',
        'acquires/s',
        'releases/s',
        'cycles/s',
        'bytes/resource held',
        'bytes/resource idle',
        'client CPU µs/cycle',
        'Redis CPU µs/cycle',
        'GC µs/cycle',
      ],
      Object.entries(r.scale.byLevel).flatMap(([level, cells]) =>
        scaleColumns
          .filter((n) => cells[n] !== undefined)
          .map((n) => {
            const c = cells[n]!;
            return [
              num(Number(level)),
              n,
              `${num(c.reached)}${c.stoppedAtCap ? ' (cap)' : ''}`,
              num(c.acquirePerSecond),
              num(c.releasePerSecond),
              num(c.cyclesPerSecond),
              num(c.heldBytesPerResource, 1),
              num(c.idleBytesPerResource, 1),
              num(c.clientCpuUsPerCycle),
              num(c.redisCpuUsPerCycle),
              num(c.gcUsPerCycle),
            ];
          }),
      ),
    ),
    '',
  );
  const retained = Object.entries(r.scale.byLevel).flatMap(([level, cells]) =>
    Object.entries(cells).flatMap(([name, c]) =>
      c.afterRetention === undefined ? [] : [{ level, name, c, after: c.afterRetention }],
    ),
  );
  if (retained.length > 0) {
    const first = retained[0]!.after;
    out.push(
      `After the retention: ${retained[0]!.name} runs with \`tokenRetentionMs\` ${num(first.retentionMs / 1_000)} s (a fold pass every ${num(first.foldIntervalMs / 1_000, 1)} s). After ${r.scale.foldWait === 'last-level' ? 'the last level' : 'each level'} the run waits the retention from the library's last pass, then until the nodes' key count stops falling, and reads memory and keys again; deltas from before ${r.scale.foldWait === 'last-level' ? 'the first level' : 'the level'}, per resource the library used in ${r.scale.foldWait === 'last-level' ? 'all levels' : 'it'} (every run), per node. Held and idle are the medians of the passes above.`,
      '',
      table(
        [
          'resources',
          'library',
          'bytes/resource held',
          'idle',
          'after the retention',
          'keys/resource held',
          'idle',
          'after the retention',
          'left per node',
          'waited',
        ],
        retained.map(({ level, name, c, after }) => [
          after.levels.length > 1 ? after.levels.map((l) => num(l)).join(' + ') : num(Number(level)),
          name,
          // Held and idle are per level; after several levels only the after-retention figure covers them all.
          after.levels.length > 1 ? '–' : num(c.heldBytesPerResource, 1),
          after.levels.length > 1 ? '–' : num(c.idleBytesPerResource, 1),
          num(after.bytesPerResource, 1),
          after.levels.length > 1 ? '–' : num(c.heldKeysPerResource, 2),
          after.levels.length > 1 ? '–' : num(c.idleKeysPerResource, 2),
          num(after.keysPerResource, 4),
          `${num(after.bytesPerNode / 1_024, 1)} KiB, ${num(after.keysPerNode)} keys`,
          `${num(after.waitedMs / 1_000, 1)} s (${after.endedBy})`,
        ]),
      ),
      '',
    );
  }
  return out;
}
