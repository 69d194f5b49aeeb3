import type { Redis } from 'ioredis';
import { aofSizes, redisCpuSeconds, redisIoCounters } from '../environment.js';
import type { ClientProfiler, ClientProfileCell } from '../../profilers/client-profiler.js';
import type { BenchPlan } from '../plan.js';
import type { LockLibrary } from '../lock-library.js';
import { interleave, runWorkers, type RunState } from '../runner.js';
import { median, range } from '../statistics.js';
import type { BenchResults } from '../results.js';
import { num, ratio, table, type SectionView } from '../markdown.js';
import { FLOOR_NAME } from './floor.js';
import { PROFILE_AREAS } from '../../profilers/cpu-profile-summary.js';

/** Distinct resources each worker cycles through (so no two workers ever contend). */
const RESOURCES_PER_WORKER = 100;

export interface ThroughputCell {
  /** Median over the runs of completed acquire+release cycles per second. */
  median: number;
  min: number;
  max: number;
  /** Cycles per second of each run, in run order. */
  runs: number[];
  /** Cycles that threw, over all runs (each is also in the failure list). */
  errors: number;
  /**
   * Median over the runs of the CPU time one cycle cost: in this (client) process, and in the five Redis
   * servers together. On a machine with few cores, their sum is what bounds throughput.
   */
  clientCpuUsPerCycle: number;
  redisCpuUsPerCycle: number;
  /**
   * For a fencing peer with its own server (etcd, ZooKeeper, Postgres): that server's CPU per cycle, and what it
   * covers (`serverCpuOf`); `redisCpuUsPerCycle` is then the idle Redis nodes'. Absent for the Redis libraries.
   */
  serverCpuUsPerCycle?: number;
  serverCpuOf?: string;
  /** Median over the runs of the bytes one cycle appends to each node's AOF (each of them fsynced). */
  aofBytesPerCycle: number;
  /**
   * Median over the runs, per node: the socket reads a node processed per cycle (INFO stats
   * `total_reads_processed`; each is one arrival of a client's batch, so round trips), and the commands it
   * executed per cycle (INFO commandstats, a script's inner calls included). Absent in older results.
   */
  redisReadsPerCycle?: number;
  redisCommandsPerCycle?: number;
  /** `--cpu-prof`: where this process's CPU went per cycle, from a profile of the measured runs. */
  clientProfile?: ClientProfileCell;
}

export interface ThroughputResult {
  unit: 'acquire+release cycles per second';
  durationMsPerRun: number;
  /** concurrency → library → cell */
  byConcurrency: Record<string, Record<string, ThroughputCell>>;
}

/**
 * Scenario 1: uncontended acquire+release cycles on distinct resources at each concurrency. Each worker owns
 * its resources (`RESOURCES_PER_WORKER` of them, used in turn), so every acquire is granted at once.
 */
