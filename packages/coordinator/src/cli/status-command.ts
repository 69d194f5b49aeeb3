import { CLUSTER_FLAGS, CLUSTER_FLAGS_HELP, loadCliConfig } from './cli-config.js';
import { ClusterView, type ObservedNode } from './cluster-view.js';
import { ExitCode, parseCommandLine, toJson, type CommandContext } from './command-line.js';

export const STATUS_USAGE = `usage: fenced-coordinator status [--json] [cluster flags]

Probes every Redis node once and prints, per node: reachable, role, the persistence check (and which setting
is wrong), whether it votes, whether it holds its incarnation key, whether a repair runs on it, and the PING
latency; for a Redis Cluster member, each shard: up, slots voting, slots under repair. Read-only: it initializes
and repairs nothing.
Exit code 0 when a quorum of nodes votes, 1 when not, 2 for bad arguments.

  --json                       one JSON object: { quorum, nodeCount, votingNodes, quorumAvailable, nodes }
  -h, --help                   this text
${CLUSTER_FLAGS_HELP}`;

/** What `status --json` prints. */
export interface StatusReport {
  readonly quorum: number;
  readonly nodeCount: number;
  readonly votingNodes: number;
  readonly quorumAvailable: boolean;
  readonly nodes: readonly ObservedNode[];
}

/** `fenced-coordinator status`: the cluster's node view; exit code 1 when no quorum votes. */
export async function statusCommand(context: CommandContext): Promise<number> {
  const { values } = parseCommandLine(
    'status',
    context.argv,
    { ...CLUSTER_FLAGS, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    { min: 0, max: 0, names: '' },
  );
  if (values.help === true) {
    context.output.out(STATUS_USAGE);
    return ExitCode.OK;
  }
  const config = loadCliConfig('status', values, context.env);
  const view = new ClusterView(config);
  try {
    const nodes = await view.nodes();
    const votingNodes = nodes.filter((n) => n.voting).length;
    const report: StatusReport = {
      quorum: view.quorum,
      nodeCount: view.nodeCount,
      votingNodes,
      quorumAvailable: votingNodes >= view.quorum,
      nodes,
    };
    if (values.json === true) context.output.out(toJson(report));
    else for (const line of describeStatus(report)) context.output.out(line);
    return report.quorumAvailable ? ExitCode.OK : ExitCode.FAILED;
  } finally {
    await view.close();
  }
}

/** The human form of a status report: a summary line, then one block per node. */
export function describeStatus(report: StatusReport): string[] {
  const lines = [
    `${report.votingNodes} of ${report.nodeCount} nodes vote; a quorum needs ${report.quorum}: ` +
      (report.quorumAvailable ? 'quorum available' : 'NO QUORUM (leases cannot be granted)'),
  ];
  for (const node of report.nodes) {
    const facts = [
      node.reachable ? 'reachable' : 'UNREACHABLE',
      node.voting ? 'voting' : 'NOT VOTING',
      node.reachable ? (node.configOk ? 'config ok' : 'CONFIG WRONG') : 'config unknown',
    ];
    if (node.role !== undefined) facts.push(`role ${node.role}`);
    if (node.initialized !== undefined) facts.push(node.initialized ? 'initialized' : 'NOT INITIALIZED');
    if (node.repairMarker?.held === true) facts.push('REPAIR RUNNING');
    if (node.latencyMs !== undefined) facts.push(`latency ${node.latencyMs} ms`);
    lines.push(`node ${node.node}  ${node.address}  ${facts.join(', ')}`);
    for (const problem of node.problems) lines.push(`    - ${problem}`);
    for (const shard of node.shards ?? []) {
      const slots =
        shard.votingSlots === shard.slots
          ? `${shard.slots} slots voting`
          : `${shard.votingSlots} of ${shard.slots} slots voting (${shard.slots - shard.votingSlots} EMPTY)`;
      const repairing = shard.slotsUnderRepair > 0 ? `, ${shard.slotsUnderRepair} under repair` : '';
      lines.push(`    shard ${shard.address}  ${shard.up ? 'up' : 'DOWN'}, ${slots}${repairing}`);
    }
  }
  return lines;
}
