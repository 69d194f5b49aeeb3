import { fork, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { freePort } from '@fenced/test-utils/free-port';
import { own, waitForExit } from '@fenced/test-utils/owned-processes';
import { redisCpuSeconds, redisIoCounters } from '../environment.js';
import type { BenchPlan } from '../plan.js';
import {
  PROFILE_AREAS,
  summarizeCpuProfile,
  type CpuProfile,
  type ProfileArea,
  type ProfileWindow,
} from '../../profilers/cpu-profile-summary.js';
import type { HttpLoadRequest, HttpLoadResult } from '../http-load.js';
import type { FencedBenchOptions } from '../lock-library.js';
import { interleave, sleep, type RunState } from '../runner.js';
import { median, range } from '../statistics.js';
import type { BenchResults } from '../results.js';
import { num, table } from '../markdown.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const SERVICE_BIN = path.join(ROOT, 'packages/coordinator/src/bin/fenced-coordinator.ts');
const LOAD_SCRIPT = path.join(ROOT, 'bench/suite/http-load.ts');
const CANNED_SCRIPT = path.join(ROOT, 'bench/suite/canned-lease-server.ts');
/** How the bench runs TypeScript sources: the same flags as `npm run bench` itself. */
const NODE_FLAGS = ['--conditions=@fenced/source', '--import', 'tsx'];
/** Bounds of start-up and shutdown; every wait of the scenario has one. */
const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 15_000;

export interface HttpCell {
  /** Median over the runs of POST+DELETE cycles per second (a lease granted and released). */
  medianPerSecond: number;
  min: number;
  max: number;
  runs: number[];
  /** Median over the runs of the POST (grant) p50 and p99, in ms, as the load generator saw them. */
  grantP50Ms: number;
  grantP99Ms: number;
  errors: number;
  /** Median over the runs of the server process's CPU time per cycle (/proc/<pid>/stat utime+stime), µs. */
  serverCpuUsPerCycle: number;
  /** Median over the runs of the load generator's CPU time per cycle (its `process.cpuUsage`), µs. */
  loadCpuUsPerCycle: number;
  /** Median over the runs of the five Redis servers' CPU per cycle (INFO cpu), µs; the service only. */
  redisCpuUsPerCycle?: number;
  /**
   * Median over the runs, per node and cycle: socket reads the node processed (INFO stats `total_reads_processed`,
   * one per batch of a client's commands arriving) and commands it ran (INFO commandstats, a script's inner calls
   * included); the service only, as in scenario 1. Absent in older results.
   */
  redisReadsPerCycle?: number;
  redisCommandsPerCycle?: number;
}

/** Self time per area of the service's CPU profile, over the measured runs of one concurrency. */
export interface HttpProfileCell {
  cycles: number;
  /** Sampled non-idle time per cycle, µs (the sum of the areas but idle). */
  busyUsPerCycle: number;
  usPerCycle: Partial<Record<ProfileArea, number>>;
  /** The same with node's own time credited to the nearest caller outside node (see `summarizeCpuProfile`). */
  onBehalfUsPerCycle: Partial<Record<ProfileArea, number>>;
  topFunctions: { area: ProfileArea; name: string; usPerCycle: number }[];
}

export interface HttpProfile {
  /** Where the .cpuprofile was written, relative to the repository (not kept in it). */
  file: string;
  /**
   * Whether the samples were counted over the measured runs only ('measured runs'), or over the whole life of
   * the service, start-up and warm-up included, because the profile's clock did not match ('whole profile').
   */
  counted: 'measured runs' | 'whole profile';
  byConcurrency: Record<string, HttpProfileCell>;
}

export interface HttpResult {
  unit: 'POST+DELETE cycles per second (a lease granted and released)';
  client: string;
  service: string;
  canned: string;
  /** concurrency → the real service, the canned node:http server, and service ÷ canned of the medians */
  byConcurrency: Record<string, { service: HttpCell; canned: HttpCell; ratio: number }>;
  /** `--cpu-prof`: the measured runs were taken with the service profiled. */
  profile?: HttpProfile;
}

/** Options of the scenario beyond the plan. */
export interface HttpScenarioOptions {
  /** Start the service with `--cpu-prof` writing into this directory, and summarise the profile. */
  cpuProfDir?: string | undefined;
}

/** A server subject: the fenced service or the canned server, each its own process. */
interface Subject {
  readonly name: 'service' | 'canned';
  readonly child: ChildProcess;
  readonly port: number;
  /** The last lines the process wrote. */
  readonly tail: () => string;
}

/**
 * Scenario 6: lease grants per second through the HTTP service, against a canned `node:http` server, with the
 * load generator in its own process. Three kinds of processes on loopback: the `fenced-coordinator` command
 * started as an operator would (configured through the environment, on the bench's five Redis nodes), a raw
 * `node:http` server answering the same two routes with canned replies (bench/suite/canned-lease-server.ts), and the
 * load generator (bench/suite/http-load.ts): each worker, on its own keep-alive connection, POSTs a lease and DELETEs
 * it. Runs are interleaved (service, canned, canned, service …) after a warm-up of each.
 */
export async function runHttp(
  redisUrls: readonly string[],
  fenced: FencedBenchOptions,
  admin: readonly Redis[],
  plan: BenchPlan['http'],
  state: RunState,
  options: HttpScenarioOptions = {},
): Promise<HttpResult> {
  const children: ChildProcess[] = [];
  let service: Subject | undefined;
  let load: LoadGenerator | undefined;
  const profileWindows = new Map<string, { windows: ProfileWindow[]; cycles: number }>();
  const startedAtUs = nowUs();
  try {
    state.progress.update('http: starting the service, the canned server and the load generator');
    const starting = await Promise.allSettled([
      startService(redisUrls, fenced, options.cpuProfDir),
      startCanned(),
      startLoadGenerator(),
    ]);
    // Whatever started is stopped in the finally below, even when another one failed.
    for (const outcome of starting) if (outcome.status === 'fulfilled') children.push(outcome.value.child);
    const failed = starting.find((outcome) => outcome.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    const [started, canned, generator] = starting.map(
      (outcome) => (outcome as PromiseFulfilledResult<unknown>).value,
    ) as [Subject, Subject, LoadGenerator];
    service = started;
    load = generator;
    const subjects: Subject[] = [started, canned];
    const byConcurrency: HttpResult['byConcurrency'] = {};
    for (const concurrency of plan.concurrencies) {
      const measure = async (subject: Subject, tag: string, durationMs: number, measured: boolean) => {
        state.progress.update(`http c=${concurrency} ${subject.name} ${tag}`);
        const redisBefore = subject.name === 'service' ? await redisCpuSeconds(admin) : 0;
        const ioBefore = subject.name === 'service' ? await redisIoCounters(admin) : undefined;
        const cpuBefore = processCpuUs(subject.child.pid!);
        const windowStart = nowUs();
        const run = await generator.run({
          port: subject.port,
          concurrency,
          durationMs,
          ttlMs: plan.ttlMs,
          tag,
        });
        const windowEnd = nowUs();
        if (subject.child.exitCode !== null || subject.child.signalCode !== null) {
          throw new Error(
            `the ${subject.name === 'service' ? 'fenced service' : 'canned server'} exited during run ${tag} (${subject.child.signalCode ?? `code ${subject.child.exitCode}`}); its output:\n${subject.tail() || '(none)'}`,
          );
        }
        const serverCpuUs = processCpuUs(subject.child.pid!) - cpuBefore;
        const redisUs =
          subject.name === 'service' ? ((await redisCpuSeconds(admin)) - redisBefore) * 1e6 : Number.NaN;
        const ioAfter = ioBefore === undefined ? undefined : await redisIoCounters(admin);
        const perNodeAndCycle = (count: (io: { reads: number; commands: number }) => number): number =>
          ioBefore === undefined || ioAfter === undefined
            ? Number.NaN
            : (count(ioAfter) - count(ioBefore)) / admin.length / run.cycles;
        for (const message of run.errorMessages) state.failures.record('http', subject.name, message);
        // A run's errors beyond the distinct messages still count.
        for (let i = run.errorMessages.length; i < run.errors; i++)
          state.failures.record('http', subject.name, run.errorMessages[0] ?? 'error');
        if (measured && subject.name === 'service') {
          const entry = profileWindows.get(String(concurrency)) ?? { windows: [], cycles: 0 };
          entry.windows.push({ startUs: windowStart, endUs: windowEnd });
          entry.cycles += run.cycles;
          profileWindows.set(String(concurrency), entry);
        }
        return {
          perSecond: run.cycles / (run.elapsedMs / 1_000),
          errors: run.errors,
          p50: run.postP50Ms,
          p99: run.postP99Ms,
          serverCpuUsPerCycle: serverCpuUs / run.cycles,
          loadCpuUsPerCycle: run.cpuUs / run.cycles,
          redisCpuUsPerCycle: redisUs / run.cycles,
          redisReadsPerCycle: perNodeAndCycle((io) => io.reads),
          redisCommandsPerCycle: perNodeAndCycle((io) => io.commands),
        };
      };
      for (const subject of subjects) await measure(subject, `c${concurrency}-warmup`, plan.warmupMs, false);
      const results = await interleave(subjects, state.runs, (subject, run) =>
        measure(subject, `c${concurrency}-r${run}`, plan.durationMs, true),
      );
      const cell = (name: Subject['name']): HttpCell => {
        const runs = results.get(name)!;
        const perSecond = runs.map((r) => r.perSecond);
        const finite = (values: number[]) => median(values.filter((v) => Number.isFinite(v)));
        return {
          medianPerSecond: median(perSecond),
          ...range(perSecond),
          runs: perSecond,
          grantP50Ms: finite(runs.map((r) => r.p50)),
          grantP99Ms: finite(runs.map((r) => r.p99)),
          errors: runs.reduce((a, r) => a + r.errors, 0),
          serverCpuUsPerCycle: finite(runs.map((r) => r.serverCpuUsPerCycle)),
          loadCpuUsPerCycle: finite(runs.map((r) => r.loadCpuUsPerCycle)),
          ...(name === 'service'
            ? {
                redisCpuUsPerCycle: finite(runs.map((r) => r.redisCpuUsPerCycle)),
                redisReadsPerCycle: finite(runs.map((r) => r.redisReadsPerCycle)),
                redisCommandsPerCycle: finite(runs.map((r) => r.redisCommandsPerCycle)),
              }
            : {}),
        };
      };
      const serviceCell = cell('service');
      const cannedCell = cell('canned');
      const ratio = serviceCell.medianPerSecond / cannedCell.medianPerSecond;
      byConcurrency[String(concurrency)] = { service: serviceCell, canned: cannedCell, ratio };
      state.progress.log(
        `http c=${concurrency}: service ${Math.round(serviceCell.medianPerSecond)}/s, canned node:http ${Math.round(cannedCell.medianPerSecond)}/s = ${ratio.toFixed(2)}×; ` +
          `CPU per cycle: service ${Math.round(serviceCell.serverCpuUsPerCycle)} µs, canned ${Math.round(cannedCell.serverCpuUsPerCycle)} µs, Redis ${Math.round(serviceCell.redisCpuUsPerCycle ?? NaN)} µs`,
      );
    }
    // The profile is written when the service exits: stop it gracefully first.
    let profile: HttpProfile | undefined;
    if (options.cpuProfDir !== undefined) {
      state.progress.update('http: stopping the profiled service');
      await stopService(started.child);
      profile = await summarizeServiceProfile(
        options.cpuProfDir,
        started.child.pid!,
        startedAtUs,
        profileWindows,
      );
      state.progress.log(`http: service profile ${profile.file} (${profile.counted})`);
    }
    return {
      unit: 'POST+DELETE cycles per second (a lease granted and released)',
      client:
        'a separate node process (bench/suite/http-load.ts): node:http Agent { keepAlive: true, maxSockets: concurrency }, one request in flight per worker',
      service: `node ${NODE_FLAGS.join(' ')}${options.cpuProfDir !== undefined ? ' --cpu-prof' : ''} packages/coordinator/src/bin/fenced-coordinator.ts (FENCED_LOG_LEVEL=warn, FENCED_MAX_TTL_MS=${fenced.maxTtlMs}, FENCED_TOKEN_RETENTION_MS=${fenced.tokenRetentionMs}${fenced.nodeTimeoutMs === undefined ? '' : `, FENCED_NODE_TIMEOUT_MS=${fenced.nodeTimeoutMs}`})`,
      canned:
        'bench/suite/canned-lease-server.ts: node:http, canned 201 lease JSON / 204, body read and JSON-parsed',
      byConcurrency,
      ...(profile === undefined ? {} : { profile }),
    };
  } finally {
    load?.close();
    if (service !== undefined) await stopService(service.child);
    for (const child of children) await stopChild(child);
  }
}

/** The monotonic clock in µs: the clock V8's profiler stamps its samples with. */
function nowUs(): number {
  return Number(process.hrtime.bigint() / 1_000n);
}

let clockTicks: number | undefined;
/** utime + stime of a process (all its threads), µs, from /proc; NaN where there is no /proc. */
function processCpuUs(pid: number): number {
  try {
    clockTicks ??= Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces), from field 3 on: utime is 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) / clockTicks) * 1e6;
  } catch {
    return Number.NaN;
  }
}

