/**
 * The guided nemesis search (FoundationDB's and AFL's idea): instead of drawing every schedule from scratch, keep a
 * corpus of schedules that reached something no schedule before them reached — a new coverage signal of
 * `runNemesis` (`features`: a (step, fault) pair a cut struck at, or a piece of F27's chain, `F27_CHAIN`) — and make
 * new schedules by mutating corpus members: a cut added (mostly after the others: the run up to it stays as it was,
 * because every decision of a case is drawn in order from its seed), removed, moved, given another fault; two
 * members' cuts spliced; rarely another message seed. Members that got further along F27's chain are picked more
 * often.
 *
 * Deterministic from the seed: the k-th schedule of a search is the same on every run (the time budget only decides
 * where it stops). A violation is shrunk (cuts removed, palette kinds removed, cuts moved earlier, as long as it
 * still fails) and reported with the shrunk case, which `runNemesis` replays.
 */
import fc from 'fast-check';
import { seededRandom } from '@fenced/test-utils/seeded-random';
import {
  F27_CHAIN,
  NEMESIS_STEPS,
  nemesisArbitraries,
  runNemesis,
  type ClientSettings,
  type Cut,
  type Fault,
  type NemesisCase,
  type NemesisVariant,
} from './nemesis.js';

/** At most this many cuts in a mutated case. */
const MAX_CUTS = 48;
/** Random cases the corpus starts from. */
const INITIAL = 20;

export interface GuidedFound {
  /** The search's seed and how many schedules it ran before this one failed (this one included). */
  readonly seed: number;
  readonly schedulesNeeded: number;
  readonly elapsedMs: number;
  readonly original: NemesisCase;
  readonly shrunk: NemesisCase;
  readonly violation: string;
  /** Shrinking steps accepted, and runs tried. */
  readonly shrinks: number;
  readonly shrinkRuns: number;
}

export interface GuidedReport {
  readonly schedules: number;
  readonly grants: number;
  readonly corpus: number;
  /** Every coverage signal seen, with the schedule that first reached it. */
  readonly firstReached: ReadonlyMap<string, number>;
  /** The furthest along F27's chain any schedule got (0–10), and the schedule that got there first. */
  readonly bestProgress: number;
  readonly bestProgressAt: number;
  /** The first schedule that reached the furthest piece (replayable with `runNemesis`). */
  readonly bestCase: NemesisCase | null;
  readonly found: readonly GuidedFound[];
  readonly elapsedMs: number;
}

interface Member {
  readonly c: NemesisCase;
  readonly progress: number;
}

