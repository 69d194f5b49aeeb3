// The guided nemesis search (test/fixtures/protocol-sim/guided.ts): a corpus of schedules that reached new coverage
// signals (a (step, fault) pair, a piece of F27's chain), mutated into new schedules. A short slice runs here; `npm
// run sim -- --guided` runs it for minutes. The negative control switches the scripts' settings check off: the guided
// search must find the violation, shrink it to a case that replays it, and the shipped scripts must keep G2 on it.
import { describe, expect, it } from 'vitest';
import { F27_CHAIN, guidedSearch } from '../../../fixtures/protocol-sim/guided.js';
import { runNemesis } from '../../../fixtures/protocol-sim/nemesis.js';

const SEARCH_TIMEOUT_MS = 180_000;
/** Schedules of the guided slice; `SIM_GUIDED_RUNS` raises it, `SIM_GUIDED_SEED` picks another seed. */
const RUNS = Number(process.env.SIM_GUIDED_RUNS ?? 60);
const SEED = Number(process.env.SIM_GUIDED_SEED ?? 34);

describe('the guided nemesis search', () => {
  it(
    `keeps G2 over ${RUNS} guided schedules, and its corpus reaches F27's chain up to a repair stopped with a register below a grant copied`,
    async () => {
      const report = await guidedSearch({ seed: SEED, budgetMs: Infinity, maxSchedules: RUNS });
      expect(report.found.map((f) => f.violation)).toEqual([]);
      expect(report.schedules).toBe(RUNS);
      // The corpus keeps only the schedules that reached something new.
      expect(report.corpus).toBeGreaterThan(5);
      expect(report.corpus).toBeLessThan(RUNS);
      for (const piece of F27_CHAIN.slice(0, F27_CHAIN.indexOf('stopped-partial') + 1)) {
        expect(report.firstReached.has(piece), piece).toBe(true);
      }
    },
    SEARCH_TIMEOUT_MS,
  );

  it('is deterministic from its seed', async () => {
    const a = await guidedSearch({ seed: SEED, budgetMs: Infinity, maxSchedules: 12 });
    const b = await guidedSearch({ seed: SEED, budgetMs: Infinity, maxSchedules: 12 });
    expect([...b.firstReached]).toEqual([...a.firstReached]);
    expect(b.grants).toBe(a.grants);
  });

  it(
    'negative control: with the scripts’ settings check cut out, it finds a G2 violation, shrinks it and replays it',
    async () => {
      const report = await guidedSearch({
        variant: 'settings-check-off',
        seed: SEED,
        budgetMs: Infinity,
        maxSchedules: 240,
        maxShrinkRuns: 150,
      });
      expect(report.found).toHaveLength(1);
      const found = report.found[0]!;
      expect(found.violation).toMatch(/token went backwards|duplicate token/);
      expect(found.shrunk.cuts.length).toBeLessThanOrEqual(found.original.cuts.length);
      expect((await runNemesis(found.shrunk, { variant: 'settings-check-off' })).violation).toBe(
        found.violation,
      );
      // The shrunk case needs a process that disagrees with the cluster, and keeps G2 on the shipped scripts.
      expect(found.shrunk.cuts.some((cut) => cut.fault.kind === 'start-client')).toBe(true);
      expect((await runNemesis(found.shrunk)).violation).toBeNull();
    },
    SEARCH_TIMEOUT_MS,
  );
});