/**
 * The last lines a process wrote, for the error when it fails: pino's JSON lines as their message and error
 * message, repeated lines once.
 */
function outputTail(child: ChildProcess): () => string {
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = tail + chunk.toString('utf8');
    // Keep whole lines only: drop the (cut) first one when trimming.
    if (tail.length > 16_384) {
      const cut = tail.indexOf('\n', tail.length - 16_384);
      tail = cut < 0 ? tail.slice(-16_384) : tail.slice(cut + 1);
    }
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return () => {
    const lines = tail
      .split('\n')
      .map((line) => readableLine(line.trim()))
      .filter((line, i, all) => line !== '' && line !== all[i - 1]);
    return lines.slice(-6).join('\n');
  };
}

function readableLine(line: string): string {
  if (!line.startsWith('{')) return line;
  try {
    const entry = JSON.parse(line) as { msg?: unknown; err?: { message?: unknown } };
    const message = typeof entry.msg === 'string' ? entry.msg : '';
    const error = typeof entry.err?.message === 'string' ? `: ${entry.err.message}` : '';
    return `${message}${error}`.slice(0, 1_000) || line.slice(0, 1_000);
  } catch {
    return line.slice(0, 1_000);
  }
}

/** The environment of the service: this one without any FENCED_ variable, plus the bench's configuration. */
function serviceEnvironment(
  redisUrls: readonly string[],
  fenced: FencedBenchOptions,
  port: number,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith('FENCED_') && key !== 'PORT') env[key] = value;
  }
  return {
    ...env,
    FENCED_REDIS_URLS: redisUrls.join(','),
    FENCED_HOST: '127.0.0.1',
    FENCED_PORT: String(port),
    FENCED_LOG_LEVEL: 'warn',
    FENCED_MAX_TTL_MS: String(fenced.maxTtlMs),
    FENCED_TOKEN_RETENTION_MS: String(fenced.tokenRetentionMs),
    FENCED_SHUTDOWN_GRACE_MS: '2000',
    // Within START_TIMEOUT_MS, so a service that cannot reach a quorum says so itself before the bench gives up.
    FENCED_STARTUP_TIMEOUT_MS: String(START_TIMEOUT_MS / 2),
    ...(fenced.nodeTimeoutMs === undefined ? {} : { FENCED_NODE_TIMEOUT_MS: String(fenced.nodeTimeoutMs) }),
  };
}

