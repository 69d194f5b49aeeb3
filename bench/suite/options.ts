import { parseArgs } from 'node:util';
import { SCENARIO_NAMES, type ScenarioName } from './plan.js';
import { LIBRARY_NAMES, type LibraryName } from './lock-library.js';

export interface BenchOptions {
  quick: boolean;
  scenarios: ScenarioName[];
  runs: number;
  /** Where the JSON goes; relative to the repository root. */
  out: string;
  /** Whether docs/benchmarks.md gets the new tables (a full run of every scenario only). */
  writeDocs: boolean;
  /** A full run of every scenario and library with the standard plan (what bench/results/latest.json holds). */
  complete: boolean;
  /** `nodeTimeoutMs` of the fenced coordinator; undefined keeps its default. */
  fencedNodeTimeoutMs: number | undefined;
  /** Libraries of the library scenarios (throughput, latency, handoff, scale). */
  libraries: LibraryName[];
  /** Overrides of the scale plan, for a long run of one level (e.g. a full million). */
  scaleLevels: number[] | undefined;
  scaleCapMs: number | undefined;
  /** Skip the scale scenario's wait for fenced's fold passes (e.g. a long-capped run with a long retention). */
  skipFoldWait: boolean;
  /**
   * `--handoff-settle-ms`: how long the hand-off scenario's first holder holds the resource while its waiters start
   * waiting (the plan's 100 ms by default); the first hand-off of every round follows that much quiet, which this
   * machine takes a while to wake from (docs/benchmark-experiments.md, "The remaining gaps, decomposed").
   */
  handoffSettleMs: number | undefined;
  /**
   * `--redis-config`: settings applied with CONFIG SET on every node once started (e.g. `auto-aof-rewrite-percentage
   * 0`, to see what the nodes' own AOF rewrites cost a run); the results record them. Never the DESIGN §3 ones.
   */
  redisSettings: Record<string, string>;
  /**
   * A git revision of this repository whose @fenced/coordinator sources run as an extra library, `fenced@<ref>`,
   * beside the current one in the throughput and latency scenarios (bench/suite/baseline.ts).
   */
  baselineRef: string | undefined;
  /**
   * `--cpu-prof`: the HTTP scenario starts the service with `node --cpu-prof` writing into this directory
   * (relative to the repository root), and the results summarise the profile. Undefined: no profile.
   */
  cpuProfDir: string | undefined;
  /** The command as typed, for the report. */
  command: string;
}

export const USAGE = `Usage: npm run bench -- [options]

  --quick                    smoke run (< 60 s): tiny counts, writes bench/results/quick.tmp.json
  --scenario NAME[,NAME]     only these scenarios: ${SCENARIO_NAMES.join(', ')}
                             floor (the nodes' own limit: the same Redis writes, not a lock) joins the throughput
                             and scale scenarios selected with it as one more library; with neither of them
                             (e.g. --scenario floor alone) it runs the throughput scenario
  --runs N                   measured repetitions per cell (default 5 for the full run, 2 for --quick)
  --out FILE                 write the JSON results here instead
  --library NAME[,NAME]      only these libraries: ${LIBRARY_NAMES.join(', ')}
                             (etcd, zookeeper, postgres-lease and redis-incr are the fencing peers, bench/peers/:
                             each starts its own server; one not installed is skipped with one line)
  --scale-levels N[,N]       resource counts of the scale scenario (default 1000,100000,1000000)
  --scale-cap-s N            time cap of each scale phase, in seconds (default 30)
  --skip-fold-wait           the scale scenario does not wait for fenced's fold passes after each level
  --handoff-settle-ms N      how long the hand-off scenario's first holder holds the resource while the waiters
                             start waiting, in ms (default 100; 50 with --quick)
  --redis-config NAME=VALUE[,NAME=VALUE]
                             CONFIG SET on every node once started, recorded in the results (for an experiment,
                             e.g. auto-aof-rewrite-percentage=0); not appendonly, appendfsync, maxmemory-policy
  --baseline-ref REF         also run fenced as of git revision REF (e.g. eca9042), checked out into a temporary
                             worktree, as the library fenced@REF in the throughput and latency scenarios, and
                             its guarded store as a third variant (guarded@REF) of the guarded scenario
  --fenced-node-timeout-ms N nodeTimeoutMs of the fenced coordinator (default: the library's default)
  --cpu-prof                 the http scenario profiles the service (node --cpu-prof) and summarises where its
                             CPU goes per POST+DELETE cycle; the .cpuprofile goes to .tmp/cpu-prof/ (ignored by git)
  --cpu-prof-dir DIR         ... or to DIR (implies --cpu-prof)
  --help                     this text

A full run of every scenario writes bench/results/latest.json and the tables of docs/benchmarks.md; any other
run writes bench/results/*.tmp.json (ignored by git) and leaves the docs alone. The run fails (exit 1) only if
a library throws; it never fails on time.`;

