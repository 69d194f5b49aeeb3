import { generateKeyPairSync, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { nowMs, type WorkerSetup } from '@fenced/test-utils/counter-worker/protocol';
import { analyseRun, type RunAnalysis } from './analysis.js';
import { CleanupStack } from './cleanup-stack.js';
import { counterResource, finalCounter, insertCounter, writeLog } from './counter-table.js';
import { DEMO_KEY_PREFIX, startDemoEnvironment, type DemoEnvironment } from './demo-environment.js';
import { renderHtmlReport } from './html-report.js';
import { ScenarioContext, ScenarioError } from './scenario-context.js';
import { selectScenarios, type Scenario } from './scenarios.js';
import { TerminalReport, createPainter } from './terminal-report.js';
import { MODES, type Mode, type RunRecord } from './run-record.js';

/** Where `npm run demo` writes its HTML report (gitignored). */
export const DEFAULT_REPORT_PATH = fileURLToPath(new URL('./out/report.html', import.meta.url));

/**
 * Coordinator settings of the demo's fenced runs. The per-node bound is generous so that a loaded machine's
 * latency never turns into votes against; no safety argument depends on it, nor on `maxTtlMs` (the cluster's
 * recorded one; a node that restarted empty is repaired without any wait).
 */
export const DEMO_COORDINATOR = Object.freeze({ nodeTimeoutMs: 2_000, maxTtlMs: 5_000 });

/** A run that has not finished after this long is stopped and reported as broken. */
const RUN_TIMEOUT_MS = 45_000;

export interface RunDemoOptions {
  /** Scenario ids (`F1`, `f3`, ...); all of them when empty or absent. */
  readonly scenarios?: readonly string[];
  /** Where to write the HTML report; `null` for none. @defaultValue {@link DEFAULT_REPORT_PATH} */
  readonly reportPath?: string | null;
  /** Receives the terminal output line by line; silent when absent. */
  readonly print?: (line: string) => void;
  /** ANSI colours in the terminal output. @defaultValue false */
  readonly colour?: boolean;
  /** Aborting stops everything the demo started, at once (Ctrl-C). */
  readonly signal?: AbortSignal;
}

export interface DemoResult {
  readonly runs: readonly RunAnalysis[];
  readonly skipped: readonly { id: string; why: string }[];
  readonly reportPath: string | null;
  /** True when every run showed what it must: the anomaly unprotected, none fenced. */
  readonly passed: boolean;
  readonly seconds: number;
  /** Anything that could not be stopped or removed at the end. */
  readonly cleanupProblems: readonly string[];
  /** What the demo started (all of it stopped or dropped by now): for checks that nothing is left behind. */
  readonly started: { readonly schema: string | null; readonly pids: readonly number[] };
}

/**
 * Runs the demo: starts Redis nodes, Postgres and two worker processes, runs each selected scenario
 * unprotected and fenced, judges every run from its recorded history, prints the timelines and writes the
 * HTML report. Stops everything it started, also on error and on abort.
 * @throws UnknownScenarioError for a bad scenario name (before anything starts)
 */
export async function runDemo(options: RunDemoOptions = {}): Promise<DemoResult> {
  const scenarios = selectScenarios(options.scenarios ?? []);
  const began = performance.now();
  const report = new TerminalReport(
    options.print ?? (() => undefined),
    createPainter(options.colour ?? false),
  );
  const cleanup = new CleanupStack();
  const onAbort = (): void => void cleanup.run();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const runs: RunAnalysis[] = [];
  const skipped: { id: string; why: string }[] = [];
  let reportPath: string | null = null;
  let cleanupProblems: string[] = [];
  const started: { schema: string | null; pids: number[] } = { schema: null, pids: [] };
  try {
    report.line('Starting Redis nodes, Postgres and two worker processes …');
    const env = await startDemoEnvironment(cleanup);
    started.schema = env.database.schema;
    started.pids.push(env.workers.A.pid, env.workers.B.pid);
    for (const node of env.redis.nodes) if (node.pid !== undefined) started.pids.push(node.pid);
    options.signal?.throwIfAborted();
    const environment = [
      `Redis: ${env.redis.description}`,
      `Postgres: ${env.database.description}`,
      `workers: A (pid ${env.workers.A.pid}, reaches Redis through fault proxies) and B (pid ${env.workers.B.pid})`,
    ];
    for (const line of environment) report.line(`   ${line}`);

    for (const scenario of scenarios) {
      const why = unavailable(scenario, env);
      if (why !== undefined) {
        skipped.push({ id: scenario.id, why });
        report.skipped(scenario, why);
        continue;
      }
      report.scenario(scenario);
      for (const mode of MODES) {
        options.signal?.throwIfAborted();
        const analysis = analyseRun(await runOnce(env, scenario, mode));
        runs.push(analysis);
        report.run(analysis);
      }
    }
    const seconds = (performance.now() - began) / 1_000;
    if (options.reportPath !== null) {
      reportPath = options.reportPath ?? DEFAULT_REPORT_PATH;
      await fs.mkdir(path.dirname(reportPath), { recursive: true });
      const html = renderHtmlReport(scenarios, runs, {
        generatedAt: new Date(),
        environment,
        skipped,
        seconds,
      });
      await fs.writeFile(reportPath, html, 'utf8');
    }
    report.summary(scenarios, runs, skipped, seconds);
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    cleanupProblems = await cleanup.run();
    for (const problem of cleanupProblems) report.line(`   clean-up: ${problem}`);
  }
  return {
    runs,
    skipped,
    reportPath,
    passed: runs.length > 0 && runs.every((r) => r.verdict.passed),
    seconds: (performance.now() - began) / 1_000,
    cleanupProblems,
    started,
  };
}

/** Why a scenario cannot run in this environment, or undefined. */
function unavailable(scenario: Scenario, env: DemoEnvironment): string | undefined {
  if (scenario.requires.includes('redis-processes') && !env.redis.owned)
    return 'needs Redis processes of its own to cut off, restart or re-clock (unset FENCED_REDIS_URLS to run it)';
  if (scenario.requires.includes('clock-shim') && !env.clock)
    return `needs the LD_PRELOAD clock shim: ${env.clockProblem ?? 'not available'}`;
  return undefined;
}

/** One scenario in one mode: fresh counter, resource and key prefix; workers set up and torn down around it. */
async function runOnce(env: DemoEnvironment, scenario: Scenario, mode: Mode): Promise<RunRecord> {
  const tag = randomBytes(3).toString('hex');
  const counter = `${scenario.id.toLowerCase()}-${mode === 'fenced' ? 'fenced' : 'plain'}-${tag}`;
  const { db, schema, url } = env.database;
  const resource = counterResource(counter);
  await insertCounter(db, resource);
  const record: RunRecord = {
    scenario: scenario.id,
    mode,
    ...(scenario.protection ? { protection: scenario.protection } : {}),
    counter,
    resource,
    ttlMs: scenario.ttlMs,
    startedAt: nowMs(),
    endedAt: nowMs(),
    ops: [],
    actions: [],
    log: [],
  };
  const keyPrefix = `${DEMO_KEY_PREFIX}${tag}`;
  // F20 compares the guard with and without signatures: both runs use the coordinator and the guard, and only
  // the fenced run signs leases (a fresh key pair per run) and verifies them.
  const signatures = scenario.protection === 'signatures';
  const signing = signatures && mode === 'fenced' ? demoSigningKey(tag) : undefined;
  // Fenced: a coordinator lease, and every read and write in a guarded transaction (or behind the counter
  // service's fencedWrites). Unprotected: plain Redlock and plain transactions, the lock is all there is.
  const guarded = signatures || mode === 'fenced';
  const setup = (redisUrls: readonly string[]): WorkerSetup => ({
    lock: guarded ? 'fenced' : 'redlock',
    redisUrls,
    keyPrefix,
    databaseUrl: url,
    schema,
    ...DEMO_COORDINATOR,
    ...(signing ? { signing } : {}),
  });
  const { A, B } = env.workers;
  const ctx = new ScenarioContext(env, record, keyPrefix, guarded);
  let timer: NodeJS.Timeout | undefined;
  try {
    // One after the other: the first coordinator initializes the run's fresh key prefix on every node, and a
    // node that already holds another worker's warm-up lease would not count as fresh.
    const ready = [
      await A.send({ cmd: 'setup', setup: setup(env.proxiesOfA.urls) }),
      await B.send({ cmd: 'setup', setup: setup(env.redis.urls) }),
    ];
    for (const [i, outcome] of ready.entries())
      if (!outcome.ok)
        throw new ScenarioError(`worker ${i === 0 ? 'A' : 'B'} could not set up: ${outcome.message}`);
    record.startedAt = nowMs();
    await Promise.race([
      scenario.run(ctx),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new ScenarioError(`the run did not finish within ${RUN_TIMEOUT_MS} ms`)),
          RUN_TIMEOUT_MS,
        );
      }),
    ]);
  } catch (error) {
    record.error = error instanceof Error ? error.message : String(error);
  } finally {
    clearTimeout(timer);
    record.endedAt = nowMs();
    // Whatever happened: nobody stays stopped, the network heals, the workers drop their connections.
    A.resume();
    B.resume();
    env.proxiesOfA.release();
    ctx.cutOff?.end('A reaches every node again');
    await Promise.all([A.send({ cmd: 'teardown' }), B.send({ cmd: 'teardown' })]).catch(() => undefined);
  }
  record.final = await finalCounter(db, resource);
  record.log = await writeLog(db, resource);
  return record;
}

/** A throw-away Ed25519 key pair for one run's signed leases (PEM: it crosses the IPC channel as JSON). */
function demoSigningKey(tag: string): NonNullable<WorkerSetup['signing']> {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    keyId: `demo-${tag}`,
    privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    publicKeyPem: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
  };
}