/**
 * Starts `fenced-coordinator` as an operator would and waits until `/readyz` answers 200. With the log level at
 * warn the service prints no 'listening' line, so the bench picks the free port itself (and tries another if
 * it was taken in between).
 * @throws Error with the service's output tail when it exits or does not become ready in time.
 */
async function startService(
  redisUrls: readonly string[],
  fenced: FencedBenchOptions,
  cpuProfDir: string | undefined,
): Promise<Subject> {
  if (cpuProfDir !== undefined) await fs.mkdir(cpuProfDir, { recursive: true });
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [
        ...NODE_FLAGS,
        ...(cpuProfDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${cpuProfDir}`]),
        SERVICE_BIN,
      ],
      { cwd: ROOT, env: serviceEnvironment(redisUrls, fenced, port), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    own(child);
    const tail = outputTail(child);
    const exited = new Promise<string>((resolve) => {
      child.once('exit', (code, signal) => resolve(`exited (${signal ?? `code ${code}`})`));
      child.once('error', (error) => resolve(`could not be started (${error.message})`));
    });
    const deadline = performance.now() + START_TIMEOUT_MS;
    let outcome = ''; // 'ready', or why not
    while (outcome === '') {
      outcome = await Promise.race([exited, readyz(port).then((ok) => (ok ? 'ready' : ''))]);
      if (outcome === '') {
        if (performance.now() > deadline) {
          outcome = `was not ready within ${START_TIMEOUT_MS / 1_000} s`;
          break;
        }
        await Promise.race([sleep(100), exited]);
      }
    }
    if (outcome === 'ready') return { name: 'service', child, port, tail };
    await stopChild(child);
    if (attempt < 3 && /EADDRINUSE/.test(tail())) continue;
    throw new Error(
      `the fenced service (${path.relative(ROOT, SERVICE_BIN)}) ${outcome} on port ${port}; its output:\n${tail() || '(none)'}`,
    );
  }
}

/** Whether GET /readyz answers 200 (false on any error), within 2 s. */
function readyz(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const request = http.get({ host: '127.0.0.1', port, path: '/readyz', agent: false }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode === 200));
      response.on('error', () => resolve(false));
    });
    request.setTimeout(2_000, () => request.destroy(new Error('timeout')));
    request.on('error', () => resolve(false));
  });
}

/** SIGTERM (the service drains and exits, writing its profile), SIGKILL if it is still there after the bound. */
async function stopService(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  await Promise.race([waitForExit(child), sleep(STOP_TIMEOUT_MS)]);
  await stopChild(child);
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGKILL');
  await Promise.race([waitForExit(child), sleep(STOP_TIMEOUT_MS)]);
}

function forkScript(script: string): { child: ChildProcess; tail: () => string } {
  const child = fork(script, [], {
    cwd: ROOT,
    execArgv: NODE_FLAGS,
    serialization: 'advanced',
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  own(child);
  return { child, tail: outputTail(child) };
}

/** Waits for the first IPC message of a forked script that `accept` takes, or fails with its output. */
async function firstMessage<T>(
  child: ChildProcess,
  tail: () => string,
  what: string,
  accept: (message: unknown) => T | undefined,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${what} did not start within ${START_TIMEOUT_MS / 1_000} s: ${tail()}`)),
      START_TIMEOUT_MS,
    );
    const onMessage = (message: unknown) => {
      const value = accept(message);
      if (value === undefined) return;
      clearTimeout(timer);
      child.off('message', onMessage);
      resolve(value);
    };
    child.on('message', onMessage);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(
        new Error(
          `${what} exited (${signal ?? `code ${code}`}) before it started: ${tail() || '(no output)'}`,
        ),
      );
    });
  });
}

