import type { Redis } from 'ioredis';
import { keyCounts, usedMemory } from '../bench-environment.js';
import { repetitionsFor, type BenchPlan } from '../bench-plan.js';
import type { HeldLock, LockLibrary } from '../lock-library.js';
import { forEachIndex, interleave, sleep, type RunState } from '../runner.js';
import { median } from '../statistics.js';

/** One library's pass over one level: acquire `level` distinct resources and hold them, then release them all. */
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
}

export interface ScaleResult {
  concurrency: number;
  phaseCapMs: number;
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
 */
export async function runScale(
  libraries: readonly LockLibrary[],
  admin: readonly Redis[],
  plan: BenchPlan['scale'],
  state: RunState,
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

  const pass = async (library: LockLibrary, level: number, tag: string): Promise<ScalePass> => {
    const label = `scale ${level.toLocaleString('en-US')} ${library.name} ${tag}`;
    await sleep(plan.settleMs);
    const before = await usedMemory(admin);
    const keysBefore = await keyCounts(admin);

    // Round 1 acquires every resource and holds them all while memory is read, then releases them all.
    const first = await acquireAll(library, level, tag, label);
    await sleep(plan.settleMs);
    const whileHeld = await usedMemory(admin);
    const keysWhileHeld = await keyCounts(admin);
    const firstRelease = await releaseAll(library, first.locks, label);
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
      const next = await acquireAll(library, level, tag, `${label} round ${round}`);
      const nextRelease = await releaseAll(library, next.locks, `${label} round ${round}`);
      acquired += next.locks.length;
      released += nextRelease.released;
      acquireMs += next.ms;
      releaseMs += nextRelease.ms;
      errors += next.errors + nextRelease.errors;
    }

    const reached = first.locks.length;
    const perResource = (after: number[]): number =>
      reached === 0 ? Number.NaN : meanDelta(before, after) / reached;
    return {
      reached,
      stoppedAtCap: first.stoppedAtDeadline,
      acquirePerSecond: acquired / (acquireMs / 1_000),
      releasePerSecond: released / (releaseMs / 1_000),
      cyclesPerSecond: Math.min(acquired, released) / ((acquireMs + releaseMs) / 1_000),
      heldBytesPerResource: perResource(whileHeld),
      idleBytesPerResource: perResource(idle),
      heldKeysPerNode: meanDelta(keysBefore, keysWhileHeld),
      idleKeysPerNode: meanDelta(keysBefore, keysIdle),
      errors,
    };
  };

  const byLevel: ScaleResult['byLevel'] = {};
  for (const level of plan.levels) {
    const repetitions = repetitionsFor(plan, level, state.runs);
    const results = await interleave(libraries, repetitions, (library, run) =>
      pass(library, level, `${level}:${run}`),
    );
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
      };
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
    byLevel,
    finalKeysPerNode: await keyCounts(admin),
    finalUsedMemoryPerNode: await usedMemory(admin),
  };
}

function meanDelta(before: readonly number[], after: readonly number[]): number {
  let sum = 0;
  for (let i = 0; i < before.length; i++) sum += after[i]! - before[i]!;
  return sum / before.length;
}
