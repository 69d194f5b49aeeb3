import { Gauge, type Registry } from 'prom-client';
import type { LeaseService, NodeStatusView } from './lease-service.js';

/** Options of {@link registerNodeMetrics}. */
export interface NodeMetricsOptions {
  /**
   * How old the node view may be when a scrape reads it. Older: the scrape probes every node once (a round
   * shared by concurrent scrapes) and waits for it, so a node that stopped answering shows as down. The
   * trade-off: freshness of `fenced_node_up` against one probe (six small commands) per node per interval.
   * @defaultValue 5000
   */
  maxAgeMs?: number;
}

/** Defaults of {@link NodeMetricsOptions}. */
export const DEFAULT_NODE_METRICS_OPTIONS = Object.freeze({
  maxAgeMs: 5_000,
} as const satisfies Required<NodeMetricsOptions>);

/** The names of the gauges {@link registerNodeMetrics} adds (the dashboard test reads them). */
export const NODE_METRIC_NAMES = Object.freeze([
  'fenced_node_up',
  'fenced_node_voting',
  'fenced_node_config_ok',
  'fenced_node_probe_latency_seconds',
  'fenced_node_repairing',
  'fenced_node_repair_registers_copied',
  'fenced_node_repair_registers_total',
  'fenced_voting_nodes',
  'fenced_quorum',
  'fenced_node_shard_up',
  'fenced_node_shard_slots',
  'fenced_node_shard_slots_voting',
  'fenced_node_shard_slots_under_repair',
] as const);

type NodeLabels = 'node' | 'address';

/**
 * Adds per-node gauges to `registry`, fed at scrape time from the coordinator's node view: the cached view when
 * every node was probed within `maxAgeMs`, else one probe round (the coordinator's `recentNodeStatus`). Nothing
 * runs between scrapes. A coordinator without `recentNodeStatus` is probed on every scrape.
 *
 * - `fenced_node_up{node,address}` 1 when the last probe reached the node;
 * - `fenced_node_voting{node,address}` 1 when the node may vote (reachable, safe settings, initialized, not
 *   under repair);
 * - `fenced_node_config_ok{node,address}` 1 when its persistence settings and role are as DESIGN §3 requires;
 * - `fenced_node_probe_latency_seconds{node,address}` the last probe's PING round trip (absent when unreachable);
 * - `fenced_node_repairing{node,address}` 1 while this process repairs the node (or waits for another's repair);
 * - `fenced_node_repair_registers_copied` / `_total{node,address}` the running repair's copy step;
 * - `fenced_voting_nodes` and `fenced_quorum`: the service is ready while the first is at least the second;
 * - for a Redis Cluster member (DESIGN §3c), per shard (`shard` = the master's host:port):
 *   `fenced_node_shard_up`, `fenced_node_shard_slots` (slots it serves), `fenced_node_shard_slots_voting` (of those,
 *   slots holding their incarnation key) and `fenced_node_shard_slots_under_repair` (being repaired here).
 */