async function startCanned(): Promise<Subject> {
  const { child, tail } = forkScript(CANNED_SCRIPT);
  try {
    const port = await firstMessage(child, tail, 'the canned node:http server', (m) =>
      typeof m === 'object' && m !== null && 'port' in m && typeof m.port === 'number' ? m.port : undefined,
    );
    return { name: 'canned', child, port, tail };
  } catch (error) {
    await stopChild(child);
    throw error;
  }
}

interface LoadGenerator {
  readonly child: ChildProcess;
  run(request: Omit<HttpLoadRequest, 'id'>): Promise<HttpLoadResult>;
  close(): void;
}

async function startLoadGenerator(): Promise<LoadGenerator> {
  const { child, tail } = forkScript(LOAD_SCRIPT);
  try {
    await firstMessage(child, tail, 'the load generator', (m) =>
      typeof m === 'object' && m !== null && 'ready' in m ? true : undefined,
    );
  } catch (error) {
    await stopChild(child);
    throw error;
  }
  let next = 0;
  return {
    child,
    run: (request) =>
      new Promise<HttpLoadResult>((resolve, reject) => {
        const id = ++next;
        // The generator stops on its own after durationMs; a request may take 30 s more at worst.
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`the load generator did not report run ${id} in time: ${tail()}`));
        }, request.durationMs + 45_000);
        const onMessage = (message: unknown) => {
          if (typeof message !== 'object' || message === null || !('id' in message) || message.id !== id)
            return;
          cleanup();
          resolve(message as HttpLoadResult);
        };
        const onExit = () => {
          cleanup();
          reject(new Error(`the load generator exited during run ${id}: ${tail() || '(no output)'}`));
        };
        const cleanup = () => {
          clearTimeout(timer);
          child.off('message', onMessage);
          child.off('exit', onExit);
        };
        child.on('message', onMessage);
        child.once('exit', onExit);
        child.send({ ...request, id } satisfies HttpLoadRequest);
      }),
    close: () => {
      if (child.connected) child.disconnect();
    },
  };
}

