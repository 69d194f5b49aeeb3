import { Coordinator } from '../coordinator.js';
import type { NodeStatus } from '../nodes/node-set.js';
import { nodeEntryAddress } from '../nodes/node-address.js';
import {
  CLUSTER_FLAGS,
  CLUSTER_FLAGS_HELP,
  coordinatorOptionsOf,
  loadCliConfig,
  type CliConfig,
} from './cli-config.js';
import { ClusterView, type ObservedNode } from './cluster-view.js';
import {
  ExitCode,
  parseCommandLine,
  toJson,
  type CommandContext,
  type CommandOutput,
} from './command-line.js';
import { ProgressEstimate } from './progress-estimate.js';
import { UsageError } from './usage-error.js';

export const REPAIR_USAGE = `usage: fenced-coordinator repair <node> [--watch] [--timeout-ms <ms>] [--json] [cluster flags]

Repairs a Redis node that restarted empty (DESIGN §3): seals and reads N - quorum + 1 of the other nodes, copies
their token registers, floor, live leases and settings, then lets the node vote again, with no wait. Prints a
line for each step, and every few seconds while a step lasts: registers copied of the total, with the time left
estimated from the rate so far, or how long the step has taken. A repair another process runs (the service
starts one on its own) is joined, not
duplicated. <node> is a node index (0-based, in FENCED_REDIS_URLS order) or its host:port. Ctrl-C stops a
repair this command runs; any coordinator (the service) takes it over once its marker expires (15 s).
Exit code 0 once the node votes (or when it had nothing to repair), 1 when the repair failed or timed out,
2 for bad arguments.

  --watch                      only watch: start nothing, print the node's repair state until it votes again
                               (registers copied are visible only to the repairing process: the service's
                               fenced_node_repair_registers_copied gauge)
  --timeout-ms <ms>            give up after this long (default: wait as long as it takes)
  --json                       one JSON object per line: {"event":"progress",...} ..., then {"event":"done",...}
  -h, --help                   this text
${CLUSTER_FLAGS_HELP}`;

const POLL_MS = 250;

