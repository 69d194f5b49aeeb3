import type { Redis } from 'ioredis';
import { aofSizes, redisCpuSeconds, redisIoCounters } from '../environment.js';
import type { ClientProfiler, ClientProfileCell } from '../../profilers/client-profiler.js';
import type { BenchPlan } from '../plan.js';
import type { LockLibrary } from '../lock-library.js';
import { interleave, runWorkers, type RunState } from '../runner.js';
import { median, range } from '../statistics.js';

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
