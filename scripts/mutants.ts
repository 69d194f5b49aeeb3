// The mutation runner: proves that the suite kills each protocol bug of the mutation table (test/mutants/).
//
//   npm run mutants                     baseline, then every mutant; writes docs/mutation-testing.md
//   npm run mutants -- --only 08        baseline of 08's tests, then mutant 08 alone (the docs are not written)
//   npm run mutants -- --list           the table, where each mutant's code and tests are now; nothing run
//   npm run mutants -- --simulation     every mutant against the simulation's tests alone (not the table's killing
//                                       tests); writes docs/mutation-simulation.md (with --only 09,22: those rows).
//
// A mutant is a list of search-and-replace edits of the exact code it breaks, found wherever that code lives now
// in its package's src/ and lua/ (scripts/mutant-edits.ts), so moving files never breaks the table. Before
// anything runs, every chosen mutant is located: a snippet that is gone or matches more than once, or a killing
// test file that is missing or ambiguous, stops the run with an error naming the mutant and the snippet. For each
// mutant: write the mutated files on the clean tree, run only the tests listed to kill it (one vitest run per
// entry, each with its -t name pattern), record killed / survived and the time, write the original content back,
// and check the tree is clean again. A test file that fails to load counts as killed but is flagged as a crash.
// Before any mutant, the same tests run on the unmutated tree and must all pass — a kill by a test that fails
// anyway proves nothing. Refuses to start on a dirty tree (a mutant is judged against committed code). Exits 1
// when a mutant survives or a killing test was skipped or the baseline fails, 2 when the table does not locate.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  applyEdits,
  type Edit,
  filesUnder,
  locateEdits,
  type LocatedEdit,
  locateTest,
  MutantTableError,
  searchedFolders,
  type Suite,
  SUITES,
} from './mutant-edits.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TABLE = path.join(ROOT, 'test/mutants/mutants.json');
const DOCS = path.join(ROOT, 'docs/mutation-testing.md');
const SIMULATION_DOCS = path.join(ROOT, 'docs/mutation-simulation.md');
/** What makes a test file one of the simulation's: it drives the protocol through test/fixtures/protocol-sim/. */
const SIMULATION_IMPORT = /from '[./]*\/fixtures\/protocol-sim\//;
/**
 * In `--simulation` mode a negative control is left out: it asserts that a search finds a *planted* bug within its
 * budget, so any change to the code under test (a mutant included) may move the search off it and fail the test
 * without anything having found the mutant.
 */
const NOT_A_NEGATIVE_CONTROL = '^(?!.*negative control)';
const OUT = path.join(ROOT, '.tmp/mutants');
/** A killing run that takes longer than this is stopped (and counted as a timeout: killed, flagged). */
const RUN_TIMEOUT_MS = 10 * 60_000;

/** A killing test as the table names it: a file name, found anywhere under test/<suite>/. */
interface TableTest {
  readonly suite: Suite;
  readonly test: string;
  /** Optional vitest -t pattern: only the tests whose full name matches run. */
  readonly name?: string;
}

/** A mutant as the table writes it. */
interface TableMutant {
  readonly id: string;
  readonly name: string;
  /** The folder under packages/ whose src/ and lua/ are searched for the edits' snippets. */
  readonly package: string;
  /** Where the code was when the mutant was written: shown in reports, never used to find the code. */
  readonly file?: string;
  readonly bug: string;
  readonly edits: readonly Edit[];
  readonly killedBy: readonly TableTest[];
}

interface KillingTest {
  /** Test file as located now, relative to the repository root. */
  readonly test: string;
  readonly name?: string;
}

/** A mutant located in the tree as it is now. */
interface Mutant {
  readonly id: string;
  /** The files its edits were found in (comma-separated). */
  readonly file: string;
  /** The table's `file`, when it names none of the files found: the code moved since the mutant was written. */
  readonly movedFrom?: string;
  readonly bug: string;
  readonly located: readonly LocatedEdit[];
  readonly killedBy: readonly KillingTest[];
}

type RunVerdict = 'killed' | 'survived' | 'not-run' | 'crashed' | 'timed-out';

interface TestRun {
  readonly entry: KillingTest;
  readonly verdict: RunVerdict;
  /** Full names of the failed tests (killed), or the load error (crashed). */
  readonly failed: readonly string[];
  readonly passed: number;
  readonly ms: number;
  readonly log: string;
}