/** Reads the service's .cpuprofile and turns it into µs per cycle per area, per concurrency. */
async function summarizeServiceProfile(
  dir: string,
  pid: number,
  startedAtUs: number,
  windows: ReadonlyMap<string, { windows: ProfileWindow[]; cycles: number }>,
): Promise<HttpProfile> {
  // CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile; thread 0 is the main thread (others: the loader's).
  const name = (await fs.readdir(dir)).find((f) => f.endsWith('.cpuprofile') && f.includes(`.${pid}.0.`));
  if (name === undefined) throw new Error(`the service (pid ${pid}) wrote no .cpuprofile into ${dir}`);
  const file = path.join(dir, name);
  const profile = JSON.parse(await fs.readFile(file, 'utf8')) as CpuProfile;
  // V8 stamps samples with the monotonic clock `process.hrtime` reads; should that not hold here, the whole
  // profile (start-up and warm-up included) is counted instead, and the results say so.
  const clockMatches = profile.startTime >= startedAtUs - 1_000_000 && profile.startTime <= nowUs();
  const byConcurrency: Record<string, HttpProfileCell> = {};
  for (const [concurrency, entry] of windows) {
    const summary = summarizeCpuProfile(profile, clockMatches ? entry.windows : undefined);
    const cycles = clockMatches ? entry.cycles : [...windows.values()].reduce((a, e) => a + e.cycles, 0);
    const usPerCycle: Partial<Record<ProfileArea, number>> = {};
    const onBehalfUsPerCycle: Partial<Record<ProfileArea, number>> = {};
    for (const area of PROFILE_AREAS) {
      if (summary.selfUs[area] > 0) usPerCycle[area] = summary.selfUs[area] / cycles;
      if (summary.onBehalfUs[area] > 0) onBehalfUsPerCycle[area] = summary.onBehalfUs[area] / cycles;
    }
    byConcurrency[concurrency] = {
      cycles,
      busyUsPerCycle: summary.busyUs / cycles,
      usPerCycle,
      onBehalfUsPerCycle,
      topFunctions: summary.topFunctions.map((f) => ({
        area: f.area,
        name: f.name,
        usPerCycle: f.selfUs / cycles,
      })),
    };
  }
  return {
    file: path.relative(ROOT, file),
    counted: clockMatches ? 'measured runs' : 'whole profile',
    byConcurrency,
  };
}