export async function guidedSearch(options: {
  readonly variant?: NemesisVariant;
  readonly seed: number;
  readonly budgetMs: number;
  readonly maxSchedules?: number;
  readonly stopAtFirst?: boolean;
  readonly without?: readonly ClientSettings[];
  /** Called every `every` schedules and at a new chain piece. */
  readonly onProgress?: (report: GuidedReport) => void;
  readonly every?: number;
  /** Runs spent shrinking one violation at most. @defaultValue 400 */
  readonly maxShrinkRuns?: number;
  /**
   * Cases with Redis Cluster members and the Cluster faults (nemesis.ts, `clusterCaseArbitrary`); the chain followed
   * is then F29's (cluster-faults.ts).
   */
  readonly cluster?: boolean;
  /**
   * Fixes part of every case the search runs (a focus, as `without` is one): e.g. three nodes of which two are Cluster
   * members. @defaultValue every case as drawn and mutated
   */
  readonly shape?: (c: NemesisCase) => NemesisCase;
}): Promise<GuidedReport> {
  const shape = options.shape ?? ((c: NemesisCase) => c);
  const {
    cases: nemesisCaseArbitrary,
    cuts: cutArbitrary,
    faults: faultArbitrary,
  } = nemesisArbitraries(options.cluster === true);
  const variant = options.variant ?? 'real';
  const without = options.without ?? [];
  const random = seededRandom(options.seed);
  const int = (max: number): number => Math.floor(random() * max);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  const allowed = (cut: Cut): boolean =>
    cut.fault.kind !== 'start-client' || !without.includes(cut.fault.settings);
  const draw = <T>(arbitrary: fc.Arbitrary<T>): T =>
    fc.sample(arbitrary, { seed: int(2 ** 31), numRuns: 1 })[0]!;
  const newCut = (): Cut => {
    for (;;) {
      const cut = draw(cutArbitrary);
      if (allowed(cut)) return cut;
    }
  };
  const fresh = (): NemesisCase => {
    const c = draw(nemesisCaseArbitrary);
    return shape({ ...c, cuts: c.cuts.filter(allowed) });
  };
  /** A case with its palette widened to every kind its cuts use (a mutation's new cut must strike). */
  const withPalette = (c: NemesisCase, cuts: Cut[]): NemesisCase => {
    const palette = new Set(c.palette ?? []);
    for (const cut of cuts) palette.add(cut.fault.kind);
    return { ...c, cuts: cuts.slice(0, MAX_CUTS), palette: [...palette] };
  };
  const lastEventStep = (cuts: readonly Cut[]): number =>
    cuts.reduce((max, cut) => (cut.after === undefined ? Math.max(max, cut.step) : max), 0);

  const corpus: Member[] = [];
  const mutate = (parent: NemesisCase): NemesisCase => {
    let cuts = [...parent.cuts];
    let c = parent;
    const times = 1 + int(3);
    for (let i = 0; i < times; i++) {
      const what = int(10);
      if (what <= 2 || cuts.length === 0) {
        // Extend: a new cut, at an event after the last one (the run up to there is unchanged) or after a step.
        const cut = newCut();
        const from = lastEventStep(cuts);
        cuts.push(
          cut.after === undefined && from < NEMESIS_STEPS - 1
            ? { ...cut, step: from + 1 + int(Math.min(300, NEMESIS_STEPS - 1 - from)) }
            : cut,
        );
      } else if (what === 3) {
        cuts.splice(int(cuts.length), 1);
      } else if (what === 4) {
        const k = int(cuts.length);
        const cut = cuts[k]!;
        const step =
          cut.after === undefined
            ? Math.max(0, Math.min(NEMESIS_STEPS - 1, cut.step + int(101) - 50))
            : Math.max(1, cut.step + pick([-1, 1, 1]));
        cuts[k] = { ...cut, step };
      } else if (what === 5) {
        const k = int(cuts.length);
        let fault: Fault;
        do fault = draw(faultArbitrary);
        while (!allowed({ step: 0, fault }));
        cuts[k] = { ...cuts[k]!, fault };
      } else if (what === 6) {
        // Another step name for a cut after a named step, or a named step for a cut at an event.
        const k = int(cuts.length);
        const other = newCut();
        cuts[k] =
          other.after === undefined
            ? { step: other.step, fault: cuts[k]!.fault }
            : { step: other.step, after: other.after, fault: cuts[k]!.fault };
      } else if (what === 7 && corpus.length > 1) {
        // Splice: another member's cuts after a point of this one's.
        const other = pick(corpus).c.cuts;
        cuts = [...cuts.slice(0, int(cuts.length + 1)), ...other.slice(int(other.length + 1))];
      } else if (what === 8) {
        // Duplicate a cut one run later (a second stop, a second fold).
        const cut = pick(cuts);
        cuts.push({ ...cut, step: cut.step + 1 + int(cut.after === undefined ? 100 : 2) });
      } else if (int(4) === 0) {
        c = { ...c, seed: int(2 ** 31) };
      } else {
        c = { ...c, nodes: 3 };
      }
    }
    return shape(withPalette(c, cuts));
  };

  const started = performance.now();
  const seen = new Map<string, number>();
  const found: GuidedFound[] = [];
  let schedules = 0;
  let grants = 0;
  let bestProgress = 0;
  let bestProgressAt = 0;
  let bestCase: NemesisCase | null = null;
  const report = (): GuidedReport => ({
    schedules,
    grants,
    corpus: corpus.length,
    firstReached: seen,
    bestProgress,
    bestProgressAt,
    bestCase,
    found,
    elapsedMs: performance.now() - started,
  });
  const chooseParent = (): NemesisCase => {
    if (random() < 0.5) {
      // The members furthest along F27's chain, and those one piece short of them.
      const top = corpus.reduce((max, m) => Math.max(max, m.progress), 0);
      const best = corpus.filter((m) => m.progress >= top - (random() < 0.3 ? 1 : 0));
      return pick(best).c;
    }
    return pick(corpus).c;
  };

  for (;;) {
    if (performance.now() - started >= options.budgetMs) break;
    if (options.maxSchedules !== undefined && schedules >= options.maxSchedules) break;
    const c = schedules < INITIAL || corpus.length === 0 || random() < 0.1 ? fresh() : mutate(chooseParent());
    const result = await runNemesis(c, { variant });
    schedules++;
    grants += result.grants.length;
    let interesting = false;
    for (const feature of result.features) {
      if (seen.has(feature)) continue;
      seen.set(feature, schedules);
      interesting = true;
    }
    const chainKey = `progress:${result.progress}`;
    if (!seen.has(chainKey)) {
      seen.set(chainKey, schedules);
      interesting = true;
    }
    if (result.progress > bestProgress) {
      bestProgress = result.progress;
      bestProgressAt = schedules;
      bestCase = c;
      options.onProgress?.(report());
    }
    if (interesting) corpus.push({ c, progress: result.progress });
    if (result.violation !== null) {
      const shrunk = await shrink(c, variant, options.maxShrinkRuns ?? 400);
      found.push({
        seed: options.seed,
        schedulesNeeded: schedules,
        elapsedMs: performance.now() - started,
        original: c,
        shrunk: shrunk.c,
        violation: shrunk.violation,
        shrinks: shrunk.shrinks,
        shrinkRuns: shrunk.runs,
      });
      if (options.stopAtFirst !== false) break;
    }
    if (options.every !== undefined && schedules % options.every === 0) options.onProgress?.(report());
  }
  return report();
}

