/**
 * `npm run sim`: the long randomized nemesis search of the protocol simulation (test/fixtures/protocol-sim/nemesis.ts,
 * search.ts), on the nodes' real Lua scripts.
 *
 *   npm run sim -- --minutes 5                  search for 5 minutes (default 3) from a seed drawn now
 *   npm run sim -- --seed 1234                  start from that round seed (round k uses seed + k)
 *   npm run sim -- --variant floor-rule-off     search against a negative control's mutant instead of the shipped scripts
 *   npm run sim -- --replay '<case json>'       run one case again (the shrunk case a failure printed), with its log
 *   npm run sim -- --replay '<case json>' --shrink 2000
 *                                               shrink that case further (guided.ts's greedy shrink, up to 2000 runs;
 *                                               any violation counts) and print the shrunk case
 *   npm run sim -- --guided --shrink-runs 2000  shrink a violation found with up to 2000 runs (default 400)
 *   npm run sim -- --all                        go on after a violation (default: stop at the first)
 *   npm run sim -- --guided                     the guided search (guided.ts): a corpus of schedules that reached new
 *                                               coverage signals, mutated, instead of schedules drawn from scratch
 *   npm run sim -- --cluster                    cases with Redis Cluster members and the Cluster faults (shard restarts,
 *                                               slot moves in batches); the guided search follows F29's chain
 *   npm run sim -- --guided --f27               the guided search over the F27 focus (nemesis.ts: three nodes, one
 *                                               resource, F27's fault kinds and a quiet of every client)
 *   npm run sim -- --without other-layout,other-node-count
 *                                               leave out processes started with these settings (to look past a
 *                                               violation already found)
 *   npm run sim -- --focus '{"nodes":3,"cluster":{"members":2,"shards":2},"palette":["migrate-slot","amnesia"]}'
 *                                               every case drawn (and, guided, every mutant) takes these fields: a
 *                                               focus on one shape of case, every cut still drawn
 *   npm run sim -- --cluster --completed-moves  every slot move runs to its end (no cancelled move): a focus on the
 *                                               forms of F29 where a shard restarts during the move
 *
 * Prints each round's seed, the schedules run, grants and guarded transactions checked (G2; G3, G4, G5 over the
 * modelled guard), violations (seed, schedules needed, shrunk case) and, at the end, per step how many schedules ran
 * it and cut right after it, the (step, fault) cuts no schedule took, and the scripts no schedule ran
 * (protocol-sim/coverage.ts; with --cluster the Cluster steps — MIGRATE batches, a move's end, shard probes, slot reads,
 * the slot repair's steps, a Cluster member's fold — and fault kinds too, the cuts counted against their whole
 * matrix). Exits 1 on a violation.
 */
import { parseArgs } from 'node:util';
import {
  runNemesis,
  type ClientSettings,
  type NemesisCase,
  type NemesisVariant,
} from '../test/fixtures/protocol-sim/nemesis.js';
import { F29_CHAIN } from '../test/fixtures/protocol-sim/cluster-faults.js';
import { formatCoverage } from '../test/fixtures/protocol-sim/coverage.js';
import { F27_CHAIN as F27, guidedSearch, shrink } from '../test/fixtures/protocol-sim/guided.js';
import { searchNemesis } from '../test/fixtures/protocol-sim/search.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '3' },
    seed: { type: 'string' },
    variant: { type: 'string', default: 'real' },
    replay: { type: 'string' },
    all: { type: 'boolean', default: false },
    'max-schedules': { type: 'string' },
    without: { type: 'string' },
    guided: { type: 'boolean', default: false },
    cluster: { type: 'boolean', default: false },
    f27: { type: 'boolean', default: false },
    focus: { type: 'string' },
    shrink: { type: 'string' },
    'completed-moves': { type: 'boolean', default: false },
    'shrink-runs': { type: 'string' },
  },
});
const variant = values.variant as NemesisVariant;

if (values.replay !== undefined && values.shrink !== undefined) {
  const started = performance.now();
  const shrunk = await shrink(JSON.parse(values.replay) as NemesisCase, variant, Number(values.shrink));
  console.log(
    `shrunk in ${shrunk.shrinks} steps (${shrunk.runs} runs, ${Math.round((performance.now() - started) / 1000)} s) to ` +
      `${shrunk.c.cuts.length} cuts:\n  ${shrunk.violation}\n` +
      `  replay: npm run sim -- --variant ${variant} --replay '${JSON.stringify(shrunk.c)}'`,
  );
  process.exit(0);
}

if (values.replay !== undefined) {
  const c = JSON.parse(values.replay) as NemesisCase;
  const result = await runNemesis(c, { variant, log: true });
  for (const line of result.log) console.log(line);
  console.log(
    `\n${result.grants.length} grants, ${result.commits} guarded transactions; violation: ${result.violation ?? 'none'}`,
  );
  process.exit(result.violation === null ? 0 : 1);
}