export async function runThroughput(
  libraries: readonly LockLibrary[],
  admin: readonly Redis[],
  plan: BenchPlan['throughput'],
  state: RunState,
  profiler?: ClientProfiler,
): Promise<ThroughputResult> {
  const byConcurrency: ThroughputResult['byConcurrency'] = {};
  for (const concurrency of plan.concurrencies) {
    const measure = async (library: LockLibrary, tag: string, durationMs: number) => {
      state.progress.update(`throughput c=${concurrency} ${library.name} ${tag}`);
      const redisBefore = await redisCpuSeconds(admin);
      const aofBefore = await aofSizes(admin);
      const ioBefore = await redisIoCounters(admin);
      const measured = !tag.endsWith('warmup');
      if (measured) await profiler?.begin();
      const serverBefore = library.serverCpuSeconds?.();
      const clientBefore = process.cpuUsage();
      const run = await runWorkers({
        concurrency,
        durationMs,
        onError: (error) => state.failures.record('throughput', library.name, error),
        op: async (worker, i) => {
          const held = await library.acquire(`tp:${tag}:${worker}:${i % RESOURCES_PER_WORKER}`, plan.ttlMs);
          await held.release();
        },
      });
      const client = process.cpuUsage(clientBefore);
      if (measured) await profiler?.end(`${concurrency}`, library.name, run.ops);
      const server = serverBefore === undefined ? undefined : library.serverCpuSeconds!() - serverBefore;
      const redis = (await redisCpuSeconds(admin)) - redisBefore;
      const ioAfter = await redisIoCounters(admin);
      const aofAfter = await aofSizes(admin);
      // Mean growth per node; an AOF rewrite during the run shrinks the file, and then there is no figure.
      const growth = aofAfter.map((size, i) => size - aofBefore[i]!);
      const aofBytes = growth.some((g) => !(g >= 0))
        ? Number.NaN
        : growth.reduce((a, g) => a + g, 0) / growth.length;
      return {
        perSecond: run.ops / (run.elapsedMs / 1_000),
        errors: run.errors,
        clientCpuUsPerCycle: (client.user + client.system) / run.ops,
        redisCpuUsPerCycle: (redis * 1e6) / run.ops,
        serverCpuUsPerCycle: server === undefined ? undefined : (server * 1e6) / run.ops,
        aofBytesPerCycle: aofBytes / run.ops,
        redisReadsPerCycle: (ioAfter.reads - ioBefore.reads) / admin.length / run.ops,
        redisCommandsPerCycle: (ioAfter.commands - ioBefore.commands) / admin.length / run.ops,
      };
    };
    for (const library of libraries) await measure(library, `c${concurrency}-warmup`, plan.warmupMs);
    const results = await interleave(libraries, state.runs, (library, run) =>
      measure(library, `c${concurrency}-r${run}`, plan.durationMs),
    );
    const cells: Record<string, ThroughputCell> = {};
    for (const [name, runs] of results) {
      const values = runs.map((r) => r.perSecond);
      cells[name] = {
        median: median(values),
        ...range(values),
        runs: values,
        errors: runs.reduce((a, r) => a + r.errors, 0),
        clientCpuUsPerCycle: median(runs.map((r) => r.clientCpuUsPerCycle)),
        redisCpuUsPerCycle: median(runs.map((r) => r.redisCpuUsPerCycle)),
        aofBytesPerCycle: median(runs.map((r) => r.aofBytesPerCycle).filter((b) => Number.isFinite(b))),
        redisReadsPerCycle: median(runs.map((r) => r.redisReadsPerCycle)),
        redisCommandsPerCycle: median(runs.map((r) => r.redisCommandsPerCycle)),
      };
      const serverCpu = runs.flatMap((r) =>
        r.serverCpuUsPerCycle === undefined ? [] : [r.serverCpuUsPerCycle],
      );
      const library = libraries.find((l) => l.name === name);
      if (serverCpu.length > 0 && library?.serverCpuOf !== undefined) {
        cells[name].serverCpuUsPerCycle = median(serverCpu);
        cells[name].serverCpuOf = library.serverCpuOf;
      }
    }
    byConcurrency[String(concurrency)] = cells;
    if (profiler !== undefined) {
      for (const [name, cell] of Object.entries(cells)) {
        const profile = profiler.cell(`${concurrency}`, name);
        if (profile !== undefined) cell.clientProfile = profile;
      }
    }
    state.progress.log(
      `throughput c=${concurrency}: ${Object.entries(cells)
        .map(([name, cell]) => `${name} ${Math.round(cell.median)}/s`)
        .join(', ')}`,
    );
  }
  return { unit: 'acquire+release cycles per second', durationMsPerRun: plan.durationMs, byConcurrency };
}

/**
 * Scenario 1's tables in the report: cycles per second per library and concurrency with fenced's ratios,
 * the CPU, AOF bytes and node round trips per cycle, and with `--cpu-prof` where the client's CPU went.
 */
