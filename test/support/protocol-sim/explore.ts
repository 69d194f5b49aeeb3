/**
 * Two ways to drive the simulation's choices:
 *
 * - `exploreExhaustively`: every run is a sequence of decisions; this enumerates, depth first, *every* sequence that
 *   departs from the default (option 0) at most `maxDeviations` times — delay-bounded search. Bugs that need a few
 *   unusual events (one message held past a crash and a repair) are found with a bound of one or two, and the search
 *   says whether it covered the whole bounded space.
 * - `randomChooser(seed)`: a seeded PRNG that mostly takes the default and sometimes not; a failure replays from its
 *   seed alone.
 */
import { seededRandom } from '@fenced/test-utils/seeded-random';
import type { Chooser } from './sim-world.js';

export interface Failure {
  /** The decisions of the failing run, replayable with `replayChooser`. */
  readonly choices: readonly number[];
  readonly violation: string;
}

export interface ExhaustiveReport {
  readonly runs: number;
  /** True when every sequence within the bound was run (false: stopped at maxRuns). */
  readonly exhausted: boolean;
  readonly failure: Failure | null;
}

/** Runs `scenario` under every decision sequence with at most `maxDeviations` non-default picks. */
export async function exploreExhaustively(
  scenario: (choose: Chooser) => Promise<string | null>,
  options: { maxDeviations: number; maxRuns: number },
): Promise<ExhaustiveReport> {
  /** The decisions of the current run: how many options each had, and the pick. */
  let prefix: { options: number; pick: number }[] = [];
  let runs = 0;
  for (;;) {
    const taken: { options: number; pick: number }[] = [];
    const choose: Chooser = (_point, count) => {
      const i = taken.length;
      const pick = i < prefix.length ? Math.min(prefix[i]!.pick, count - 1) : 0;
      taken.push({ options: count, pick });
      return pick;
    };
    const violation = await scenario(choose);
    runs++;
    if (violation !== null) {
      return { runs, exhausted: false, failure: { choices: taken.map((t) => t.pick), violation } };
    }
    // Backtrack: the deepest decision that can take its next option within the deviation bound.
    let next: { options: number; pick: number }[] | null = null;
    for (let i = taken.length - 1; i >= 0; i--) {
      const decision = taken[i]!;
      if (decision.pick + 1 >= decision.options) continue;
      const deviations = taken.slice(0, i).filter((t) => t.pick !== 0).length + 1;
      if (deviations > options.maxDeviations) continue;
      next = [...taken.slice(0, i), { options: decision.options, pick: decision.pick + 1 }];
      break;
    }
    if (next === null) return { runs, exhausted: true, failure: null };
    if (runs >= options.maxRuns) return { runs, exhausted: false, failure: null };
    prefix = next;
  }
}

/** Replays a recorded decision sequence (then takes defaults). */
export function replayChooser(choices: readonly number[]): Chooser {
  let i = 0;
  return (_point, count) => Math.min(choices[i++] ?? 0, count - 1);
}

/** Takes the default with probability `pDefault`, else one of the other options uniformly. */
export function randomChooser(seed: number, pDefault = 0.5): Chooser {
  const random = seededRandom(seed);
  return (_point, count) => {
    if (count <= 1 || random() < pDefault) return 0;
    return 1 + Math.floor(random() * (count - 1));
  };
}
