// `npm run bench`: every lock library against the same five Redis nodes (and Postgres), in one run. See USAGE
// in options.ts and docs/benchmarks.md. Benchmarks measure; they never fail on time, only when a library
// throws.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as prettier from 'prettier';
import { checkOutBaseline, createBaselineFenced, type BaselineCheckout } from './baseline.js';
import { machineInfo, probeFsync, sourceRevision, startBenchEnvironment, takeStalls } from './environment.js';
import { parseBenchOptions, USAGE, type BenchOptions } from './options.js';
import {
  fencedLimits,
  floorRunsThroughput,
  FULL_PLAN,
  QUICK_PLAN,
  scaleTtlFor,
  scenariosWithFloor,
  type BenchPlan,
  type FloorScenario,
  type ScenarioName,
} from './plan.js';
import type { BenchResults } from './results.js';
import { createLockLibraries, type LibraryName, type LockLibrary } from './lock-library.js';
import { createPeer } from '../peers/fencing-peers.js';
import { PEER_NAMES, type PeerName } from '../peers/peer-config.js';
import { Progress } from './progress.js';
import { chartLinks, writeCharts } from './charts.js';
import { renderMarkdown, writeDocTables } from './report.js';
import { FailureLog, type RunState } from './runner.js';
import { ClientProfiler } from '../profilers/client-profiler.js';
import { createFloorLibrary } from './scenarios/floor.js';
import { runGuarded } from './scenarios/guarded.js';
import { runHandoff } from './scenarios/handoff.js';
import { runHttp } from './scenarios/http.js';
import { runLatency } from './scenarios/latency.js';
import { runScale } from './scenarios/scale.js';
import { runThroughput } from './scenarios/throughput.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const LIBRARY_SCENARIOS: readonly ScenarioName[] = ['throughput', 'floor', 'latency', 'handoff', 'scale'];
/** Scenarios the earlier fenced of `--baseline-ref` runs in: the before/after comparisons of docs/benchmark-experiments.md. */
const BASELINE_SCENARIOS: readonly ScenarioName[] = ['throughput', 'latency'];