/** `fenced-coordinator repair <node>`. */
export async function repairCommand(context: CommandContext): Promise<number> {
  const { values, positionals } = parseCommandLine(
    'repair',
    context.argv,
    {
      ...CLUSTER_FLAGS,
      watch: { type: 'boolean' },
      'timeout-ms': { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    { min: 0, max: 1, names: 'one <node>' },
  );
  if (values.help === true) {
    context.output.out(REPAIR_USAGE);
    return ExitCode.OK;
  }
  const nodeArgument = positionals[0];
  if (nodeArgument === undefined) {
    throw new UsageError('repair needs a <node>: its index (0-based) or host:port, got none', 'repair');
  }
  const timeoutText = values['timeout-ms'];
  if (timeoutText !== undefined && !/^[1-9][0-9]{0,9}$/.test(timeoutText)) {
    throw new UsageError(
      `--timeout-ms must be a positive integer (ms), got ${JSON.stringify(timeoutText)}`,
      'repair',
    );
  }
  const deadline = timeoutText === undefined ? Infinity : performance.now() + Number(timeoutText);
  const config = loadCliConfig('repair', values, context.env);
  const index = nodeIndexOf(nodeArgument, config);
  const report = new ProgressReport(context.output, values.json === true, index);
  return values.watch === true
    ? watchRepair(config, index, deadline, report)
    : runRepair(config, index, deadline, report);
}

/** Starts (or joins) the repair in this process and reports its steps until it ends. */
async function runRepair(
  config: CliConfig,
  index: number,
  deadline: number,
  report: ProgressReport,
): Promise<number> {
  const coordinator = new Coordinator(coordinatorOptionsOf(config));
  coordinator.on('nodeError', () => undefined); // reported through the node's status and the repair's outcome
  // Every step, as it happens (a poll would miss them: a repair takes milliseconds), from before the first probe:
  // the probe that finds the node empty starts its repair at once.
  coordinator.on('repairProgress', (event) => {
    if (event.node === index) report.progress({ ...event.repair });
  });
  try {
    const before = (await coordinator.nodeStatus())[index]!;
    if (!before.reachable) {
      report.failed(
        `cannot repair node ${index} (${before.address}): ${before.problems.join('; ') || 'unreachable'}`,
      );
      return ExitCode.FAILED;
    }
    if (before.voting) {
      report.done(before, `node ${index} (${before.address}) votes: nothing to repair`);
      return ExitCode.OK;
    }
    if (!before.configOk && !config.unsafeAllowUnsafeNodes) {
      report.failed(
        `node ${index} (${before.address}) does not vote because of its settings, which a repair does not change: ${before.problems.join('; ')}`,
      );
      return ExitCode.FAILED;
    }
    const running = coordinator.cachedNodeStatus()[index]?.repair;
    if (running !== undefined) report.progress({ ...running });
    let outcome: { error: unknown } | undefined;
    const repair = coordinator.repairNode(index).then(
      () => {
        outcome = { error: undefined };
      },
      (error: unknown) => {
        outcome = { error };
      },
    );
    // Ctrl-C (or SIGTERM) stops the repair in order: close() below aborts it and waits for it to stop.
    let interrupted: NodeJS.Signals | undefined;
    const onSignal = (signal: NodeJS.Signals): void => {
      interrupted = signal;
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      while (outcome === undefined) {
        const stopped =
          interrupted !== undefined
            ? `${interrupted} received`
            : performance.now() > deadline
              ? 'timed out'
              : undefined;
        if (stopped !== undefined) {
          report.failed(
            `${stopped}; the repair stops with this command (another coordinator, e.g. the service, takes over once its marker expires)`,
          );
          return ExitCode.FAILED;
        }
        await Promise.race([repair, new Promise((resolve) => setTimeout(resolve, POLL_MS))]);
        report.tick();
      }
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
    if (outcome.error !== undefined) {
      report.failed(`the repair failed: ${messageOf(outcome.error)}`);
      return ExitCode.FAILED;
    }
    const after = (await coordinator.nodeStatus())[index]!;
    report.done(
      after,
      `node ${index} (${after.address}) repaired: ${after.voting ? 'it votes again' : `it does not vote: ${after.problems.join('; ')}`}`,
    );
    return after.voting ? ExitCode.OK : ExitCode.FAILED;
  } finally {
    await coordinator.close();
  }
}

/** Watches the node (read-only) until it holds its incarnation key and no repair marker. */
async function watchRepair(
  config: CliConfig,
  index: number,
  deadline: number,
  report: ProgressReport,
): Promise<number> {
  const view = new ClusterView(config);
  try {
    for (;;) {
      const node = (await view.nodes())[index]!;
      if (node.reachable && node.initialized === true && node.repairMarker?.held === false) {
        report.done(
          node,
          `node ${index} (${node.address}) holds its incarnation key and no repair runs: ${node.voting ? 'it votes' : `it does not vote: ${node.problems.join('; ')}`}`,
        );
        return node.voting ? ExitCode.OK : ExitCode.FAILED;
      }
      report.progress({ state: watchState(node), detail: node.problems.join('; ') });
      if (performance.now() > deadline) {
        report.failed('timed out before the node was repaired');
        return ExitCode.FAILED;
      }
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      report.tick();
    }
  } finally {
    await view.close();
  }
}

function watchState(node: ObservedNode): string {
  if (!node.reachable) return 'unreachable';
  if (node.repairMarker?.held === true) return 'repair-running';
  if (node.initialized === false) return 'empty-no-repair-running';
  return 'unknown';
}

/** `<node>` as an index: a 0-based index below the node count, or the host:port of one of the URLs. */
export function nodeIndexOf(argument: string, config: CliConfig): number {
  const count = config.redisUrls.length;
  if (/^[0-9]+$/.test(argument)) {
    const index = Number(argument);
    if (index < count) return index;
    throw new UsageError(
      `<node> index must be from 0 to ${count - 1} (${count} nodes), got ${argument}`,
      'repair',
    );
  }
  const addresses = config.redisUrls.map(nodeEntryAddress);
  const index = addresses.indexOf(argument);
  if (index >= 0) return index;
  throw new UsageError(
    `<node> must be a node index (0 to ${count - 1}) or one of ${addresses.join(', ')}, got ${JSON.stringify(argument.slice(0, 80))}`,
    'repair',
  );
}

/**
 * Prints each new step: for people, a line per phase and a periodic line while a phase lasts (registers copied of
 * the total and the time left, or the time spent; see ProgressEstimate); for machines, a JSON object per step,
 * with `elapsedMs` and, once it can be estimated, `etaMs`.
 */
class ProgressReport {
  private last = '';
  private readonly estimate = new ProgressEstimate({ now: () => performance.now() });

  constructor(
    private readonly output: CommandOutput,
    private readonly json: boolean,
    private readonly node: number,
  ) {}

  progress(step: { detail: string } & Record<string, unknown>): void {
    const key = toJson(step);
    if (key === this.last) return;
    this.last = key;
    const line = this.estimate.step({
      phase: String(step.phase ?? step.state),
      detail: step.detail || String(step.phase ?? step.state),
      ...(typeof step.registersCopied === 'number' ? { done: step.registersCopied } : {}),
      ...(typeof step.registersTotal === 'number' ? { total: step.registersTotal } : {}),
    });
    if (this.json) {
      this.output.out(toJson({ event: 'progress', node: this.node, ...step, ...this.estimate.current() }));
    } else if (line !== undefined) this.print(line.text);
  }

  /** Time passed: the periodic line of a phase that lasts (people only; machines get every step). */
  tick(): void {
    if (this.json) return;
    const line = this.estimate.tick();
    if (line !== undefined) this.print(line.text);
  }

  private print(text: string): void {
    this.output.out(`${new Date().toISOString()}  node ${this.node}: ${text}`);
  }

  done(status: NodeStatus, message: string): void {
    if (this.json) this.output.out(toJson({ event: 'done', node: this.node, message, status }));
    else this.output.out(`${new Date().toISOString()}  ${message}`);
  }

  failed(message: string): void {
    if (this.json) this.output.out(toJson({ event: 'failed', node: this.node, message }));
    else this.output.err(`fenced-coordinator repair: ${message}`);
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : typeof error === 'string' ? error : 'unknown error';
}