export function renderThroughput(results: BenchResults, { columns, chart }: SectionView): string[] {
  const r = results.results;
  if (r.throughput === undefined) return [];
  const out: string[] = [];
  const byConcurrency = r.throughput.byConcurrency;
  const hasFloor = Object.values(byConcurrency).some((cells) => cells[FLOOR_NAME] !== undefined);
  const tpColumns = hasFloor ? [...columns, FLOOR_NAME] : columns;
  const tpOthers = tpColumns.filter((n) => n !== 'fenced');
  const hasIo = Object.values(byConcurrency).some((cells) =>
    Object.values(cells).some((cell) => cell.redisReadsPerCycle !== undefined),
  );
  out.push(
    `### 1. Uncontended acquire+release throughput`,
    '',
    ...chart('throughput'),
    `Cycles per second (higher is better), median of ${results.runs} runs of ${num(r.throughput.durationMsPerRun / 1_000, 1)} s [min–max]. Each worker cycles over its own 100 resources.` +
      (hasFloor
        ? ` "${FLOOR_NAME}" is not a lock: the same Redis writes per cycle with nothing else (bench/suite/scenarios/floor.ts), the nodes' limit; fenced ÷ ${FLOOR_NAME} is how close fenced comes to it.`
        : ''),
    '',
    table(
      ['concurrency', ...tpColumns, ...tpOthers.map((p) => `fenced ÷ ${p}`)],
      Object.entries(byConcurrency).map(([c, cells]) => [
        c,
        ...tpColumns.map((n) => {
          const cell = cells[n];
          if (cell === undefined) return '–';
          return `${num(cell.median)} [${num(cell.min)}–${num(cell.max)}]${cell.errors > 0 ? ` (${cell.errors} errors)` : ''}`;
        }),
        ...tpOthers.map((p) => ratio(cells.fenced?.median, cells[p]?.median)),
      ]),
    ),
    '',
    `CPU time per cycle, µs (median of the runs): this client process / the five Redis servers together (for a fencing peer with its own server, that server); and the bytes one cycle appends to each node's AOF (all of it fsynced before the reply)` +
      (hasIo
        ? `; then, per node and cycle, the socket reads the node processed (each one batch of a client's commands arriving: round trips) and the commands it ran (a script's inner calls included).`
        : '.'),
    '',
    table(
      ['concurrency', ...tpColumns],
      Object.entries(byConcurrency).map(([c, cells]) => [
        c,
        ...tpColumns.map((n) => {
          const cell = cells[n];
          if (cell === undefined) return '–';
          const io =
            cell.redisReadsPerCycle === undefined
              ? ''
              : `; ${num(cell.redisReadsPerCycle, 2)} reads, ${num(cell.redisCommandsPerCycle, 1)} commands`;
          if (cell.serverCpuUsPerCycle !== undefined) {
            // A fencing peer with its own server: that server's CPU, not the idle Redis nodes'.
            return `${num(cell.clientCpuUsPerCycle)} / ${num(cell.serverCpuUsPerCycle)} µs (${cell.serverCpuOf ?? 'its server'})`;
          }
          return `${num(cell.clientCpuUsPerCycle)} / ${num(cell.redisCpuUsPerCycle)} µs, ${num(cell.aofBytesPerCycle)} B${io}`;
        }),
      ]),
    ),
    '',
  );
  const profiled = Object.entries(byConcurrency).flatMap(([c, cells]) =>
    tpColumns.flatMap((n) => {
      const profile = cells[n]?.clientProfile;
      return profile === undefined ? [] : [{ c, n, profile }];
    }),
  );
  if (profiled.length > 0) {
    const areas = PROFILE_AREAS.filter(
      (area) =>
        area !== 'idle' && profiled.some(({ profile }) => (profile.onBehalfUsPerCycle[area] ?? 0) >= 0.5),
    );
    out.push(
      `Where this process's CPU went per cycle (\`--cpu-prof\`: the bench profiled itself during every measured run; µs of samples per cycle, medians of the runs; node's own time counted for its nearest caller, so socket writes count for ioredis; "other code" is the bench's own, and the floor's client). Profiling slows the client: read these for the "where".`,
      '',
      table(
        ['concurrency', 'library', 'sampled µs/cycle', ...areas],
        profiled.map(({ c, n, profile }) => [
          c,
          n,
          num(profile.busyUsPerCycle, 1),
          ...areas.map((area) => num(profile.onBehalfUsPerCycle[area] ?? 0, 1)),
        ]),
      ),
      '',
    );
  }
  return out;
}
