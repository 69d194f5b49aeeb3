import type { BenchPlan } from '../plan.js';
import type { HeldLock, LockLibrary } from '../lock-library.js';
import { interleave, sleep, type RunState } from '../runner.js';
import { medianSummary, summarizeLatencies, type LatencySummary } from '../statistics.js';
import type { BenchResults } from '../results.js';
import { num, ratio, table, type SectionView } from '../markdown.js';

/**
 * The row key of the fenced waiters that use a second coordinator (own connections, own waiter queue), as
 * waiters in another process would: they hear the release from the nodes' messages, a round trip after it.
 */
export const FENCED_ELSEWHERE = 'fenced, waiters in another process';

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
  /**
   * How long the first holder of each round held the resource while the waiters started waiting: the first hand-off
   * of a round follows that much quiet. Absent in results from before it was recorded (100 ms then).
   */
  settleMs?: number;
  /** waiter count → library (and {@link FENCED_ELSEWHERE}) → cell */
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
  /** What is measured: each library's own wait, plus fenced's from a second coordinator. */
  interface Variant {
    readonly key: string;
    readonly library: LockLibrary;
    readonly name: string;
    readonly acquireWaiting: LockLibrary['acquireWaiting'];
  }
  const variants: Variant[] = libraries.flatMap((library) => {
    const own: Variant = {
      key: library.name,
      library,
      name: library.name,
      acquireWaiting: (r, t, w) => library.acquireWaiting(r, t, w),
    };
    const elsewhere = library.acquireWaitingElsewhere?.bind(library);
    return elsewhere === undefined
      ? [own]
      : [own, { key: FENCED_ELSEWHERE, library, name: FENCED_ELSEWHERE, acquireWaiting: elsewhere }];
  });
  const round = async (variant: Variant, resource: string, waiters: number): Promise<number[]> => {
    const library = variant.library;
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
        held = await variant.acquireWaiting(resource, plan.ttlMs, plan.waitMs);
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
    const measure = async (variant: Variant, tag: string, roundCount: number) => {
      const gaps: number[] = [];
      for (let r = 0; r < roundCount; r++) {
        state.progress.update(`handoff k=${waiters} ${variant.name} ${tag} round ${r + 1}/${roundCount}`);
        try {
          gaps.push(...(await round(variant, `ho:k${waiters}:${variant.name}:${tag}:${r}`, waiters)));
        } catch (error) {
          state.failures.record('handoff', variant.library.name, error);
        }
      }
      return { gaps, errors: roundCount * waiters - gaps.length };
    };
    for (const variant of variants) await measure(variant, 'warmup', 1);
    const results = await interleave(variants, state.runs, (variant, run) =>
      measure(variant, `r${run}`, rounds),
    );
    const byLibrary: Record<string, HandoffCell> = {};
    for (const variant of variants) {
      const runs = results.get(variant.name)!;
      const gapRuns = runs.map((r) => summarizeLatencies(r.gaps));
      byLibrary[variant.key] = {
        waitStrategy:
          variant.key === FENCED_ELSEWHERE
            ? `${variant.library.waitStrategy}; a second coordinator, so only the nodes' release messages wake it`
            : variant.library.waitStrategy,
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
    settleMs: plan.settleMs,
    byWaiters,
  };
}

/**
 * Scenario 3's table in the report: the gap from a release to the next holder, per waiter count and library.
 */
export function renderHandoff(results: BenchResults, { chart }: SectionView): string[] {
  const r = results.results;
  if (r.handoff === undefined) return [];
  const out: string[] = [];
  const handoff = r.handoff;
  out.push(
    `### 3. Contended hand-off`,
    '',
    ...chart('handoff'),
    `K waiters on one resource, each holds it ${handoff.holdMs} ms once granted (the round's first holder ${handoff.settleMs ?? 100} ms, while the waiters start waiting: with K = 1 every hand-off measured is that first one); milliseconds from the holder's release call to the next holder's grant (lower is better); median over ${results.runs} runs of ${handoff.handoffsPerRun} hand-offs (max: over all runs).`,
    '',
    table(
      ['K', 'library', 'waits by', 'p50', 'p99', 'max', 'fenced ÷ library (p50)'],
      Object.entries(handoff.byWaiters).flatMap(([waiters, cells]) =>
        Object.keys(cells).map((n) => {
          const cell = cells[n]!;
          return [
            waiters,
            n,
            cell.waitStrategy,
            num(cell.gap.p50, 2),
            num(cell.gap.p99, 2),
            num(cell.gapPooled.max, 2),
            n === 'fenced' || n === FENCED_ELSEWHERE ? '' : ratio(cells.fenced?.gap.p50, cell.gap.p50),
          ];
        }),
      ),
    ),
    '',
  );
  return out;
}
