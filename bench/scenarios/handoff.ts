import type { BenchPlan } from '../bench-plan.js';
import type { HeldLock, LockLibrary } from '../lock-library.js';
import { interleave, sleep, type RunState } from '../runner.js';
import { medianSummary, summarizeLatencies, type LatencySummary } from '../statistics.js';

export interface HandoffCell {
  /** How the library waits (pub/sub or a polling interval), as configured. */
  waitStrategy: string;
  /** Field-by-field median over the runs of the release → next grant gaps. */
  gap: LatencySummary;
  /** All gaps of all runs pooled. */
  gapPooled: LatencySummary;
  gapRuns: LatencySummary[];
  errors: number;
}

export interface HandoffResult {
  unit: 'milliseconds from the release call to the next holder being granted';
  handoffsPerRun: number;
  holdMs: number;
  /** waiter count → library → cell */
  byWaiters: Record<string, Record<string, HandoffCell>>;
}

/**
 * Scenario 3: contended hand-off. A holder takes the resource, K callers start waiting on it (each
 * with the library's own waiting mechanism), then the lease passes from holder to waiter: each one holds it for
 * `holdMs` and releases it. The gap is measured from just before a holder calls release to the moment the next
 * waiter's acquire resolves, so it includes the release's own round trip, the wake-up (or poll) and the
 * winning acquire.
 */
export async function runHandoff(
  libraries: readonly LockLibrary[],
  plan: BenchPlan['handoff'],
  state: RunState,
): Promise<HandoffResult> {
  const round = async (library: LockLibrary, resource: string, waiters: number): Promise<number[]> => {
    const gaps: number[] = [];
    let releasedAt = Number.NaN;
    const releaseRecorded = async (held: HeldLock): Promise<void> => {
      releasedAt = performance.now();
      try {
        await held.release();
      } catch (error) {
        state.failures.record('handoff', library.name, error);
      }
    };
    const first = await library.acquire(resource, plan.ttlMs);
    const waiting = Array.from({ length: waiters }, async () => {
      let held: HeldLock;
      try {
        held = await library.acquireWaiting(resource, plan.ttlMs, plan.waitMs);
      } catch (error) {
        state.failures.record('handoff', library.name, error);
        return false;
      }
      gaps.push(performance.now() - releasedAt);
      await sleep(plan.holdMs);
      await releaseRecorded(held);
      return true;
    });
    await sleep(plan.settleMs);
    await releaseRecorded(first);
    // Every waiter ends by itself: granted and released, or failed after `waitMs`.
    await Promise.all(waiting);
    return gaps;
  };
  const byWaiters: HandoffResult['byWaiters'] = {};
  for (const waiters of plan.waiterCounts) {
    const rounds = Math.ceil(plan.handoffsPerRun / waiters);
    const measure = async (library: LockLibrary, tag: string, roundCount: number) => {
      const gaps: number[] = [];
      for (let r = 0; r < roundCount; r++) {
        state.progress.update(`handoff k=${waiters} ${library.name} ${tag} round ${r + 1}/${roundCount}`);
        try {
          gaps.push(...(await round(library, `ho:k${waiters}:${tag}:${r}`, waiters)));
        } catch (error) {
          state.failures.record('handoff', library.name, error);
        }
      }
      return { gaps, errors: roundCount * waiters - gaps.length };
    };
    for (const library of libraries) await measure(library, 'warmup', 1);
    const results = await interleave(libraries, state.runs, (library, run) =>
      measure(library, `r${run}`, rounds),
    );
    const byLibrary: Record<string, HandoffCell> = {};
    for (const library of libraries) {
      const runs = results.get(library.name)!;
      const gapRuns = runs.map((r) => summarizeLatencies(r.gaps));
      byLibrary[library.name] = {
        waitStrategy: library.waitStrategy,
        gap: medianSummary(gapRuns),
        gapPooled: summarizeLatencies(runs.flatMap((r) => r.gaps)),
        gapRuns,
        errors: runs.reduce((a, r) => a + r.errors, 0),
      };
    }
    byWaiters[String(waiters)] = byLibrary;
    state.progress.log(
      `handoff k=${waiters}: p50 ${Object.entries(byLibrary)
        .map(([name, cell]) => `${name} ${cell.gap.p50.toFixed(2)} ms`)
        .join(', ')}`,
    );
  }
  return {
    unit: 'milliseconds from the release call to the next holder being granted',
    handoffsPerRun: plan.handoffsPerRun,
    holdMs: plan.holdMs,
    byWaiters,
  };
}