/** The original content of the files a mutant changed right now, if any: written back on Ctrl-C as well. */
let mutatedFiles: ReadonlyMap<string, string> | undefined;

function restore(originals: ReadonlyMap<string, string>): void {
  for (const [file, text] of originals) writeFileSync(path.join(ROOT, file), text);
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (mutatedFiles !== undefined) {
      restore(mutatedFiles);
      console.error(`\nrestored ${[...mutatedFiles.keys()].join(', ')}`);
    }
    process.exit(130);
  });
}

type MutantVerdict = 'killed' | 'survived' | 'inconclusive';

interface MutantResult {
  readonly mutant: Mutant;
  readonly verdict: MutantVerdict;
  readonly runs: readonly TestRun[];
  readonly ms: number;
}

const { values } = parseArgs({
  options: {
    only: { type: 'string' },
    list: { type: 'boolean', default: false },
    simulation: { type: 'boolean', default: false },
  },
});

function isLines(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((line) => typeof line === 'string');
}

/** The table as written, each entry checked for shape (what was wrong, what was given, what is allowed). */
function loadTable(): TableMutant[] {
  const parsed = JSON.parse(readFileSync(TABLE, 'utf8')) as { mutants?: unknown };
  if (!Array.isArray(parsed.mutants)) throw new MutantTableError(`${TABLE}: no "mutants" array`);
  const mutants = parsed.mutants as TableMutant[];
  for (const [i, m] of mutants.entries()) {
    const where = `mutant ${typeof m.id === 'string' ? m.id : `#${i + 1} (no string id)`}`;
    if (typeof m.package !== 'string') {
      throw new MutantTableError(
        `${where}: "package" must be a folder name under packages/, got ${typeof m.package}`,
      );
    }
    if (!Array.isArray(m.edits) || m.edits.length === 0) {
      throw new MutantTableError(`${where}: "edits" must be a non-empty array of {find, replace}`);
    }
    for (const [j, e] of (m.edits as readonly Edit[]).entries()) {
      if (!isLines(e.find) || e.find.length === 0 || !isLines(e.replace)) {
        throw new MutantTableError(
          `${where}, edit ${j + 1}: "find" must be a non-empty array of lines and "replace" an array of lines, ` +
            `got find ${JSON.stringify(e.find)}, replace ${JSON.stringify(e.replace)}`,
        );
      }
      if (e.find.join('\n') === e.replace.join('\n')) {
        throw new MutantTableError(
          `${where}, edit ${j + 1}: "replace" is the same as "find" (it breaks nothing)`,
        );
      }
    }
    if (!Array.isArray(m.killedBy) || m.killedBy.length === 0) {
      throw new MutantTableError(`${where}: "killedBy" must be a non-empty array of {suite, test, name?}`);
    }
    for (const k of m.killedBy as readonly TableTest[]) {
      if (
        !(SUITES as readonly unknown[]).includes(k.suite) ||
        typeof k.test !== 'string' ||
        k.test.includes('/')
      ) {
        throw new MutantTableError(
          `${where}: a killing test must be {suite: ${SUITES.map((s) => `"${s}"`).join(' | ')}, test: a file name ` +
            `without folders}, got ${JSON.stringify(k)}`,
        );
      }
    }
  }
  return mutants;
}

/** Every chosen mutant located in the tree as it is now; every problem found is reported at once. */
function locate(table: readonly TableMutant[]): Mutant[] {
  const problems: string[] = [];
  const located: Mutant[] = [];
  for (const m of table) {
    try {
      const edits = locateEdits(ROOT, m.id, searchedFolders(ROOT, m.id, m.package), m.edits);
      const killedBy = m.killedBy.map((k): KillingTest => {
        const test = locateTest(ROOT, m.id, k.suite, k.test);
        return k.name === undefined ? { test } : { test, name: k.name };
      });
      const file = [...new Set(edits.map((e) => e.file))].join(', ');
      const moved = m.file !== undefined && !edits.some((e) => e.file === m.file);
      located.push({
        id: m.id,
        file,
        ...(moved ? { movedFrom: m.file } : {}),
        bug: m.bug,
        located: edits,
        killedBy,
      });
    } catch (error) {
      if (!(error instanceof MutantTableError)) throw error;
      problems.push(error.message);
    }
  }
  if (problems.length > 0) {
    throw new MutantTableError(
      `the mutation table does not locate in this tree (test/mutants/mutants.json):\n\n${problems.join('\n\n')}`,
    );
  }
  return located;
}

