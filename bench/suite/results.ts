import type { MachineInfo, NodeStalls, ServerVersions } from './environment.js';
import type { BenchPlan, ScenarioName } from './plan.js';
import type { Failure } from './runner.js';
import type { GuardedResult } from './scenarios/guarded.js';
import type { HandoffResult } from './scenarios/handoff.js';
import type { HttpResult } from './scenarios/http.js';
import type { LatencyResult } from './scenarios/latency.js';
import type { ScaleResult } from './scenarios/scale.js';
import type { ThroughputResult } from './scenarios/throughput.js';

/** Everything one run measured, as written to bench/results/*.json. Numbers are unrounded. */
export interface BenchResults {
  schemaVersion: 1;
  kind: 'full' | 'quick' | 'partial';
  command: string;
  /** The commit measured, and the files under packages/ that were modified in the working tree at the start. */
  revision: { commit: string; modifiedPackageFiles: string[] };
  /** `--baseline-ref`: the earlier fenced measured beside the current one, as `fenced@<ref>`. */
  baseline?: { ref: string; commit: string };
  startedAt: string;
  finishedAt: string;
  durationSeconds: number;
  runs: number;
  scenarios: ScenarioName[];
  machine: MachineInfo & {
    /** fdatasync latency of the disk under the Redis data directories, measured before the scenarios. */
    fsync: { samples: number; p50Ms: number; p99Ms: number };
  };
  versions: ServerVersions & { libraries: Record<string, { package: string; version: string }> };
  /** CONFIG GET of node 0 (every node is started the same way). */
  redisConfig: Record<string, string>;
  redisNodes: number;
  /**
   * Per scenario: stalls of at least STALL_THRESHOLD_MS the nodes' latency monitors recorded (event → longest,
   * and on how many nodes), and the AOF rewrites the nodes ran.
   */
  redisStalls: Partial<Record<ScenarioName, NodeStalls>>;
  libraries: Record<string, { configuration: Readonly<Record<string, unknown>>; waitStrategy: string }>;
  plan: BenchPlan;
  results: {
    throughput?: ThroughputResult;
    latency?: LatencyResult;
    handoff?: HandoffResult;
    scale?: ScaleResult;
    guarded?: GuardedResult;
    http?: HttpResult;
  };
  failures: Failure[];
}
