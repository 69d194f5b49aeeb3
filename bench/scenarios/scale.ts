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
 * (memory left per idle resource: release deletes the lease key exactly as expiry would). Passes of the same
 * level are interleaved over the libraries. Both phases are bounded by `phaseCapMs`; a pass that hits the cap
 * reports how many resources it reached.
 */
export async function runScale(
  libraries: readonly LockLibrary[],
  admin: readonly Redis[],
  plan: BenchPlan['scale'],
  state: RunState,
): Promise<ScaleResult> {
  const pass = async (library: LockLibrary, level: number, tag: string): Promise<ScalePass> => {
    await sleep(plan.settleMs);
    const before = await usedMemory(admin);
    const keysBefore = await keyCounts(admin);
    const held: (HeldLock | undefined)[] = [];
    let errors = 0;
    const label = `scale ${level.toLocaleString('en-US')} ${library.name} ${tag}`;

    const acquireStart = performance.now();
    const acquired = await forEachIndex(
      level,
      plan.concurrency,
      async (i) => {
        try {
          held[i] = await library.acquire(`sc:${tag}:${i}`, plan.ttlMs);
        } catch (error) {
          errors++;
          state.failures.record('scale', library.name, error);
        }
      },
      {
        deadline: acquireStart + plan.phaseCapMs,
        onProgress: (done) => state.progress.update(`${label}: acquired ${done.toLocaleString('en-US')}`),
      },
    );
    const acquireMs = performance.now() - acquireStart;
    const locks = held.filter((h): h is HeldLock => h !== undefined);
    const heldCount = locks.length;
    held.length = 0;
    await sleep(plan.settleMs);
    const whileHeld = await usedMemory(admin);
    const keysWhileHeld = await keyCounts(admin);

    const releaseStart = performance.now();
    let released = 0;
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
        deadline: releaseStart + 2 * plan.phaseCapMs,
        onProgress: (done) => state.progress.update(`${label}: released ${done.toLocaleString('en-US')}`),
      },
    );
    const releaseMs = performance.now() - releaseStart;
    locks.length = 0;
    await sleep(plan.settleMs);
    const idle = await usedMemory(admin);
    const keysIdle = await keyCounts(admin);

    const reached = heldCount;
    const perResource = (after: number[]): number =>
      reached === 0 ? Number.NaN : meanDelta(before, after) / reached;
    return {
      reached,
      stoppedAtCap: acquired.stoppedAtDeadline,
      acquirePerSecond: reached / (acquireMs / 1_000),
      releasePerSecond: released / (releaseMs / 1_000),
      cyclesPerSecond: Math.min(reached, released) / ((acquireMs + releaseMs) / 1_000),
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
