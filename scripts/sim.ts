/**
 * `npm run sim`: the long randomized nemesis search of the protocol simulation (test/support/protocol-sim/nemesis.ts,
 * search.ts), on the nodes' real Lua scripts.
 *
 *   npm run sim -- --minutes 5                  search for 5 minutes (default 3) from a seed drawn now
 *   npm run sim -- --seed 1234                  start from that round seed (round k uses seed + k)
 *   npm run sim -- --variant floor-rule-off     search against a negative control's mutant instead of the shipped scripts
 *   npm run sim -- --replay '<case json>'       run one case again (the shrunk case a failure printed), with its log
 *   npm run sim -- --all                        go on after a violation (default: stop at the first)
 *   npm run sim -- --without other-layout,other-node-count
 *                                               leave out processes started with these settings (to look past a
 *                                               violation already found)
 *
 * Prints each round's seed, the schedules run, grants checked, violations (seed, schedules needed, shrunk case) and,
 * at the end, per script and fold step how many schedules a cut struck right after it. Exits 1 on a violation.
 */
import { parseArgs } from 'node:util';
import {
  runNemesis,
  type ClientSettings,
  type NemesisCase,
  type NemesisVariant,
} from '../test/support/protocol-sim/nemesis.js';
import { searchNemesis } from '../test/support/protocol-sim/search.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '3' },
    seed: { type: 'string' },
    variant: { type: 'string', default: 'real' },
    replay: { type: 'string' },
    all: { type: 'boolean', default: false },
    'max-schedules': { type: 'string' },
    without: { type: 'string' },
  },
});
const variant = values.variant as NemesisVariant;

if (values.replay !== undefined) {
  const c = JSON.parse(values.replay) as NemesisCase;
  const result = await runNemesis(c, { variant, log: true });
  for (const line of result.log) console.log(line);
  console.log(`\n${result.grants.length} grants; violation: ${result.violation ?? 'none'}`);
  process.exit(result.violation === null ? 0 : 1);
}

const seed = values.seed !== undefined ? Number(values.seed) : Date.now() % 2 ** 31;
const minutes = Number(values.minutes);
console.log(`nemesis search: variant ${variant}, ${minutes} min, first round seed ${seed}`);
const report = await searchNemesis({
  variant,
  budgetMs: minutes * 60_000,
  seed,
  stopAtFirst: !values.all,
  without: (values.without?.split(',') ?? []) as ClientSettings[],
  ...(values['max-schedules'] !== undefined ? { maxSchedules: Number(values['max-schedules']) } : {}),
  onRound: (r, roundSeed) =>
    console.log(
      `round seed ${roundSeed}: ${r.schedules} schedules, ${r.grants} grants, ${r.found.length} violations, ` +
        `${Math.round(r.elapsedMs / 1000)} s`,
    ),
});
for (const found of report.found) {
  console.log(
    `\nVIOLATION (round seed ${found.seed}, after ${found.schedulesNeeded} schedules, ${found.shrinks} shrinks):` +
      `\n  ${found.violation}\n  replay: npm run sim -- --variant ${variant} --replay '${JSON.stringify(found.shrunk)}'`,
  );
}
console.log(
  `\n${report.schedules} schedules, ${report.grants} grants checked (G2 over every pair), ` +
    `${report.found.length} violations, ${Math.round(report.elapsedMs / 1000)} s`,
);
console.log('schedules with a cut right after each step:');
for (const [key, count] of report.coverage) console.log(`  ${key.padEnd(22)} ${count}`);
process.exit(report.found.length === 0 ? 0 : 1);