const seed = values.seed !== undefined ? Number(values.seed) : Date.now() % 2 ** 31;
const minutes = Number(values.minutes);
const without = (values.without?.split(',') ?? []) as ClientSettings[];
/** The focus: fields every case takes (as cluster-nemesis.test.ts's negative control focuses its search). */
const focus = values.focus === undefined ? undefined : (JSON.parse(values.focus) as Partial<NemesisCase>);
/** With --completed-moves, no slot move is cancelled. */
const completed = (c: NemesisCase): NemesisCase => ({
  ...c,
  cuts: c.cuts.map((cut) =>
    cut.fault.kind === 'migrate-slot' ? { ...cut, fault: { ...cut.fault, cancelAfter: 0 } } : cut,
  ),
});
const shape =
  focus === undefined && !values['completed-moves']
    ? undefined
    : (c: NemesisCase): NemesisCase => {
        const focused = { ...c, ...focus };
        return values['completed-moves'] ? completed(focused) : focused;
      };
const maxSchedules = values['max-schedules'] !== undefined ? Number(values['max-schedules']) : undefined;

/** The chain the guided search follows: F29's in cases with Cluster members, F27's otherwise. */
const CHAIN: readonly string[] = values.cluster ? F29_CHAIN : F27;

if (values.guided) {
  console.log(
    `guided nemesis search: variant ${variant}, ${minutes} min, seed ${seed}` +
      (focus !== undefined ? `, focus ${JSON.stringify(focus)}` : '') +
      (values['completed-moves'] ? ', completed moves only' : ''),
  );
  const report = await guidedSearch({
    variant,
    seed,
    cluster: values.cluster,
    ...(values.f27 ? { focus: 'f27' as const } : {}),
    budgetMs: minutes * 60_000,
    stopAtFirst: !values.all,
    without,
    ...(shape !== undefined ? { shape } : {}),
    every: 500,
    ...(values['shrink-runs'] !== undefined ? { maxShrinkRuns: Number(values['shrink-runs']) } : {}),
    ...(maxSchedules !== undefined ? { maxSchedules } : {}),
    onProgress: (r) =>
      console.log(
        `${r.schedules} schedules, ${r.grants} grants, corpus ${r.corpus}, ${r.firstReached.size} signals, ` +
          `${values.cluster ? 'F29' : 'F27'} chain piece ${r.bestProgress}/${CHAIN.length} (first at schedule ${r.bestProgressAt}), ` +
          `${Math.round(r.elapsedMs / 1000)} s`,
      ),
  });
  for (const found of report.found) {
    console.log(
      `\nVIOLATION (seed ${found.seed}, schedule ${found.schedulesNeeded}, ${Math.round(found.elapsedMs / 1000)} s; ` +
        `shrunk from ${found.original.cuts.length} cuts to ${found.shrunk.cuts.length} in ${found.shrinks} steps, ` +
        `${found.shrinkRuns} runs):\n  ${found.violation}\n` +
        `  replay: npm run sim -- --variant ${variant} --replay '${JSON.stringify(found.shrunk)}'`,
    );
  }
  console.log(
    `\n${report.schedules} schedules, ${report.grants} grants checked (G2 over every pair), corpus ${report.corpus}, ` +
      `${report.found.length} violations, ${Math.round(report.elapsedMs / 1000)} s`,
  );
  console.log(`${values.cluster ? 'F29' : 'F27'} chain pieces, first reached at schedule:`);
  for (const piece of CHAIN) console.log(`  ${piece.padEnd(22)} ${report.firstReached.get(piece) ?? '-'}`);
  if (report.bestCase !== null && report.found.length === 0) {
    console.log(
      `the first schedule to reach piece ${report.bestProgress} (${CHAIN[report.bestProgress - 1]}):\n` +
        `  npm run sim -- --variant ${variant} --replay '${JSON.stringify(report.bestCase)}'`,
    );
  }
  const pairs = [...report.firstReached.keys()].filter((k) => k.startsWith('cut:')).length;
  console.log(`distinct (step, fault) pairs struck: ${pairs}`);
  process.exit(report.found.length === 0 ? 0 : 1);
}

console.log(
  `nemesis search${values.cluster ? ' (mixed members)' : ''}: variant ${variant}, ${minutes} min, first round seed ${seed}` +
    (focus !== undefined ? `, focus ${JSON.stringify(focus)}` : '') +
    (values['completed-moves'] ? ', completed moves only' : ''),
);
const report = await searchNemesis({
  variant,
  budgetMs: minutes * 60_000,
  seed,
  stopAtFirst: !values.all,
  without,
  cluster: values.cluster,
  ...(shape !== undefined ? { shape } : {}),
  ...(maxSchedules !== undefined ? { maxSchedules } : {}),
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
  `\n${report.schedules} schedules, ${report.grants} grants checked (G2 over every pair), ${report.commits} ` +
    `guarded transactions (G3, G4, G5), ${report.found.length} violations, ${Math.round(report.elapsedMs / 1000)} s`,
);
console.log(
  `extends that reported a token below their grant's (each a violation): ${report.lowerExtendTokens}`,
);
for (const line of formatCoverage(report.detail, report.schedules, { cluster: values.cluster }))
  console.log(line);
process.exit(report.found.length === 0 ? 0 : 1);
