// F27 found by search (issue 34 item 5): the guided nemesis search over the F27 focus (nemesis.ts
// `f27FocusCaseArbitrary`: three nodes, one resource, registers seeded above every time-derived proposal, F27's fault
// kinds, a quiet of every client and a fresh process; every cut drawn and mutated by the search, none written by hand).
// On the shipped scripts it keeps G2; that test, not the negative control, is what kills the floor rule's mutation row
// (24) in `npm run mutants -- --simulation`. The negative control switches the floor rule off (`floor-rule-off`: a
// present register is the answer even below the node's floor, as before the F27 fix): the same search must find a G2
// violation, shrink it, replay it, and the shipped scripts must keep G2 on the shrunk case (DESIGN §3: a node never
// answers below its floor). `npm run sim -- --guided --f27` runs it for minutes; docs/simulation.md "F27 by
// guided search" records what it found there.
import { describe, expect, it } from 'vitest';
import { guidedSearch } from '../../../fixtures/protocol-sim/guided.js';
import { runNemesis } from '../../../fixtures/protocol-sim/nemesis.js';

const SEARCH_TIMEOUT_MS = 180_000;
/**
 * The search's seed and how many schedules it may take (`SIM_F27_SEED`, `SIM_F27_RUNS`). From seed 2 it finds the
 * violation at schedule 161 (about 12 s of CPU); seed 1 finds none in 250 schedules, seeds 3–12 none in 70 (a sweep of
 * seeds in order). Any change to what the simulated processes do redraws every schedule, and the sweep must be run
 * again (docs/simulation.md says how).
 */
const SEED = Number(process.env.SIM_F27_SEED ?? 2);
const RUNS = Number(process.env.SIM_F27_RUNS ?? 170);

describe('F27 found by the guided search', () => {
  it(
    `keeps G2 over ${RUNS} focused schedules on the shipped scripts (with the floor rule cut out, this same search breaks G2 at schedule 161)`,
    async () => {
      const report = await guidedSearch({ focus: 'f27', seed: SEED, budgetMs: Infinity, maxSchedules: RUNS });
      expect(report.found.map((f) => f.violation)).toEqual([]);
      expect(report.schedules).toBe(RUNS);
      // The search reached F27's chain up to a source folded while a repair held a copied register below a grant.
      expect(report.firstReached.has('fold-while-partial')).toBe(true);
    },
    SEARCH_TIMEOUT_MS,
  );

  it(
    'negative control: with the floor rule off, the focused search finds a lower register answering below the floor (G2), shrinks it and replays it; the shipped scripts keep G2 on it',
    async () => {
      const report = await guidedSearch({
        variant: 'floor-rule-off',
        focus: 'f27',
        seed: SEED,
        budgetMs: Infinity,
        maxSchedules: RUNS,
        maxShrinkRuns: 60,
      });
      expect(report.found).toHaveLength(1);
      const found = report.found[0]!;
      expect(found.violation).toMatch(/token went backwards|duplicate token/);
      expect(found.shrunk.cuts.length).toBeLessThanOrEqual(found.original.cuts.length);
      expect(found.shrunk.focus).toBe('f27');
      expect((await runNemesis(found.shrunk, { variant: 'floor-rule-off' })).violation).toBe(found.violation);
      // F27's pieces: a node restarted empty, and a source folded while it was being repaired.
      const kinds = found.shrunk.cuts.map((cut) => cut.fault.kind);
      expect(kinds).toContain('amnesia');
      expect(kinds).toContain('fold');
      expect(report.firstReached.has('fold-while-partial')).toBe(true);
      // The negative control's point: the same case keeps G2 on the shipped scripts.
      expect((await runNemesis(found.shrunk)).violation).toBeNull();
    },
    SEARCH_TIMEOUT_MS,
  );

  it('draws the same schedules from the same seed', async () => {
    const a = await guidedSearch({ focus: 'f27', seed: SEED, budgetMs: Infinity, maxSchedules: 8 });
    const b = await guidedSearch({ focus: 'f27', seed: SEED, budgetMs: Infinity, maxSchedules: 8 });
    expect([...b.firstReached]).toEqual([...a.firstReached]);
    expect(b.grants).toBe(a.grants);
    expect(a.found).toEqual([]);
  });
});