/** @throws Error with a message for the user on bad arguments. */
export function parseBenchOptions(argv: readonly string[]): BenchOptions | 'help' {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      quick: { type: 'boolean', default: false },
      scenario: { type: 'string', multiple: true },
      runs: { type: 'string' },
      out: { type: 'string' },
      'fenced-node-timeout-ms': { type: 'string' },
      library: { type: 'string', multiple: true },
      'scale-levels': { type: 'string' },
      'scale-cap-s': { type: 'string' },
      'skip-fold-wait': { type: 'boolean', default: false },
      'handoff-settle-ms': { type: 'string' },
      'redis-config': { type: 'string', multiple: true },
      'baseline-ref': { type: 'string' },
      'cpu-prof': { type: 'boolean', default: false },
      'cpu-prof-dir': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return 'help';
  const quick = values.quick;
  const requested = (values.scenario ?? []).flatMap((s) => s.split(',')).map((s) => s.trim());
  for (const name of requested) {
    if (!(SCENARIO_NAMES as readonly string[]).includes(name)) {
      throw new Error(`unknown scenario '${name}': choose from ${SCENARIO_NAMES.join(', ')}`);
    }
  }
  const scenarios =
    requested.length === 0 ? [...SCENARIO_NAMES] : SCENARIO_NAMES.filter((n) => requested.includes(n));
  const runs = values.runs === undefined ? (quick ? 2 : 5) : positiveInteger('--runs', values.runs, 1, 100);
  const fencedNodeTimeoutMs =
    values['fenced-node-timeout-ms'] === undefined
      ? undefined
      : positiveInteger('--fenced-node-timeout-ms', values['fenced-node-timeout-ms'], 1, 60_000);
  const requestedLibraries = (values.library ?? []).flatMap((s) => s.split(',')).map((s) => s.trim());
  for (const name of requestedLibraries) {
    if (!(LIBRARY_NAMES as readonly string[]).includes(name)) {
      throw new Error(`unknown library '${name}': choose from ${LIBRARY_NAMES.join(', ')}`);
    }
  }
  const libraries =
    requestedLibraries.length === 0
      ? [...LIBRARY_NAMES]
      : LIBRARY_NAMES.filter((n) => requestedLibraries.includes(n));
  const scaleLevels = values['scale-levels']
    ?.split(',')
    .map((level) => positiveInteger('--scale-levels', level.trim(), 1, 100_000_000));
  const scaleCapMs =
    values['scale-cap-s'] === undefined
      ? undefined
      : positiveInteger('--scale-cap-s', values['scale-cap-s'], 1, 86_400) * 1_000;
  const handoffSettleMs =
    values['handoff-settle-ms'] === undefined
      ? undefined
      : positiveInteger('--handoff-settle-ms', values['handoff-settle-ms'], 1, 60_000);
  const redisSettings = parseRedisSettings((values['redis-config'] ?? []).flatMap((s) => s.split(',')));
  const baselineRef = values['baseline-ref'];
  if (baselineRef !== undefined && !/^[\w./@^~-]{1,100}$/.test(baselineRef)) {
    throw new Error(`--baseline-ref must be a git revision (branch, tag or commit), got '${baselineRef}'`);
  }
  const cpuProfDir =
    values['cpu-prof-dir'] ??
    (values['cpu-prof'] ? `.tmp/cpu-prof/${new Date().toISOString().replace(/[:.]/g, '-')}` : undefined);
  const complete =
    !quick &&
    baselineRef === undefined &&
    cpuProfDir === undefined &&
    !values['skip-fold-wait'] &&
    scenarios.length === SCENARIO_NAMES.length &&
    libraries.length === LIBRARY_NAMES.length &&
    scaleLevels === undefined &&
    scaleCapMs === undefined &&
    handoffSettleMs === undefined &&
    Object.keys(redisSettings).length === 0 &&
    fencedNodeTimeoutMs === undefined;
  const out =
    values.out ??
    (quick
      ? 'bench/results/quick.tmp.json'
      : complete
        ? 'bench/results/latest.json'
        : 'bench/results/partial.tmp.json');
  return {
    quick,
    scenarios,
    runs,
    out,
    writeDocs: complete && values.out === undefined,
    fencedNodeTimeoutMs,
    libraries,
    scaleLevels,
    scaleCapMs,
    skipFoldWait: values['skip-fold-wait'],
    handoffSettleMs,
    redisSettings,
    baselineRef,
    cpuProfDir,
    complete,
    command: ['npm run bench', ...(argv.length > 0 ? ['--', ...argv] : [])].join(' '),
  };
}

/** The settings fenced relies on (DESIGN §3): a run that changed them would not measure what fenced runs on. */
const PROTECTED_REDIS_SETTINGS = ['appendonly', 'appendfsync', 'maxmemory-policy'];

/** `NAME=VALUE` pairs of `--redis-config` as a record; errors name the option, the pair and what is allowed. */
export function parseRedisSettings(pairs: readonly string[]): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const pair of pairs.map((p) => p.trim()).filter((p) => p.length > 0)) {
    const match = /^([a-z][a-z0-9-]{0,63})=([\w.-]{1,64})$/.exec(pair);
    if (match === null) {
      throw new Error(
        `--redis-config takes NAME=VALUE pairs (a lower-case Redis setting, a value of letters, digits, '.', '-' or '_'), got '${pair}'`,
      );
    }
    const [, name, value] = match as unknown as [string, string, string];
    if (PROTECTED_REDIS_SETTINGS.includes(name)) {
      throw new Error(
        `--redis-config cannot change ${name}: the nodes run with DESIGN §3's ${PROTECTED_REDIS_SETTINGS.join(', ')}`,
      );
    }
    settings[name] = value;
  }
  return settings;
}

/** `text` as an integer from `min` to `max`, or an error naming the option, the range and what was given. */
export function positiveInteger(name: string, text: string, min: number, max: number): number {
  const value = Number(text);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${name} must be an integer from ${min} to ${max}, got '${text}'`);
  }
  return value;
}
