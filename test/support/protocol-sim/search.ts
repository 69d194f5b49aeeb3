/**
 * The long randomized search over nemesis schedules (nemesis.ts): fast-check draws cases in rounds, each round from a
 * seed of its own, until the time budget is spent. A failing case is shrunk by fast-check (fewer cuts, earlier
 * steps, smaller indices) and reported with the round's seed, the shrunk case (replayable with `runNemesis`), and
 * how many schedules the search ran before it. Coverage: for every script and fold step, in how many schedules a
 * cut struck right after it.
 */
import fc from 'fast-check';
import { addRun, newCoverage, type Coverage } from './coverage.js';
import { shrink } from './guided.js';
import {
  nemesisArbitraries,
  nemesisCaseArbitrary,
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
  /** The same and more: steps run, (step, fault) pairs taken (coverage.ts). */
  readonly detail: Coverage;
  /** Guarded transactions committed at the modelled guard, over all schedules. */
  readonly commits: number;
  /** Extends that reported a token below their grant's (checkers.ts; each also a violation). */
  readonly lowerExtendTokens: number;
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
  const detail = newCoverage();
  const coverage = detail.cutAfter;
  let commits = 0;
  let lowerExtends = 0;
  const found: Found[] = [];
  let schedules = 0;
  let grants = 0;
  const report = (): SearchReport => ({
    schedules,
    grants,
    found,
    coverage,
    detail,
    commits,
    lowerExtendTokens: lowerExtends,
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
          commits += result.commits;
          lowerExtends += result.lowerExtendTokens;
          addRun(detail, result);
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

/**
 * A negative control's search: the cases the nemesis search draws from `seed` (fast-check's), run in order against
 * `variant` until one violates a check, then shrunk greedily (guided.ts `shrink`, at most `shrinkRuns` runs).
 * `schedule` is the 1-based index of the first failing case.
 */
export async function findViolation(
  variant: NemesisVariant,
  seed: number,
  maxSchedules: number,
  shrinkRuns = 40,
): Promise<{ schedule: number; original: NemesisCase; shrunk: NemesisCase; violation: string } | null> {
  const cases = fc.sample(nemesisCaseArbitrary, { seed, numRuns: maxSchedules });
  for (const [i, c] of cases.entries()) {
    if ((await runNemesis(c, { variant })).violation === null) continue;
    const shrunk = await shrink(c, variant, shrinkRuns);
    return { schedule: i + 1, original: c, shrunk: shrunk.c, violation: shrunk.violation };
  }
  return null;
}