async function main(options: BenchOptions): Promise<number> {
  const progress = new Progress();
  const failures = new FailureLog();
  const base = options.quick ? QUICK_PLAN : FULL_PLAN;
  const plan: BenchPlan = {
    ...base,
    handoff: {
      ...base.handoff,
      ...(options.handoffSettleMs === undefined ? {} : { settleMs: options.handoffSettleMs }),
    },
    scale: {
      ...base.scale,
      ...(options.scaleLevels === undefined ? {} : { levels: options.scaleLevels }),
      ...(options.scaleCapMs === undefined
        ? {}
        : { phaseCapMs: options.scaleCapMs, ttlMs: scaleTtlFor(options.scaleCapMs, base.scale.ttlMs) }),
      ...(options.skipFoldWait ? { foldWait: 'off' as const } : {}),
    },
  };
  const state: RunState = { progress, failures, runs: options.runs };
  const startedAt = new Date();
  const machine = machineInfo();
  const revision = sourceRevision(ROOT);
  progress.log(
    `fenced bench (${options.quick ? 'quick' : 'full'}): ${options.scenarios.join(', ')}; ${options.libraries.join(', ')}; ${options.runs} runs per cell; ` +
      `${machine.cores} cores, load ${machine.loadAverageAtStart.toFixed(2)}`,
  );
  if (!options.quick && options.runs < 5)
    progress.log('note: fewer than 5 runs per cell; medians are less stable');

  let baseline: BaselineCheckout | undefined;
  if (options.baselineRef !== undefined) {
    baseline = await checkOutBaseline(ROOT, options.baselineRef);
    progress.log(
      `baseline: fenced@${baseline.ref} = commit ${baseline.commit.slice(0, 7)}, checked out in ${baseline.dir}`,
    );
  }
  const extraSettings = Object.entries(options.redisSettings).map(([name, value]) => `${name} ${value}`);
  progress.log(
    `starting 5 redis-server nodes (appendonly yes, appendfsync always, noeviction${extraSettings.map((s) => `, ${s}`).join('')}) and Postgres`,
  );
  let env: Awaited<ReturnType<typeof startBenchEnvironment>>;
  try {
    env = await startBenchEnvironment(options.redisSettings);
  } catch (error) {
    await baseline?.remove();
    throw error;
  }
  let libraries: LockLibrary[] = [];
  let floor: LockLibrary | undefined;
  const results: BenchResults['results'] = {};
  const stalls: BenchResults['redisStalls'] = {};
  let fsync: BenchResults['machine']['fsync'];
  try {
    fsync = await probeFsync(options.quick ? 50 : 200);
    progress.log(
      `redis ${env.versions.redisServer} ×5, postgres ${env.versions.postgres}; disk fdatasync p50 ${fsync.p50Ms.toFixed(2)} ms, p99 ${fsync.p99Ms.toFixed(2)} ms`,
    );
    const fencedBench = { nodeTimeoutMs: options.fencedNodeTimeoutMs, ...fencedLimits(plan) };
    if (options.scenarios.some((s) => LIBRARY_SCENARIOS.includes(s))) {
      const isPeer = (name: LibraryName): name is PeerName =>
        (PEER_NAMES as readonly string[]).includes(name);
      libraries = await createLockLibraries(
        env.redis.urls,
        fencedBench,
        options.libraries.filter((name) => !isPeer(name)),
      );
      // The fencing peers (bench/peers/): each starts its own server, or is skipped with one line.
      const postgresPid = (await env.postgres.cluster?.pid()) ?? undefined;
      for (const name of options.libraries.filter(isPeer)) {
        progress.update(`starting the ${name} peer`, true);
        try {
          const created = await createPeer(name, {
            redisUrls: env.redis.urls,
            postgresUrl: env.postgres.url,
            postgresPid,
            maxTtlMs: fencedBench.maxTtlMs,
          });
          if ('skipped' in created) progress.log(`peer ${name}: skipped, ${created.skipped}`);
          else libraries.push(created.peer);
        } catch (error) {
          // Installed but would not start: a failure of the run (exit 1), and the other libraries still run.
          failures.record('peers', name, error);
          progress.log(
            `peer ${name}: failed to start, ${error instanceof Error ? error.message : String(error)}`,
          );
        }
      }
    }
    if (baseline !== undefined && options.scenarios.some((s) => BASELINE_SCENARIOS.includes(s))) {
      // Right after the current fenced, so the rotation of the interleaved runs puts the two side by side.
      const earlier = await createBaselineFenced(baseline, env.redis.urls, fencedBench);
      const at = libraries.findIndex((l) => l.name === 'fenced');
      libraries.splice(at + 1, 0, earlier);
    }
    /** The libraries of one scenario: the earlier fenced only where it is compared. */
    const librariesOf = (scenario: ScenarioName): LockLibrary[] =>
      BASELINE_SCENARIOS.includes(scenario)
        ? libraries
        : libraries.filter((l) => l.baselineCommit === undefined);
    const withFloor = scenariosWithFloor(options.scenarios);
    if (withFloor.length > 0) {
      floor = await createFloorLibrary(env.redis.urls);
      progress.log(
        `floor: one more library of the ${withFloor.join(' and ')} scenario${withFloor.length > 1 ? 's' : ''}`,
      );
    }
    /** The libraries of a scenario the floor can join: the floor after them when the run has it join this one. */
    const withFloorIn = (scenario: FloorScenario): LockLibrary[] =>
      floor === undefined || !withFloor.includes(scenario)
        ? librariesOf(scenario)
        : [...librariesOf(scenario), floor];
    let rewrites = (await takeStalls(env.admin, 0)).rewritesTotal;
    for (const scenario of options.scenarios) {
      // The scenarios the floor joins measure it; its own entry runs the throughput scenario for `floor` alone.
      if (scenario === 'floor' && !floorRunsThroughput(options.scenarios)) continue;
      progress.log(`scenario ${scenario}`);
      try {
        switch (scenario) {
          case 'throughput':
          case 'floor': {
            const profiler = options.cpuProfDir === undefined ? undefined : new ClientProfiler();
            try {
              results.throughput = await runThroughput(
                withFloorIn('throughput'),
                env.admin,
                plan.throughput,
                state,
                profiler,
              );
            } finally {
              profiler?.close();
            }
            break;
          }
          case 'latency':
            results.latency = await runLatency(librariesOf(scenario), plan.latency, state);
            break;
          case 'handoff':
            results.handoff = await runHandoff(librariesOf(scenario), plan.handoff, state);
            break;
          case 'scale':
            results.scale = await runScale(
              // The fencing peers are not Redis libraries: the scale scenario reads the nodes' memory.
              withFloorIn(scenario).filter((l) => l.peer !== true),
              env.admin,
              plan.scale,
              state,
              // The earlier fenced of --baseline-ref is open but not measured here: its fold passes stop meanwhile.
              libraries.filter((l) => !librariesOf(scenario).includes(l) && l.peer !== true),
            );
            break;
          case 'guarded':
            results.guarded = await runGuarded(env.postgres, plan.guarded, state, baseline);
            break;
          case 'http':
            results.http = await runHttp(env.redis.urls, fencedBench, env.admin, plan.http, state, {
              cpuProfDir:
                options.cpuProfDir === undefined ? undefined : path.resolve(ROOT, options.cpuProfDir),
            });
            break;
        }
      } catch (error) {
        // A scenario that could not run at all is a failure too; the others still run.
        failures.record(scenario, 'scenario', error);
        progress.log(
          `scenario ${scenario} failed: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
      const seen = await takeStalls(env.admin, rewrites);
      rewrites = seen.rewritesTotal;
      stalls[scenario] = {
        events: seen.events,
        aofRewrites: seen.aofRewrites,
        slowCommands: seen.slowCommands,
      };
    }
  } finally {
    progress.update('stopping servers', true);
    await Promise.allSettled([...libraries, ...(floor === undefined ? [] : [floor])].map((l) => l.close()));
    await env.stop();
    if (baseline !== undefined) {
      progress.update('removing the baseline worktree', true);
      await baseline.remove();
    }
  }

  const finishedAt = new Date();
  const output: BenchResults = {
    schemaVersion: 1,
    kind: options.quick ? 'quick' : options.complete ? 'full' : 'partial',
    command: options.command,
    revision,
    ...(baseline === undefined ? {} : { baseline: { ref: baseline.ref, commit: baseline.commit } }),
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    durationSeconds: (finishedAt.getTime() - startedAt.getTime()) / 1_000,
    runs: options.runs,
    scenarios: options.scenarios,
    machine: { ...machine, loadAverageAtEnd: os.loadavg()[0]!, fsync },
    versions: {
      ...env.versions,
      libraries: Object.fromEntries(
        [...libraries, ...(floor === undefined ? [] : [floor])].map((l) => [
          l.name,
          { package: l.packageName, version: l.version },
        ]),
      ),
    },
    redisConfig: env.redisConfig,
    redisNodes: env.redis.urls.length,
    redisStalls: stalls,
    libraries: Object.fromEntries(
      [...libraries, ...(floor === undefined ? [] : [floor])].map((l) => [
        l.name,
        { configuration: l.configuration, waitStrategy: l.waitStrategy },
      ]),
    ),
    plan,
    results,
    failures: failures.list(),
  };

  const outFile = path.resolve(ROOT, options.out);
  await fs.mkdir(path.dirname(outFile), { recursive: true });
  await fs.writeFile(outFile, await formatted(outFile, JSON.stringify(output, null, 2)));
  const charts = await writeCharts(output, outFile);
  const markdown = renderMarkdown(output, chartLinks(charts, path.join(ROOT, 'docs')));
  if (options.writeDocs) {
    const doc = path.join(ROOT, 'docs', 'benchmarks.md');
    await writeDocTables(doc, markdown);
    await fs.writeFile(doc, await formatted(doc, await fs.readFile(doc, 'utf8')));
  }
  progress.done();
  process.stdout.write(`${markdown}\n`);
  progress.log(
    `wrote ${[outFile, ...charts.map((c) => c.file)].map((file) => path.relative(ROOT, file)).join(', ')}${options.writeDocs ? ' and docs/benchmarks.md' : ''} in ${output.durationSeconds.toFixed(0)} s`,
  );
  if (output.failures.length > 0) {
    progress.log(
      `FAILED: libraries threw ${output.failures.reduce((a, f) => a + f.count, 0)} times (see "failures" in the results)`,
    );
    return 1;
  }
  return 0;
}

/** Files the bench writes into the repository are kept in the repository's Prettier style. */
async function formatted(file: string, text: string): Promise<string> {
  const config = (await prettier.resolveConfig(file)) ?? {};
  return prettier.format(text, { ...config, filepath: file });
}

let options: BenchOptions | 'help';
try {
  options = parseBenchOptions(process.argv.slice(2));
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}\n`);
  process.exit(2);
}
if (options === 'help') {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}
main(options).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `\nbench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  },
);