function git(...args: string[]): { ok: boolean; out: string } {
  const r = spawnSync('git', args, { cwd: ROOT, encoding: 'utf8' });
  return { ok: r.status === 0, out: `${r.stdout}${r.stderr}`.trim() };
}

function assertClean(when: string): void {
  const status = git('status', '--porcelain');
  if (!status.ok || status.out !== '') {
    throw new Error(`the working tree is not clean ${when}:\n${status.out}\ncommit or stash first`);
  }
}

function label(entry: KillingTest): string {
  return entry.name === undefined ? entry.test : `${entry.test} -t "${entry.name}"`;
}

interface VitestJson {
  readonly testResults?: readonly {
    readonly name: string;
    readonly status: string;
    readonly message?: string;
    readonly assertionResults: readonly { readonly fullName: string; readonly status: string }[];
  }[];
}

/** Runs one killing entry with vitest; the verdict comes from its JSON report, not from the exit code alone. */
async function runTests(entry: KillingTest, tag: string): Promise<TestRun> {
  mkdirSync(OUT, { recursive: true });
  const report = path.join(OUT, `${tag}.json`);
  const log = path.join(OUT, `${tag}.log`);
  const args = ['run', entry.test, '--reporter=json', `--outputFile=${report}`];
  if (entry.name !== undefined) args.push('-t', entry.name);
  const started = performance.now();
  const child = spawn(path.join(ROOT, 'node_modules/.bin/vitest'), args, {
    cwd: ROOT,
    env: { ...process.env, FORCE_COLOR: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGTERM');
  }, RUN_TIMEOUT_MS);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearTimeout(timer);
  writeFileSync(log, output);
  const ms = Math.round(performance.now() - started);
  if (timedOut) return { entry, verdict: 'timed-out', failed: [], passed: 0, ms, log };

  let json: VitestJson = {};
  try {
    json = JSON.parse(readFileSync(report, 'utf8')) as VitestJson;
  } catch {
    return { entry, verdict: 'crashed', failed: [`no report (exit ${code})`], passed: 0, ms, log };
  }
  const files = json.testResults ?? [];
  const assertions = files.flatMap((f) => f.assertionResults);
  const failed = assertions.filter((a) => a.status === 'failed').map((a) => a.fullName);
  const passed = assertions.filter((a) => a.status === 'passed').length;
  const loadErrors = files
    .filter((f) => f.status === 'failed' && f.assertionResults.every((a) => a.status !== 'failed'))
    .map((f) => (f.message ?? 'failed to load').split('\n')[0]!);
  if (failed.length > 0) return { entry, verdict: 'killed', failed, passed, ms, log };
  if (loadErrors.length > 0 || code !== 0) {
    return { entry, verdict: 'crashed', failed: loadErrors, passed, ms, log };
  }
  return { entry, verdict: passed > 0 ? 'survived' : 'not-run', failed: [], passed, ms, log };
}

function verdictOf(runs: readonly TestRun[], assertionsOnly = false): MutantVerdict {
  if (runs.some((r) => r.verdict === 'killed')) return 'killed';
  // A crash or a timeout is a kill for the table's own tests (written to fail on the mutant), not for the simulation's:
  // there only a failed assertion says that something found it.
  if (assertionsOnly && runs.some((r) => r.verdict === 'crashed' || r.verdict === 'timed-out')) {
    return 'inconclusive';
  }
  if (runs.some((r) => r.verdict !== 'survived' && r.verdict !== 'not-run')) return 'killed';
  if (runs.some((r) => r.verdict === 'not-run')) return 'inconclusive';
  return 'survived';
}

/**
 * The simulation's test files (those that import test/fixtures/protocol-sim/), fastest first by their size: in
 * `--simulation` mode they stand in for every mutant's killing tests, and a mutant's runs stop at the first kill.
 */
function simulationTests(): KillingTest[] {
  return filesUnder(ROOT, 'test')
    .filter((file) => file.endsWith('.test.ts'))
    .map((file) => ({ file, text: readFileSync(path.join(ROOT, file), 'utf8') }))
    .filter(({ text }) => SIMULATION_IMPORT.test(text))
    .sort((a, b) => a.text.length - b.text.length || a.file.localeCompare(b.file))
    .map(({ file }) => ({ test: file, name: NOT_A_NEGATIVE_CONTROL }));
}

async function runMutant(mutant: Mutant, stopAtFirstKill = false): Promise<MutantResult> {
  const started = performance.now();
  const files = [...new Set(mutant.located.map((e) => e.file))];
  const originals = new Map(files.map((file) => [file, readFileSync(path.join(ROOT, file), 'utf8')]));
  const mutated = applyEdits(mutant.located, originals);
  mutatedFiles = originals;
  for (const [file, text] of mutated) writeFileSync(path.join(ROOT, file), text);
  const runs: TestRun[] = [];
  try {
    for (const [i, entry] of mutant.killedBy.entries()) {
      const run = await runTests(entry, `${mutant.id}-${i}`);
      runs.push(run);
      console.log(`  ${run.verdict.padEnd(9)} ${label(entry)} (${seconds(run.ms)})`);
      for (const name of run.failed.slice(0, 3)) console.log(`            ✗ ${name}`);
      if (stopAtFirstKill && run.verdict === 'killed') break;
    }
  } finally {
    restore(originals);
    mutatedFiles = undefined;
  }
  assertClean(`after restoring mutant ${mutant.id} (${files.join(', ')})`);
  return {
    mutant,
    verdict: verdictOf(runs, stopAtFirstKill),
    runs,
    ms: Math.round(performance.now() - started),
  };
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

function uniqueEntries(mutants: readonly Mutant[]): KillingTest[] {
  const seen = new Map<string, KillingTest>();
  for (const m of mutants) for (const k of m.killedBy) seen.set(label(k), k);
  return [...seen.values()];
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

function killedByCell(result: MutantResult): string {
  return result.runs
    .map(
      (r) =>
        `${r.verdict === 'killed' ? '✗' : r.verdict === 'survived' ? '✓' : r.verdict} \`${label(r.entry)}\``,
    )
    .join('<br>');
}

function writeDocs(results: readonly MutantResult[], baselineMs: number, totalMs: number): void {
  const date = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const killed = results.filter((r) => r.verdict === 'killed').length;
  const lines = [
    '# Mutation testing',
    '',
    'A test that guards a safety property is proven by breaking the code it guards (STYLE.md, "Tests"). The',
    'mutation table, `test/mutants/mutants.json`, holds the protocol bugs this project has met or fears most, each as',
    'search-and-replace edits of the exact code it breaks, with the tests expected to kill it. `npm run mutants`',
    '(scripts/mutants.ts) applies each mutant in turn to a clean working tree, runs only its killing tests, records',
    'killed or survived and the time, writes the original files back, checks the tree is clean, and exits 1 if any',
    'mutant survives.',
    '',
    '```',
    'npm run mutants                  # baseline, every mutant, rewrites this file',
    'npm run mutants -- --only 08     # one mutant (this file is not rewritten)',
    'npm run mutants -- --list        # the table',
    '```',
    '',
    'How a run is judged:',
    '',
    '- **Baseline first.** Every killing test runs on the unmutated tree and must pass; a kill by a test that fails',
    '  anyway would prove nothing.',
    "- **Killed** means at least one test failed on an assertion (the failing tests' names are in",
    '  `.tmp/mutants/*.json`); a test file that no longer loads is counted as killed but shown as `crashed`. A killing',
    '  test that was skipped (e.g. no process-owned Redis nodes to restart) makes the mutant _inconclusive_, not',
    '  killed.',
    '- Reachability is built, not hoped for: where a mutant is reachable only through a slow network or a split of',
    '  replies, its killing test builds exactly that — scripted virtual-time schedules in the unit tests',
    '  (`test/fixtures/protocol-sim/scripted-rig.ts`), fault proxies delaying chosen nodes, registers and lease keys',
    '  written straight to the nodes, a Postgres backend seen blocked on the fence row.',
    '',
    '## The format: mutants that survive a move',
    '',
    'A mutant names the code it breaks, not where that code is, so files can move between folders (as',
    '`packages/coordinator/src` did into its wings) without touching the table:',
    '',
    '```json',
    '{',
    '  "id": "15",',
    '  "name": "min-validity-ignored",',
    '  "package": "coordinator",',
    '  "file": "packages/coordinator/src/protocol/acquire-attempt.ts",',
    '  "bug": "Only validity ≤ 0 is refused: …",',
    '  "edits": [',
    '    {',
    '      "find": ["  const validity = validityMs(…);", "  if (validity <= settings.minValidityMs) {", "…"],',
    '      "replace": ["  const validity = validityMs(…);", "  if (validity <= 0) {", "…"]',
    '    }',
    '  ],',
    '  "killedBy": [{ "suite": "unit", "test": "acquire-attempt.test.ts", "name": "optional -t pattern" }]',
    '}',
    '```',
    '',
    '- **Edits.** Each edit replaces `find` (whole lines, exactly as in the source) by `replace`. `find` is searched',
    '  for in every file under `packages/<package>/src` and `packages/<package>/lua`, wherever the file is now, and',
    '  must match **exactly once** in that whole tree; a mutant may have several edits (in one file or more), which',
    '  may not overlap. `file` is only where the code was when the mutant was written: the report shows where it',
    '  was found, and `--list` says when it moved.',
    '- **Killing tests** are file names, found anywhere under `test/<suite>/` (`unit`, `integration`, `fault`), so',
    '  tests can move into sub-folders; each must match exactly one file.',
    '- **Failing loudly.** Before the baseline runs, every chosen mutant is located. A snippet that is gone (the code',
    '  it breaks changed), a snippet that matches twice (it no longer names one place), or a test file that is',
    '  missing or ambiguous stops the run (exit 2) with the mutant, the edit and the snippet (or the matches) in the',
    '  message. Remake the edit against the new code (same bug), or add lines around it until it is unique.',
    '- **Restoring** writes the original content of each mutated file back (on Ctrl-C too), then checks that',
    '  `git status --porcelain` is empty; the run refuses to start on a dirty tree.',
    '- The locating logic (scripts/mutant-edits.ts) is tested in `test/unit/scripts/mutant-edits.test.ts`: a missing',
    '  snippet, a snippet matched twice, a test file missing or ambiguous, and a snippet still found after its file',
    '  moved to another folder; and every mutant of the table locates in the tree as it is, so `npm test` shows',
    '  a stale mutant at once.',
    '',
    '## The mutants',
    '',
    '| # | File | The bug | Expected to kill it |',
    '|---|---|---|---|',
    ...results.map(
      ({ mutant: m }) =>
        `| ${m.id} | \`${m.file}\` | ${cell(m.bug)} | ${m.killedBy.map((k) => `\`${cell(label(k))}\``).join('<br>')} |`,
    ),
    '',
    '## What the campaign showed',
    '',
    '- The hand-made campaign that started this table found four bugs that nothing in `npm test` caught (here 01 or',
    '  02, 03, 04 and 05): nothing drove an attempt with a minority of promises, a slow first or second round, or an',
    '  extend against a successor majority. Mutant 07 was caught only when the burst of concurrent retries in',
    '  `operation-id.test.ts` happened to overlap (on the run that checked it, that file passed with the mutant in',
    '  place); mutant 06 only by the unit test of the config parser. Each now has a test that builds its situation.',
    "- The protocol simulation's exhaustive F22 search (two unusual events) does **not** kill mutant 09: the real",
    '  repair reads *every* other node, so counting an empty source as a complete one only matters when a valid',
    '  source is also unreachable — three or more unusual events. `repair.test.ts` and `repair-sources.test.ts` build',
    "  that case directly. The simulation's F19 search does kill mutant 08.",
    '- When this table was started, Lua mutants (10, 12, 13, 16) were invisible to the simulation, whose nodes then',
    '  re-implemented the scripts in TypeScript. Its nodes now run the real scripts; which mutants the simulation',
    '  kills on its own is measured by `npm run mutants -- --simulation`, in',
    '  [mutation-simulation.md](mutation-simulation.md).',
    "- A weaker form of mutant 10 — dropping repair-read.lua's checks and returning an empty incarnation — is already",
    '  refused by the reply parser (`script-results.ts` wants a non-empty incarnation); the table keeps the form that',
    '  gets through it.',
    '',
    '## Last run',
    '',
    `${date}, \`npm run mutants\` on ${os.cpus().length} cores (${os.platform()}, Node ${process.version}):`,
    `**${killed} of ${results.length} killed**; baseline ${seconds(baselineMs)}, total ${seconds(totalMs)}.`,
    '',
    '| # | Result | Time | Tests (✗ = failed on the mutant, i.e. killed it) |',
    '|---|---|---|---|',
    ...results.map((r) => `| ${r.mutant.id} | ${r.verdict} | ${seconds(r.ms)} | ${killedByCell(r)} |`),
    '',
  ];
  writeFileSync(DOCS, lines.join('\n'));
  // The tables are aligned by the project's formatter, so the file passes `prettier --check`.
  spawnSync(path.join(ROOT, 'node_modules/.bin/prettier'), ['--write', DOCS], { cwd: ROOT, stdio: 'ignore' });
}

function writeSimulationDocs(
  results: readonly MutantResult[],
  tests: readonly KillingTest[],
  baselineMs: number,
  totalMs: number,
): void {
  const date = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const killed = results.filter((r) => r.verdict === 'killed').length;
  const firstKill = (r: MutantResult): string => {
    const run = r.runs.find((x) => x.verdict !== 'survived' && x.verdict !== 'not-run');
    if (run === undefined) return 'none';
    const names = run.failed.slice(0, 2).map((n) => cell(n));
    return `\`${path.posix.basename(run.entry.test)}\`${names.length > 0 ? `: ${names.join('; ')}` : ` (${run.verdict})`}`;
  };
  const commit = git('rev-parse', '--short', 'HEAD').out;
  // The rows of the page as it is (a run with --only keeps the rows it did not run), then this run's.
  const rows = new Map<string, string>();
  const before = existsSync(SIMULATION_DOCS) ? readFileSync(SIMULATION_DOCS, 'utf8') : '';
  for (const line of before.split('\n')) {
    const id = /^\| (\d+) +\|.*\| [\d-]+ [0-9a-f]+ +\|/.exec(line)?.[1];
    if (id !== undefined) rows.set(id, line);
  }
  for (const r of results) {
    rows.set(
      r.mutant.id,
      `| ${r.mutant.id} | \`${r.mutant.file}\` | ${r.verdict} | ${seconds(r.ms)} | ${date.slice(0, 10)} ${commit} | ${firstKill(r)} |`,
    );
  }
  const killedRows = [...rows.values()].filter((line) => line.split('|')[3]!.trim() === 'killed').length;
  const lines = [
    '# Mutation testing: what the simulation alone kills',
    '',
    'The mutation table ([mutation-testing.md](mutation-testing.md)) names, for each mutant, the tests written to kill',
    'it. This page asks a harder question (DESIGN §8): which mutants does the **simulation alone** kill — the test',
    'files that drive the protocol through `test/fixtures/protocol-sim/` (real Lua scripts on simulated nodes, the',
    'nemesis, the searches), with no real-node test and no test written for that mutant.',
    '',
    '```',
    'npm run mutants -- --simulation              # every mutant; rewrites this page',
    'npm run mutants -- --simulation --only 09,22 # those rows only; rewrites their rows, keeps the others',
    '```',
    '',
    "Each mutant runs the simulation's files in the order below and stops at the first that fails on it; the",
    'baseline runs them all on the unmutated tree first. Two rules keep a kill honest: the negative controls are left',
    '(they assert that a search finds a _planted_ bug within its budget, which any change may move it off), and only',
    'a failed assertion kills — a crash or a timeout makes the mutant inconclusive. Among the files, `guided.test.ts`,',
    '`nemesis.test.ts` and the seeded and exhaustive searches of `protocol-simulation.test.ts` search; the others',
    '(`acquire-attempt`, `extend`, `repair`) run scripted schedules written for a case.',
    '',
    ...tests.map((k) => `- \`${k.test}\``),
    '',
    '## The rows',
    '',
    'Each row is the last run of that mutant (`--only` rewrites its rows and keeps the others), with its date and the',
    'commit it ran on.',
    '',
    `**${killedRows} of ${rows.size} rows killed by the simulation alone.** The last run: ${date},`,
    `\`npm run mutants -- --simulation${values.only === undefined ? '' : ` --only ${values.only}`}\` on ${os.cpus().length} cores (${os.platform()}, Node ${process.version}), commit ${commit}: ${killed} of ${results.length} killed; baseline ${seconds(baselineMs)}, total ${seconds(totalMs)}.`,
    '',
    '| # | File | Result | Time | Run | First failing file: tests |',
    '|---|---|---|---|---|---|',
    ...[...rows.keys()].sort().map((id) => rows.get(id)!),
    '',
  ];
  writeFileSync(SIMULATION_DOCS, lines.join('\n'));
  spawnSync(path.join(ROOT, 'node_modules/.bin/prettier'), ['--write', SIMULATION_DOCS], {
    cwd: ROOT,
    stdio: 'ignore',
  });
}

async function main(): Promise<number> {
  const written = loadTable();
  if (values.list) {
    const table = locate(written);
    for (const m of table) {
      const moved = m.movedFrom === undefined ? '' : ` (moved from ${m.movedFrom})`;
      console.log(`${m.id}  ${m.file}${moved}\n    ${m.bug}\n    ${m.killedBy.map(label).join('\n    ')}`);
    }
    return 0;
  }
  const ids = values.only?.split(',').map((id) => id.trim());
  const picked = ids === undefined ? written : written.filter((m) => ids.includes(m.id));
  const unknown = ids?.filter((id) => !written.some((m) => m.id === id)) ?? [];
  if (picked.length === 0 || unknown.length > 0)
    throw new Error(
      `no mutant ${unknown.join(', ') || values.only}; ids: ${written.map((m) => m.id).join(', ')}`,
    );
  assertClean('before the run');
  const located = locate(picked);
  const simulation = values.simulation ? simulationTests() : undefined;
  if (simulation?.length === 0) throw new Error('no test file imports test/fixtures/protocol-sim/');
  const chosen =
    simulation === undefined ? located : located.map((m): Mutant => ({ ...m, killedBy: simulation }));
  if (simulation !== undefined) {
    console.log(`the simulation's tests, in this order:\n  ${simulation.map((k) => k.test).join('\n  ')}`);
  }
  const started = performance.now();

  console.log('baseline: the killing tests on the unmutated tree');
  const baselineStarted = performance.now();
  let baselineOk = true;
  for (const [i, entry] of uniqueEntries(chosen).entries()) {
    const run = await runTests(entry, `baseline-${i}`);
    console.log(
      `  ${run.verdict === 'survived' ? 'passed' : run.verdict} ${label(entry)} (${seconds(run.ms)})`,
    );
    if (run.verdict !== 'survived') {
      baselineOk = false;
      for (const name of run.failed) console.log(`            ✗ ${name}`);
      console.log(`            log: ${path.relative(ROOT, run.log)}`);
    }
  }
  const baselineMs = Math.round(performance.now() - baselineStarted);
  if (!baselineOk) {
    console.error('the baseline failed: fix the tests (or the environment) before judging mutants');
    return 1;
  }

  const results: MutantResult[] = [];
  for (const mutant of chosen) {
    console.log(`mutant ${mutant.id} (${mutant.file}): ${mutant.bug}`);
    const result = await runMutant(mutant, simulation !== undefined);
    results.push(result);
    console.log(`  => ${result.verdict} (${seconds(result.ms)})`);
  }
  const totalMs = Math.round(performance.now() - started);

  console.log('');
  console.log(' #  | result         | time    | file');
  console.log('----|----------------|---------|-----');
  for (const r of results) {
    console.log(
      ` ${r.mutant.id} | ${r.verdict.padEnd(14)} | ${seconds(r.ms).padStart(7)} | ${r.mutant.file}`,
    );
  }
  const bad = results.filter((r) => r.verdict !== 'killed');
  console.log(`\n${results.length - bad.length} of ${results.length} killed in ${seconds(totalMs)}`);
  if (simulation !== undefined) {
    writeSimulationDocs(results, simulation, baselineMs, totalMs);
    console.log(`wrote ${path.relative(ROOT, SIMULATION_DOCS)}`);
  } else if (values.only === undefined) {
    writeDocs(results, baselineMs, totalMs);
    console.log(`wrote ${path.relative(ROOT, DOCS)}`);
  }
  return bad.length === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(2);
  },
);