/**
 * Scenario 6's tables in the report: the service as a process against a canned node:http server, load from a third
 * process; with `--cpu-prof`, where the service's CPU went.
 */
export function renderHttp(results: BenchResults): string[] {
  const http = results.results.http;
  if (http === undefined) return [];
  const library = results.results.throughput?.byConcurrency;
  const libraryAt = (c: string): string => {
    const cell = library?.[c]?.fenced;
    return cell === undefined ? 'not in this run' : num(cell.median);
  };
  // Results written before the scenario counted the nodes' reads and commands have no such column.
  const hasHttpIo = Object.values(http.byConcurrency).some(
    ({ service }) => service.redisReadsPerCycle !== undefined,
  );
  const out: string[] = [
    `### 6. Lease grants through the HTTP service, against a raw node:http server`,
    '',
    `Cycles per second (a POST that grants a lease, then the DELETE that releases it; higher is better), median of ${results.runs} interleaved runs [min–max]. ` +
      `Service: \`${http.service}\`, its own process on the five nodes. Canned: ${http.canned}, its own process. ` +
      `Load: ${http.client}. "Library" is scenario 1's in-process fenced figure at the same concurrency, from the same run.`,
    '',
    table(
      [
        'concurrency',
        'service cycles/s',
        'canned node:http cycles/s',
        'service ÷ canned',
        'service POST p50 / p99 ms',
        'canned POST p50 / p99 ms',
        'library cycles/s (scenario 1)',
      ],
      Object.entries(http.byConcurrency).map(([c, { service, canned, ratio: x }]) => [
        c,
        `${num(service.medianPerSecond)} [${num(service.min)}–${num(service.max)}]${service.errors > 0 ? ` (${service.errors} errors)` : ''}`,
        `${num(canned.medianPerSecond)} [${num(canned.min)}–${num(canned.max)}]${canned.errors > 0 ? ` (${canned.errors} errors)` : ''}`,
        `${x.toFixed(2)}×`,
        `${num(service.grantP50Ms, 3)} / ${num(service.grantP99Ms, 3)}`,
        `${num(canned.grantP50Ms, 3)} / ${num(canned.grantP99Ms, 3)}`,
        libraryAt(c),
      ]),
    ),
    '',
    `CPU time per cycle, µs (median of the runs): the server process (/proc/<pid>/stat, all its threads), the load generator (its \`process.cpuUsage\`), and the five Redis servers together (INFO cpu, service runs only)${hasHttpIo ? "; then, per node and cycle of the service, the socket reads the node processed (each one batch of a client's commands arriving) and the commands it ran (a script's inner calls included), as in scenario 1" : ''}.`,
    '',
    table(
      [
        'concurrency',
        'service process',
        'canned process',
        'load generator (service / canned runs)',
        'Redis, 5 nodes',
        ...(hasHttpIo ? ['per node: reads, commands'] : []),
      ],
      Object.entries(http.byConcurrency).map(([c, { service, canned }]) => [
        c,
        num(service.serverCpuUsPerCycle),
        num(canned.serverCpuUsPerCycle),
        `${num(service.loadCpuUsPerCycle)} / ${num(canned.loadCpuUsPerCycle)}`,
        num(service.redisCpuUsPerCycle),
        ...(hasHttpIo
          ? [`${num(service.redisReadsPerCycle, 2)} reads, ${num(service.redisCommandsPerCycle, 1)} commands`]
          : []),
      ]),
    ),
    '',
  ];
  const profile = http.profile;
  if (profile !== undefined) {
    const concurrencies = Object.keys(profile.byConcurrency);
    const areas = PROFILE_AREAS.filter(
      (area) =>
        area !== 'idle' && concurrencies.some((c) => (profile.byConcurrency[c]?.usPerCycle[area] ?? 0) > 0),
    );
    out.push(
      `Where the service's CPU goes (the run was profiled: \`node --cpu-prof\`, sampling every 1 ms, which slows the service a little): self time per area, µs per cycle, over ${profile.counted === 'measured runs' ? 'the measured runs of each concurrency' : 'the whole life of the service (start-up and warm-up included: the profile clock did not match)'}. Areas by script path: node_modules/<package>/, packages/coordinator/src/http/ and server.ts (fenced http layer), the rest of packages/coordinator/src/ (fenced coordinator); "node internals" are node: modules and native frames (sockets, HTTP parser, JSON, promises); the right-hand columns credit that time to the nearest caller outside node (a socket write ioredis asked for counts as ioredis; what nobody asked for, such as the event loop, stays node internals). A sample stands for the wall time to the next one, so on a busy machine, where the service waits for a core, "sampled, not idle" exceeds the CPU time /proc counts; read the areas as shares of it.`,
      '',
      table(
        [
          'area',
          ...concurrencies.map((c) => `self µs/cycle at c${c}`),
          ...concurrencies.map((c) => `node's time credited to its caller, c${c}`),
        ],
        [
          ...areas.map((area) => [
            area,
            ...concurrencies.map((c) => num(profile.byConcurrency[c]?.usPerCycle[area], 1)),
            ...concurrencies.map((c) => num(profile.byConcurrency[c]?.onBehalfUsPerCycle?.[area], 1)),
          ]),
          [
            '**sampled, not idle**',
            ...concurrencies.map((c) => `**${num(profile.byConcurrency[c]?.busyUsPerCycle, 1)}**`),
            ...concurrencies.map((c) => `**${num(profile.byConcurrency[c]?.busyUsPerCycle, 1)}**`),
          ],
        ],
      ),
      '',
    );
    const top = concurrencies[concurrencies.length - 1];
    const cell = top === undefined ? undefined : profile.byConcurrency[top];
    if (cell !== undefined && cell.topFunctions.length > 0) {
      out.push(
        `The most expensive functions at c${top} (self time, µs per cycle):`,
        '',
        table(
          ['function', 'area', 'µs/cycle'],
          cell.topFunctions.map((f) => [
            `\`${f.name.replaceAll('|', '\\|')}\``,
            f.area,
            num(f.usPerCycle, 1),
          ]),
        ),
        '',
      );
    }
  }
  return out;
}
