import { validateResourceName } from '@fenced/shared';
import { NodeSet, type NodeStatus } from '../nodes/node-set.js';
import { parseNodeEntry } from '../nodes/node-address.js';
import { resolveOptions } from '../options.js';
import { inspectOnQuorum } from '../protocol/inspect.js';
import { repairMarkerKey, resourceKeys } from '../keys/key-layout.js';
import { coordinatorOptionsOf, type CliConfig } from './cli-config.js';

/** One node as `status` reports it: the coordinator's node status plus what only the node itself knows. */
export interface ObservedNode extends NodeStatus {
  /** Whether the node holds its incarnation key; undefined when unreachable. */
  initialized?: boolean;
  /**
   * Whether some process holds the node's repair marker (a repair runs, in the service or elsewhere), with the
   * marker's remaining time; undefined when unreachable.
   */
  repairMarker?: { readonly held: boolean; readonly expiresInMs?: number };
}

/** One node's answer to `inspect`. */
export interface NodeLeaseView {
  readonly node: number;
  readonly address: string;
  /** `held` (with the lease's token), `free`, `not-voting` (not asked), `not-initialized`, or `error`. */
  readonly state: 'held' | 'free' | 'not-voting' | 'not-initialized' | 'error';
  readonly token?: bigint;
  readonly error?: string;
}

/** One node's answer to `settings`. */
export interface NodeSettingsView {
  readonly node: number;
  readonly address: string;
  /** `ok` (with the recorded settings, field → value), `not-initialized` (empty or under repair), `error`. */
  readonly state: 'ok' | 'not-initialized' | 'error';
  readonly settings?: Readonly<Record<string, string>>;
  readonly error?: string;
}

/**
 * A read-only view of the cluster for the operator commands. Unlike a `Coordinator` it never acts on what it
 * sees: it probes the nodes once (no fresh-cluster initialization, no repair, no background re-check or fold),
 * so `status` and `inspect` change nothing, whatever state the cluster is in (`settings set` writes only what the
 * operator asked).
 */
export class ClusterView {
  private readonly set: NodeSet;
  private readonly closing = new AbortController();
  private probes = 0;

  constructor(config: CliConfig) {
    const settings = resolveOptions(coordinatorOptionsOf(config));
    // Node errors are expected here (a node down is what the operator asks about); the probe says why.
    this.set = new NodeSet(
      config.redisUrls.map((entry, index) => parseNodeEntry(entry, index)),
      settings,
      () => undefined,
      this.closing.signal,
    );
  }

  get quorum(): number {
    return this.set.quorum;
  }

  get nodeCount(): number {
    return this.set.nodes.length;
  }

  /** Probes every node (the first time waiting up to the probe timeout for the connections). */
  async probe(): Promise<void> {
    const waitForConnection = this.probes++ === 0;
    await Promise.all(
      this.set.nodes.map((node) => node.probe(this.set.probeTimeoutMs, { waitForConnection })),
    );
  }

  /** Every node's status after a fresh probe, with its incarnation key and repair marker. */
  async nodes(): Promise<ObservedNode[]> {
    await this.probe();
    const markerKey = repairMarkerKey(this.set.settings.keyPrefix);
    return Promise.all(
      this.set.nodes.map(async (node): Promise<ObservedNode> => {
        const status: ObservedNode = this.set.statusOf(node);
        if (node.lastProbe?.reachable !== true) return status;
        status.initialized = node.lastProbe.initialized === true;
        // A Cluster member's repairs are per slot: its shards (`status.shards`) say which slots vote.
        if (node.isCluster) return status;
        try {
          const ttl = await node.call('check', this.set.probeTimeoutMs, (c) => c.pttl(markerKey));
          status.repairMarker =
            ttl === -2 ? { held: false } : ttl >= 0 ? { held: true, expiresInMs: ttl } : { held: true };
          if (status.repairMarker.held) {
            // This process repairs nothing; the marker says which state the node is really in.
            status.problems = status.problems.filter((p) => !p.includes('waiting for repair'));
            status.problems.push(
              'restarted empty: a repair is running (some process holds its repair marker)',
            );
          }
        } catch {
          // leave repairMarker undefined: unknown
        }
        return status;
      }),
    );
  }

  /** Whether a quorum holds a lease on `resource` and its token (never a lease id), and each node's view. */
  async inspect(resource: string): Promise<{ held: boolean; token?: bigint; nodes: NodeLeaseView[] }> {
    validateResourceName(resource);
    await this.probe();
    const keys = resourceKeys(this.set.settings.keyPrefix, resource, this.set.settings.keyLayout);
    const timeout = this.set.settings.nodeTimeoutMs;
    const [quorum, nodes] = await Promise.all([
      inspectOnQuorum(this.set, keys),
      Promise.all(
        this.set.nodes.map(async (node): Promise<NodeLeaseView> => {
          const base = { node: node.index, address: node.address };
          if (!this.set.isVoting(node.index)) return { ...base, state: 'not-voting' };
          try {
            const reply = await node.inspect(timeout, keys);
            if (reply.kind === 'not-initialized') return { ...base, state: 'not-initialized' };
            return {
              ...base,
              state: reply.held ? 'held' : 'free',
              ...(reply.token !== null ? { token: reply.token } : {}),
            };
          } catch (error) {
            return { ...base, state: 'error', error: error instanceof Error ? error.message : String(error) };
          }
        }),
      ),
    ]);
    return { ...quorum, nodes };
  }

  /**
   * The cluster's settings on every node (nodes/cluster-settings.ts): read (`get`), or `set` (the fields given
   * overwrite each initialized node's). A node that is unreachable or empty answers with `error` / `not-initialized`.
   */
  async settings(
    operation: 'get' | 'set',
    fields: Readonly<Record<string, string>> = {},
  ): Promise<NodeSettingsView[]> {
    await this.probe();
    return Promise.all(
      this.set.nodes.map(async (node): Promise<NodeSettingsView> => {
        const base = { node: node.index, address: node.address };
        try {
          const reply = await node.settings(this.set.probeTimeoutMs, operation, fields);
          if (reply.kind === 'not-initialized') return { ...base, state: 'not-initialized' };
          return { ...base, state: 'ok', settings: reply.settings };
        } catch (error) {
          return { ...base, state: 'error', error: error instanceof Error ? error.message : String(error) };
        }
      }),
    );
  }

  /** Closes the connections. */
  async close(): Promise<void> {
    this.closing.abort();
    await this.set.close();
  }
}