export function registerNodeMetrics(
  registry: Registry,
  coordinator: Pick<LeaseService, 'nodeStatus' | 'recentNodeStatus' | 'quorum'>,
  options: NodeMetricsOptions = {},
): void {
  const maxAgeMs = options.maxAgeMs ?? DEFAULT_NODE_METRICS_OPTIONS.maxAgeMs;
  // Every gauge's collect() runs in the same scrape, concurrently: they share one read of the view. A view that
  // cannot be read leaves the node gauges empty for this scrape instead of failing the whole /metrics response.
  let reading: Promise<readonly NodeStatusView[] | undefined> | undefined;
  const view = (): Promise<readonly NodeStatusView[] | undefined> => {
    reading ??= (
      coordinator.recentNodeStatus !== undefined
        ? coordinator.recentNodeStatus(maxAgeMs)
        : coordinator.nodeStatus()
    )
      .catch(() => undefined)
      .finally(() => {
        reading = undefined;
      });
    return reading;
  };
  const registers = [registry];
  const perNode = (
    name: (typeof NODE_METRIC_NAMES)[number],
    help: string,
    value: (status: NodeStatusView) => number | undefined,
  ): void => {
    new Gauge<NodeLabels>({
      name,
      help,
      labelNames: ['node', 'address'],
      registers,
      async collect() {
        const statuses = await view();
        this.reset();
        for (const status of statuses ?? []) {
          const v = value(status);
          if (v !== undefined) this.set({ node: String(status.node), address: status.address }, v);
        }
      },
    });
  };
  const flag = (on: boolean): number => (on ? 1 : 0);
  perNode('fenced_node_up', 'Whether the last probe reached the Redis node (1) or not (0).', (s) =>
    flag(s.reachable),
  );
  perNode(
    'fenced_node_voting',
    'Whether the Redis node may vote: reachable, safe settings, initialized and not under repair.',
    (s) => flag(s.voting),
  );
  perNode(
    'fenced_node_config_ok',
    'Whether the Redis node has the required persistence settings and the master role (0 when unreachable).',
    (s) => flag(s.configOk),
  );
  perNode('fenced_node_probe_latency_seconds', "The last probe's PING round trip to the Redis node.", (s) =>
    s.reachable && s.latencyMs !== undefined ? s.latencyMs / 1_000 : undefined,
  );
  perNode(
    'fenced_node_repairing',
    'Whether this process is repairing the Redis node after it restarted empty (or waiting for another repair).',
    (s) => flag(s.repair !== undefined),
  );
  perNode(
    'fenced_node_repair_registers_copied',
    'Token registers the running repair has copied to the node so far (0 before its copy step).',
    (s) => (s.repair === undefined ? undefined : (s.repair.registersCopied ?? 0)),
  );
  perNode(
    'fenced_node_repair_registers_total',
    'Token registers the running repair copies to the node (0 until its copy step knows).',
    (s) => (s.repair === undefined ? undefined : (s.repair.registersTotal ?? 0)),
  );
  const perShard = (
    name: (typeof NODE_METRIC_NAMES)[number],
    help: string,
    value: (shard: NonNullable<NodeStatusView['shards']>[number]) => number,
  ): void => {
    new Gauge<NodeLabels | 'shard'>({
      name,
      help,
      labelNames: ['node', 'address', 'shard'],
      registers,
      async collect() {
        const statuses = await view();
        this.reset();
        for (const status of statuses ?? []) {
          for (const shard of status.shards ?? []) {
            this.set(
              { node: String(status.node), address: status.address, shard: shard.address },
              value(shard),
            );
          }
        }
      },
    });
  };
  perShard(
    'fenced_node_shard_up',
    'Whether the last probe reached this shard of a Redis Cluster member.',
    (s) => flag(s.up),
  );
  perShard(
    'fenced_node_shard_slots',
    'Hash slots this shard of a Redis Cluster member serves.',
    (s) => s.slots,
  );
  perShard(
    'fenced_node_shard_slots_voting',
    "Of this shard's slots, those holding their incarnation key (they vote); the others restarted empty.",
    (s) => s.votingSlots,
  );
  perShard(
    'fenced_node_shard_slots_under_repair',
    "Of this shard's slots, those this process is repairing after the shard restarted empty.",
    (s) => s.slotsUnderRepair,
  );
  new Gauge({
    name: 'fenced_voting_nodes',
    help: 'How many Redis nodes may vote; grants need at least fenced_quorum of them.',
    registers,
    async collect() {
      const statuses = await view();
      this.reset();
      if (statuses !== undefined) this.set(statuses.filter((s) => s.voting).length);
    },
  });
  new Gauge({
    name: 'fenced_quorum',
    help: 'Votes a decision needs: floor(nodes / 2) + 1.',
    registers,
    collect() {
      this.set(coordinator.quorum);
    },
  });
}