/**
 * Greedy shrinking of a failing case: drop cuts one by one, drop palette kinds no cut uses, move cuts earlier, as
 * long as the case still violates G2; stops after `maxRuns` runs.
 */
export async function shrink(
  c: NemesisCase,
  variant: NemesisVariant,
  maxRuns: number,
): Promise<{ c: NemesisCase; violation: string; shrinks: number; runs: number }> {
  let runs = 0;
  let shrinks = 0;
  let current = c;
  let violation = (await runNemesis(c, { variant })).violation ?? '(did not replay)';
  const fails = async (candidate: NemesisCase): Promise<boolean> => {
    if (runs >= maxRuns) return false;
    runs++;
    const result = await runNemesis(candidate, { variant });
    if (result.violation === null) return false;
    violation = result.violation;
    current = candidate;
    shrinks++;
    return true;
  };
  let changed = true;
  while (changed && runs < maxRuns) {
    changed = false;
    for (let i = current.cuts.length - 1; i >= 0; i--) {
      if (await fails({ ...current, cuts: current.cuts.filter((_, k) => k !== i) })) changed = true;
    }
    const used = new Set(current.cuts.map((cut) => cut.fault.kind));
    const palette = current.palette?.filter((kind) => used.has(kind));
    if (palette !== undefined && palette.length < current.palette!.length) {
      if (await fails({ ...current, palette })) changed = true;
    }
    for (let i = 0; i < current.cuts.length; i++) {
      const cut = current.cuts[i]!;
      for (const step of [cut.after === undefined ? 0 : 1, Math.floor(cut.step / 2), cut.step - 1]) {
        if (step >= cut.step || step < (cut.after === undefined ? 0 : 1)) continue;
        const cuts = current.cuts.map((other, k) => (k === i ? { ...other, step } : other));
        if (await fails({ ...current, cuts })) {
          changed = true;
          break;
        }
      }
    }
  }
  return { c: current, violation, shrinks, runs };
}

export { F27_CHAIN };
