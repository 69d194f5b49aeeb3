/**
 * The long randomized search over nemesis schedules (nemesis.ts): fast-check draws cases in rounds, each round from a
 * seed of its own, until the time budget is spent. A failing case is shrunk by fast-check (fewer cuts, earlier
 * steps, smaller indices) and reported with the round's seed, the shrunk case (replayable with `runNemesis`), and
 * how many schedules the search ran before it. Coverage: for every script and fold step, in how many schedules a
 * cut struck right after it.
 */
import fc from 'fast-check';
import {
  COVERAGE_KEYS,
  nemesisArbitraries,
  runNemesis,
  type ClientSettings,
  type NemesisCase,
  type NemesisVariant,
} from './nemesis.js';

export interface Found {
  /** The seed of the fast-check round that found it (`fc.check(…, { seed })` draws the same cases again). */
  readonly seed: number;
  /** Schedules run by the whole search before this one failed (this one included). */
  readonly schedulesNeeded: number;
  readonly shrunk: NemesisCase;
  readonly violation: string;
  readonly shrinks: number;
}

export interface SearchReport {
  readonly schedules: number;
  readonly grants: number;
  readonly found: readonly Found[];
  /** Per step name (COVERAGE_KEYS), the number of schedules in which a cut struck right after it. */
  readonly coverage: ReadonlyMap<string, number>;
  readonly elapsedMs: number;
}

export async function searchNemesis(options: {
  readonly variant?: NemesisVariant;
  /** Stop after this long (checked between rounds). */
  readonly budgetMs: number;
  /** Stop after this many schedules. @defaultValue no limit */
  readonly maxSchedules?: number;
  /** First round's seed; round k uses seed + k. */
  readonly seed: number;
  readonly runsPerRound?: number;
  /** Stop at the first violation. @defaultValue true */
  readonly stopAtFirst?: boolean;
  readonly onRound?: (report: SearchReport, seed: number) => void;
  /** Processes started with these settings are left out (to look past a violation already found). */
  readonly without?: readonly ClientSettings[];
  /** Cases with Redis Cluster members and the Cluster faults (nemesis.ts, `clusterCaseArbitrary`). */
  readonly cluster?: boolean;
}): Promise<SearchReport> {
  const without = options.without ?? [];
  const all = nemesisArbitraries(options.cluster === true).cases;
  const cases =
    without.length === 0
      ? all
      : all.map((c) => ({
          ...c,
          cuts: c.cuts.filter(
            (cut) => cut.fault.kind !== 'start-client' || !without.includes(cut.fault.settings),
          ),
        }));
  const started = performance.now();
  const coverage = new Map<string, number>(COVERAGE_KEYS.map((key) => [key, 0]));
  const found: Found[] = [];
  let schedules = 0;
  let grants = 0;
  const report = (): SearchReport => ({
    schedules,
    grants,
    found,
    coverage,
    elapsedMs: performance.now() - started,
  });
  for (let round = 0; ; round++) {
    if (performance.now() - started >= options.budgetMs) break;
    if (options.maxSchedules !== undefined && schedules >= options.maxSchedules) break;
    const seed = options.seed + round;
    let shrinking = false;
    let firstFailureAt: number | null = null;
    const details = await fc.check(
      fc.asyncProperty(cases, async (c) => {
        const result = await runNemesis(c, { variant: options.variant ?? 'real' });
        if (!shrinking) {
          schedules++;
          grants += result.grants.length;
          for (const key of result.cutAfter) coverage.set(key, (coverage.get(key) ?? 0) + 1);
        }
        if (result.violation !== null && !shrinking) {
          shrinking = true;
          firstFailureAt = schedules;
        }
        return result.violation === null;
      }),
      { seed, numRuns: options.runsPerRound ?? 50 },
    );
    if (details.failed && details.counterexample !== null) {
      const shrunk = details.counterexample[0];
      const replay = await runNemesis(shrunk, { variant: options.variant ?? 'real' });
      found.push({
        seed,
        schedulesNeeded: firstFailureAt ?? schedules,
        shrunk,
        violation: replay.violation ?? '(did not replay)',
        shrinks: details.numShrinks,
      });
    }
    options.onRound?.(report(), seed);
    if (found.length > 0 && options.stopAtFirst !== false) break;
  }
  return report();
}
