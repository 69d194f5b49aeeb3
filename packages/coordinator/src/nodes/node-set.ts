/**
 * The N Redis masters and what this process knows about them: which are reachable, configured safely,
 * initialized, and being repaired — hence which may vote (DESIGN §3, "node requirements" and "a node that
 * restarted empty").
 *
 * Safety argument:
 * - A node votes only when its last probe passed the start-up checks (or they were waived) and it is known to
 *   hold its incarnation key. The scripts check the incarnation key themselves on every vote, so a stale
 *   "voting" view here can only ask a node that then abstains — it can never count an empty node's vote.
 * - A node without its incarnation key has lost its state (or was never initialized). It is initialized fresh
 *   only when *no* node of the set is initialized, and then only through the mark-check-initialize steps of
 *   nodes/fresh-cluster.ts (one look at every node is no proof: a node can vote and restart empty meanwhile).
 *   Otherwise it is repaired (nodes/repair.ts), never initialized in place: a grant may be in flight that counted
 *   its lost promise.
 *
 * Tests that fail when this breaks: test/fault/amnesia.test.ts (F19, F22), test/fault/restarts.test.ts (F6, F7),
 * test/integration/coordinator/lease/lifecycle.test.ts, test/unit/coordinator/nodes/fresh-cluster.test.ts,
 * test/integration/coordinator/nodes/node-set.test.ts (fresh start, an unreachable quorum named, the settings read again).
 *
 * Over 400 lines: membership, start-up checks, the background re-check and fold timers, and the status views
 * (probed, recent, cached) all read the same per-node facts; fresh initialization (nodes/fresh-cluster.ts), the
 * fold pass (nodes/fold.ts) and the repair (nodes/repair.ts) live apart.
 */
import type { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { InvalidRequestError, QuorumUnavailableError } from '@fenced/shared';
import { NodeTimeoutError, type UnsafeNode } from '../errors.js';
import { MAX_TIMER_MS, type CoordinatorSettings } from '../options.js';
import type { ProtocolClock, ProtocolContext } from './protocol-node.js';
import { quorumOf, type NodeReply } from '../quorum/quorum.js';
import { monotonicNow } from '../quorum/validity.js';
import { NodeConnection, type NodeErrorSink, type ShardStatus } from './node-connection.js';
import { ClusterMember } from './cluster/cluster-member.js';
import { isClusterClient, isClusterConfig } from './cluster/cluster-client.js';
import { foldIdleRegisters, foldIntervalMs } from './fold.js';
import { initializeFreshCluster, type FreshInitOutcome } from './fresh-cluster.js';
import {
  parseRecorded,
  reconcileSettings,
  settingModes,
  settingsRecord,
  type RecordedSettings,
} from './cluster-settings.js';
import { repairEmptySlots } from './cluster/slot-repair.js';
import { repairNode, type RepairContext, type RepairNode, type RepairProgress } from './repair.js';
import { NodeStateTracker, type NodeStateEvent } from './node-events.js';
import { CLUSTER_ENTRY_PREFIX, redisUrlProblem } from './node-address.js';

/** One entry of `nodeStatus()`, for `/readyz`. */
export interface NodeStatus {
  node: number;
  /** host:port, never credentials. */
  address: string;
  reachable: boolean;
  role?: string;
  /** appendonly yes, appendfsync always, maxmemory-policy noeviction, role master. */
  configOk: boolean;
  /** Which setting is wrong, or why the node does not vote. */
  problems: string[];
  /** False while unreachable, misconfigured, or restarted empty and not yet repaired. */
  voting: boolean;
  latencyMs?: number;
  /** Present while this process repairs the node (or waits for another process's repair of it). */
  repair?: NodeRepairStatus;
  /** A Redis Cluster member's shards (DESIGN §3c): up, slots voting, slots under repair. */
  shards?: ShardStatus[];
}

/** What a running repair is doing (`NodeStatus.repair`). */
export interface NodeRepairStatus extends RepairProgress {
  /** The same in words, as in `problems`. */
  readonly detail: string;
}

/** How often nodes that do not vote are probed again (reconnected, reconfigured, repaired elsewhere). */
const RECHECK_INTERVAL_MS = 1_000;
/**
 * Every this many re-checks, voting nodes are probed too: their durability settings (and a Cluster member's replicas',
 * DESIGN §3c) are re-checked while they vote, not only at start-up — a setting changed at run time (CONFIG SET
 * appendfsync everysec, a replica allowed to fail over) stops the node voting within this many seconds.
 */
const VOTING_RECHECK_EVERY = 30;
/** How long a fresh-cluster mark outlives an initializing process that died between its steps. */
const FRESH_MARK_TTL_MS = 30_000;

/** Fresh initializations this process runs now, by key prefix and node identities (see `afterProbe`). */
const freshInitsInFlight = new Map<string, Promise<FreshInitOutcome>>();

/** The monotonic clock of a real process. */
export const SYSTEM_CLOCK: ProtocolClock = {
  now: monotonicNow,
  sleep: (ms, signal) => sleep(ms, undefined, signal === undefined ? undefined : { signal }),
};

export class NodeSet implements ProtocolContext {
  readonly nodes: readonly NodeConnection[];
  readonly quorum: number;
  readonly clock: ProtocolClock = SYSTEM_CLOCK;
  /** Bound of probes and repair calls: at least a second, however small the per-vote timeout. */
  readonly probeTimeoutMs: number;

  private readonly repairs = new Map<number, Promise<void>>();
  /** The probe round `recentStatus` runs, shared by its concurrent callers. */
  private probing: Promise<void> | undefined;
  private readonly repairProblems = new Map<number, string>();
  private startup: Promise<void> | undefined;
  private recheckTimer: NodeJS.Timeout | undefined;
  /**
   * Nodes a call timed out on since their last probe. A hung node (SIGSTOP, a stalled disk) keeps its connection
   * open and its last probe's "reachable": only a probe that times out too tells it down (a `nodeState` event), so
   * the re-check probes these. Voting does not depend on it: a node that answers late is still asked.
   */
  private readonly timedOut = new Set<number>();
  private rechecking = false;
  private foldTimer: NodeJS.Timeout | undefined;
  private folding = false;
  /** Tells each node state change once (nodes/node-events.ts). */
  private readonly states: NodeStateTracker;

  constructor(
    nodes: unknown,
    /** The settings this process runs with: as configured, or with the cluster's recorded maxTtlMs adopted. */
    public settings: Readonly<CoordinatorSettings>,
    readonly reportError: NodeErrorSink,
    /** Aborted when the coordinator closes: stops re-checks and repairs. */
    readonly closing: AbortSignal,
    /** Told every step of every repair this set runs (the coordinator's `repairProgress` event). */
    private readonly onRepairProgress: (node: number, status: NodeRepairStatus) => void = () => undefined,
    /** Told every node state change, once (the coordinator's `nodeState` event and diagnostics channel). */
    onStateChange: (event: NodeStateEvent) => void = () => undefined,
  ) {
    if (!Array.isArray(nodes) || nodes.length === 0) {
      throw new InvalidRequestError(
        'nodes must be a non-empty array of redis:// URLs, ioredis clients or Redis Cluster members ({ cluster: [urls] } or an ioredis Cluster)',
      );
    }
    if (nodes.length > 99) throw new InvalidRequestError('nodes must hold at most 99 nodes');
    this.probeTimeoutMs = Math.max(1_000, settings.nodeTimeoutMs);
    const connections: NodeConnection[] = [];
    const sink: NodeErrorSink = (node, operation, error) => {
      if (error instanceof NodeTimeoutError) this.timedOut.add(node);
      reportError(node, operation, error);
    };
    try {
      const seen = new Map<string, number>();
      (nodes as Array<string | Redis>).forEach((given, index) => {
        const node = typeof given === 'string' ? nodeUrl(given, index) : given;
        const connection =
          isClusterConfig(node) || isClusterClient(node)
            ? ClusterMember.create(index, node, settings.keyPrefix, sink, this.probeTimeoutMs)
            : new NodeConnection(index, node, settings.keyPrefix, sink, this.probeTimeoutMs);
        // A script that reveals a scope without its state (a restarted node, a Cluster slot whose shard restarted
        // empty) has stopped it voting; its repair starts at once.
        connection.onScopeEmpty = () => {
          if (!this.closing.aborted) this.repairNode(index).catch(() => undefined);
          this.publishStates();
        };
        connections.push(connection);
        const earlier = seen.get(connection.identity);
        if (earlier !== undefined) {
          throw new InvalidRequestError(
            `nodes[${index}] duplicates nodes[${earlier}] (${connection.address}): each node must be a distinct Redis master`,
          );
        }
        seen.set(connection.identity, index);
      });
    } catch (error) {
      for (const node of connections) if (node.owned) node.client.disconnect();
      throw error;
    }
    for (const node of connections) node.nodeCount = connections.length;
    this.nodes = connections;
    this.quorum = quorumOf(connections.length);
    this.states = new NodeStateTracker(this.quorum, settings.unsafeAllowUnsafeNodes, (event) => {
      try {
        onStateChange(event);
      } catch {
        // a listener's failure must not stop a probe or a repair
      }
    });
  }

  /** Tells the node state changes since the last call (once each). */
  private publishStates(): void {
    if (this.closing.aborted) return;
    this.states.observe(
      this.nodes.map((node) => this.statusOf(node)),
      (index) => this.nodes[index]?.lastProbe?.configProblems ?? [],
    );
  }

  /** Runs the start-up checks once; every operation awaits it. */
  started(): Promise<void> {
    this.startup ??= this.start();
    return this.startup;
  }

  isVoting(index: number): boolean {
    const node = this.nodes[index];
    return node !== undefined && node.isVoting(this.settings.unsafeAllowUnsafeNodes);
  }

  /** Nodes whose last probe found unsafe settings, unless the checks are waived. */
  unsafeNodes(): UnsafeNode[] {
    if (this.settings.unsafeAllowUnsafeNodes) return [];
    return this.nodes
      .filter((n) => (n.lastProbe?.configProblems.length ?? 0) > 0)
      .map((n) => ({ node: n.index, address: n.address, problems: [...n.lastProbe!.configProblems] }));
  }

  votingCount(): number {
    return this.nodes.filter((n) => n.isVoting(this.settings.unsafeAllowUnsafeNodes)).length;
  }

  /** Probes every node now (for `/readyz`): one entry per node, in node order. */
  async nodeStatus(): Promise<NodeStatus[]> {
    await this.started();
    await Promise.all(this.nodes.map((node) => node.probe(this.probeTimeoutMs)));
    await this.afterProbe();
    this.publishStates();
    return this.nodes.map((node) => this.statusOf(node));
  }

  /**
   * The node view without probing anything: what the last probes, votes and repairs left behind (the
   * background re-check keeps non-voting and unreachable nodes fresh; voting nodes are probed only when asked).
   */
  cachedStatus(): NodeStatus[] {
    return this.nodes.map((node) => this.statusOf(node));
  }

  /**
   * The node view, probed again only when some node's last probe is older than `maxAgeMs`: one probe round at a
   * time, shared by every caller that arrives while it runs. For scrapers (the service's `/metrics`), which may
   * ask often without costing each node more than one probe per `maxAgeMs`.
   */
  async recentStatus(maxAgeMs: number): Promise<NodeStatus[]> {
    await this.started();
    const now = performance.now();
    const stale = this.nodes.some((n) => n.lastProbeAt === undefined || now - n.lastProbeAt > maxAgeMs);
    if (stale) {
      this.probing ??= (async () => {
        try {
          await Promise.all(this.nodes.map((node) => node.probe(this.probeTimeoutMs)));
          await this.afterProbe();
          this.publishStates();
        } finally {
          this.probing = undefined;
        }
      })();
      await this.probing;
    }
    return this.cachedStatus();
  }

  /** The running repair of node `index`, started if none runs. */
  repairNode(index: number): Promise<void> {
    const running = this.repairs.get(index);
    if (running !== undefined) return running;
    const node = this.nodes[index]!;
    const repair = this.repairOnce(node).finally(() => this.repairs.delete(index));
    this.repairs.set(index, repair);
    return repair;
  }

  /**
   * One fold pass over every voting node (nodes/fold.ts): registers idle for `tokenRetentionMs` go into the node's
   * floor. Runs every half retention (at most every minute, at least every second) in the background; one process
   * per node and interval does the work (fold.lua's lock), the others find it busy. Returns how many registers
   * this call folded.
   */
  foldIdleRegisters(): Promise<number> {
    return foldIdleRegisters({
      nodes: this.nodes,
      isVoting: (index) => this.isVoting(index),
      tokenRetentionMs: this.settings.tokenRetentionMs,
      callTimeoutMs: this.probeTimeoutMs,
      signal: this.closing,
      now: monotonicNow,
      // Unreferenced, like the fold timer: a pause never keeps the process alive, and closing ends it.
      pause: (ms) => sleep(ms, undefined, { signal: this.closing, ref: false }).catch(() => undefined),
    });
  }

  /** A script said NOT_INITIALIZED: the node restarted empty. It stops voting until repaired. */
  noteAbstentions(replies: readonly NodeReply<{ readonly kind: string }>[]): void {
    replies.forEach((reply, index) => {
      if (reply.state !== 'ok') return;
      const node = this.nodes[index]!;
      // A NOT_INITIALIZED reply already stopped its scope voting and asked for its repair (NodeConnection.learn).
      if (reply.value.kind === 'corrupt') {
        this.reportError(
          index,
          'vote',
          new Error(`node ${node.address} holds a token register that is not a decimal token`),
        );
      }
    });
    // Fewer than a quorum vote now (every node flushed between two uses, say): look at every node at once instead of
    // at the next re-check, so that a fresh initialization (or the repairs) can start within the caller's retries.
    if (
      !this.recheckSoon &&
      !this.closing.aborted &&
      this.nodes.filter((n) => n.isVoting(this.settings.unsafeAllowUnsafeNodes)).length < this.quorum
    ) {
      this.recheckSoon = true;
      setImmediate(() => {
        this.recheckSoon = false;
        void this.recheck();
      });
    }
  }

  /** A re-check is scheduled for the next turn (see noteAbstentions). */
  private recheckSoon = false;

  unavailable(
    summary: string,
    replies?: readonly NodeReply<{ readonly kind: string }>[],
  ): QuorumUnavailableError {
    const reasons = this.nodes.map((node, index): string | null => {
      const reply = replies?.[index];
      if (!node.isVoting(this.settings.unsafeAllowUnsafeNodes)) {
        return this.statusOf(node).problems.join('; ') || 'does not vote';
      }
      if (reply === undefined || reply.state === 'ok')
        return reply?.state === 'ok' && reply.value.kind === 'not-initialized' ? 'restarted empty' : null;
      if (reply.state === 'pending') return 'no reply yet';
      return reply.error instanceof Error ? reply.error.message : String(reply.error);
    });
    const detail = reasons
      .map((reason, index) =>
        reason === null ? null : `node ${index} (${this.nodes[index]!.address}): ${reason}`,
      )
      .filter((line): line is string => line !== null)
      .join('; ');
    return new QuorumUnavailableError(
      `quorum unavailable: ${summary} (quorum is ${this.quorum} of ${this.nodes.length})${detail ? `: ${detail}` : ''}`,
      reasons,
    );
  }

  /** Stops re-checks, waits for running repairs to stop, closes the clients this set created. */
  async close(): Promise<void> {
    if (this.recheckTimer !== undefined) clearInterval(this.recheckTimer);
    if (this.foldTimer !== undefined) clearInterval(this.foldTimer);
    await Promise.allSettled([...this.repairs.values()]);
    await Promise.all(this.nodes.map((node) => node.close()));
  }

  private async start(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.probe(this.probeTimeoutMs, { waitForConnection: true })));
    for (const node of this.nodes) {
      const problems = node.lastProbe?.configProblems ?? [];
      if (problems.length > 0) {
        const verdict = this.settings.unsafeAllowUnsafeNodes
          ? 'accepted (unsafeAllowUnsafeNodes)'
          : 'refused';
        this.reportError(
          node.index,
          'check',
          new Error(`node ${node.address} ${verdict}: ${problems.join('; ')}`),
        );
      }
    }
    await this.afterProbe();
    await this.checkClusterSettings();
    this.publishStates();
    this.recheckTimer = setInterval(() => void this.recheck(), RECHECK_INTERVAL_MS);
    this.recheckTimer.unref();
    this.foldTimer = setInterval(
      () => void this.foldInBackground(),
      foldIntervalMs(this.settings.tokenRetentionMs),
    );
    this.foldTimer.unref();
  }

  /**
   * Reads the cluster's settings recorded on every initialized node (nodes/cluster-settings.ts) and runs with them,
   * or refuses to start. A node initialized before settings were recorded gets this process's values, each field
   * only where absent (the upgrade path).
   * @throws ClusterSettingsError (rejecting `started()`, so every operation and `ready()`)
   */
  private async checkClusterSettings(everyNode = false): Promise<void> {
    const configured = {
      maxTtlMs: this.settings.maxTtlMs,
      nodeCount: this.nodes.length,
      keyLayout: this.settings.keyLayout,
    };
    // A node without a recorded layout was initialized before layouts were recorded: its registers are in the
    // 'fenced' layout, whatever this process is configured with.
    const upgrade = settingsRecord({ ...configured, keyLayout: 'fenced' });
    const recorded = await Promise.all(
      this.nodes.map(async (node): Promise<RecordedSettings | undefined> => {
        if (!everyNode && (!node.anyInitialized || node.lastProbe?.reachable !== true)) return undefined;
        try {
          const reply = await node.settings(this.probeTimeoutMs, 'record', upgrade);
          return reply.kind === 'settings' ? parseRecorded(reply.settings) : undefined;
        } catch {
          return undefined; // reported as a nodeError event; a node that cannot be read has no say
        }
      }),
    );
    const { maxTtlMs, keyLayout } = reconcileSettings(
      configured,
      recorded,
      settingModes(this.settings),
      (i) => `node ${i} (${this.nodes[i]!.address})`,
    );
    if (maxTtlMs !== this.settings.maxTtlMs || keyLayout !== this.settings.keyLayout) {
      this.settings = Object.freeze({
        ...this.settings,
        maxTtlMs,
        keyLayout,
        tokenRetentionMs: Math.min(Math.max(this.settings.tokenRetentionMs, maxTtlMs), MAX_TIMER_MS),
      });
    }
  }

  /**
   * Reads the cluster's settings again, from every node that answers, after a node refused a call for them
   * (SETTINGS_MISMATCH: the nodes check the settings on every call that records a promise or a lease,
   * nodes/cluster-settings.ts). Adopts a recorded value of a setting the caller did not set; refuses one it set.
   * Calls made while a refresh runs share it.
   * @returns whether the settings this process runs with changed
   * @throws ClusterSettingsError when this process's configuration is refused
   */
  async refreshSettings(): Promise<boolean> {
    const before = this.settings;
    this.refreshing ??= this.checkClusterSettings(true).finally(() => {
      this.refreshing = undefined;
    });
    await this.refreshing;
    return this.settings !== before;
  }

  private refreshing: Promise<void> | undefined;

  private async foldInBackground(): Promise<void> {
    if (this.folding || this.closing.aborted) return;
    this.folding = true;
    try {
      await this.foldIdleRegisters();
    } catch {
      // reported as nodeError events; the next pass tries again
    } finally {
      this.folding = false;
    }
  }

  /**
   * Probes nodes that do not vote, so they rejoin when reachable, reconfigured or repaired — and nodes whose last
   * probe could not reach them: one that comes back empty is then found by the probe (and repaired), not only by
   * the next vote it is asked for.
   */
  /** Re-checks run so far (every VOTING_RECHECK_EVERY-th probes the voting nodes too). */
  private rechecks = 0;

  private async recheck(): Promise<void> {
    if (this.rechecking || this.closing.aborted) return;
    this.rechecking = true;
    try {
      // Also a voting node whose connection dropped: its state change (down) is then seen within a second,
      // without waiting for a vote or a status call.
      // Without a quorum of voting nodes in this process's view, every node is probed, voting or under repair:
      // if every node turns out empty (all flushed, or all restarted without their data), no repair can find a
      // source, and the set is initialized afresh instead (afterProbe holds the argument). A node still counted as
      // voting may have lost its state unseen: a failed attempt does not always wait for its reply.
      const withoutQuorum =
        this.nodes.filter((n) => n.isVoting(this.settings.unsafeAllowUnsafeNodes)).length < this.quorum;
      const everyVoting = ++this.rechecks % VOTING_RECHECK_EVERY === 0;
      const idle = withoutQuorum
        ? [...this.nodes]
        : everyVoting
          ? this.nodes.filter((n) => !this.repairs.has(n.index))
          : this.nodes.filter(
              (n) =>
                (!n.isVoting(this.settings.unsafeAllowUnsafeNodes) ||
                  n.lastProbe?.reachable === false ||
                  this.timedOut.has(n.index) ||
                  (n.owned && n.client.status !== 'ready') ||
                  // A Cluster member with empty slots votes with its other slots; it is probed (and repaired) again.
                  (n.anyInitialized && !n.initialized)) &&
                !this.repairs.has(n.index),
            );
      if (idle.length === 0) return;
      for (const node of idle) this.timedOut.delete(node.index);
      await Promise.all(idle.map((node) => node.probe(this.probeTimeoutMs)));
      await this.afterProbe();
      this.publishStates();
    } finally {
      this.rechecking = false;
    }
  }

  private configAccepted(node: NodeConnection): boolean {
    const probe = node.lastProbe;
    return probe !== undefined && (probe.configProblems.length === 0 || this.settings.unsafeAllowUnsafeNodes);
  }

  /** After a probe: initialize a fresh cluster, or start repairs of nodes that lost their state. */
  private async afterProbe(): Promise<void> {
    if (this.closing.aborted) return;
    const uninitialized = this.nodes.filter(
      (n) => !n.initialized && n.lastProbe?.reachable === true && this.configAccepted(n),
    );
    if (uninitialized.length === 0) return;
    if (this.nodes.some((n) => n.anyInitialized)) {
      // Some node holds its incarnation key, so the set has voted before: a node without one lost its state, and
      // a grant in flight may have counted what it lost. Never initialize it in place; repair it (nodes/repair.ts).
      for (const node of uninitialized) {
        if (!this.repairs.has(node.index)) this.repairNode(node.index).catch(() => undefined);
      }
      return;
    }
    if (!this.nodes.every((n) => n.lastProbe?.reachable === true && n.lastProbe.initialized === false))
      return;
    // No node is initialized as far as the last probe saw: a brand-new cluster, or several coordinators starting
    // one together — or a cluster whose every node lost its state (all flushed, or all restarted without their
    // data), seen by a process that ran before. That last case is initialized afresh too, with repairs of these
    // nodes possibly still waiting: no repair can succeed (it needs N − quorum + 1 initialized sources, and none
    // is left), and a process that starts now would take exactly this path, so refusing here would protect
    // nothing and only make availability wait for a restart. What it costs is said in DESIGN §3's terms: every
    // promise is gone from every node, so G2 across the loss rests on the proposals alone — this process's memory
    // of the registers it saw and the time floor (tokens/proposal.ts) — not on the nodes; the guard's high-water
    // marks still refuse any token below one it accepted (G1). Each step below is the fresh-cluster protocol
    // unchanged, so a node that another process initializes or repairs meanwhile makes it give up. The probe is no proof (a node can be initialized, vote and restart empty meanwhile), so the
    // initialization marks, checks and only then initializes every node (nodes/fresh-cluster.ts holds the
    // argument). With any node unreachable, nothing is initialized.
    //
    // Coordinators of this process that start on the same nodes at the same moment (one per Redlock made over the
    // same clients, say) initialize them once: a second one waits for the first's initialization and takes its
    // outcome, which is a fact about the nodes (which of them hold their incarnation key after step 3), not about
    // the coordinator that ran it; the key below names the same nodes in the same order and the same prefix. It
    // initializes nothing itself on that path, so the argument above is untouched; it only spares the nodes a
    // second mark and check of everything (16 384 slots per Cluster member), and a second look at every node
    // right after the first one's initialization, when every waiting coordinator would make it at once and the
    // first coordinator's callers are already using the nodes. Taking the outcome is as safe as the initializer
    // taking it: the flag only says a node is worth asking, and every vote re-checks the incarnation key
    // atomically on the node. When the initialization gave up, the waiting coordinator looks again, exactly as the
    // one that gave up does.
    const key = `${this.settings.keyPrefix}\n${this.nodes.map((n) => n.identity).join('\n')}`;
    const running = freshInitsInFlight.get(key);
    if (running !== undefined) {
      const outcome = await running.catch(() => undefined);
      if (outcome?.kind === 'initialized') {
        this.takeInitialized(outcome.initialized);
      } else {
        await Promise.all(this.nodes.map((node) => node.probe(this.probeTimeoutMs)));
      }
      return;
    }
    const initializing = initializeFreshCluster(this.nodes, {
      timeoutMs: this.probeTimeoutMs,
      markTtlMs: FRESH_MARK_TTL_MS,
      settings: settingsRecord({
        maxTtlMs: this.settings.maxTtlMs,
        nodeCount: this.nodes.length,
        keyLayout: this.settings.keyLayout,
      }),
      // A node whose configuration is refused is checked like the others but not initialized: it joins later.
      initialize: (index) => uninitialized.includes(this.nodes[index]!),
    });
    freshInitsInFlight.set(key, initializing);
    const outcome = await initializing.finally(() => freshInitsInFlight.delete(key));
    if (outcome.kind === 'initialized') {
      this.takeInitialized(outcome.initialized);
    } else {
      // Most often another coordinator is initializing the same fresh cluster at this moment: look again, so that
      // this process sees the nodes it initialized without waiting for the next re-check.
      await Promise.all(this.nodes.map((node) => node.probe(this.probeTimeoutMs)));
    }
  }

  /** Records the nodes a fresh initialization left initialized (its outcome, by position in `nodes`). */
  private takeInitialized(initialized: readonly number[]): void {
    for (const index of initialized) this.nodes[index]!.markInitialized();
  }

  private async repairOnce(node: NodeConnection): Promise<void> {
    node.repairStatus = 'restarted empty: repair starting';
    node.repairProgress = { phase: 'claiming' };
    this.publishStates();
    try {
      if (node instanceof ClusterMember) {
        await repairEmptySlots(this.repairContext(), this.nodes, node);
      } else {
        await repairNode(this.repairContext(), node);
        node.initialized = true;
      }
      this.repairProblems.delete(node.index);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.repairProblems.set(node.index, `restarted empty and not repaired yet: ${message}`);
      if (!this.closing.aborted) this.reportError(node.index, 'repair', error);
      throw error;
    } finally {
      node.repairStatus = undefined;
      node.repairProgress = undefined;
      this.publishStates();
    }
  }

  private repairContext(): RepairContext {
    return {
      nodes: this.nodes,
      quorum: this.quorum,
      clock: this.clock,
      callTimeoutMs: this.probeTimeoutMs,
      closing: this.closing,
      status: (node: RepairNode, text: string | undefined, progress?: RepairProgress) => {
        const connection = this.nodes[node.index];
        if (connection === undefined) return;
        connection.repairStatus = text ?? 'restarted empty: repair starting';
        connection.repairProgress =
          text === undefined ? { phase: 'claiming' } : (progress ?? connection.repairProgress);
        if (text !== undefined) {
          try {
            this.onRepairProgress(node.index, {
              ...(connection.repairProgress ?? { phase: 'claiming' }),
              detail: text,
            });
          } catch {
            // a listener's failure must not stop the repair
          }
        }
      },
      reportError: this.reportError,
    };
  }

  statusOf(node: NodeConnection): NodeStatus {
    const probe = node.lastProbe;
    const problems: string[] = [];
    if (probe === undefined) problems.push('not checked yet');
    else {
      if (!probe.reachable) problems.push(probe.error ?? 'unreachable');
      problems.push(...probe.configProblems);
      if (probe.configProblems.length > 0 && this.settings.unsafeAllowUnsafeNodes) {
        problems.push('votes anyway: unsafeAllowUnsafeNodes is set');
      }
    }
    if (node.repairStatus !== undefined) problems.push(node.repairStatus);
    else if (node.anyInitialized && !node.initialized) {
      problems.push(
        `${node.scopes.empty().length} slots have no incarnation key (a shard restarted empty): they do not vote until repaired`,
      );
    } else if (!node.initialized && probe?.reachable) {
      problems.push(
        this.repairProblems.get(node.index) ??
          (this.nodes.some((n) => n.anyInitialized)
            ? 'restarted empty (no incarnation key): waiting for repair'
            : 'not initialized: a fresh cluster is initialized once every node is reachable and empty'),
      );
    }
    const status: NodeStatus = {
      node: node.index,
      address: node.address,
      reachable: probe?.reachable ?? false,
      configOk: probe !== undefined && probe.reachable && probe.configProblems.length === 0,
      problems,
      voting: (probe?.reachable ?? false) && node.isVoting(this.settings.unsafeAllowUnsafeNodes),
    };
    if (probe?.role !== undefined) status.role = probe.role;
    if (probe?.latencyMs !== undefined) status.latencyMs = probe.latencyMs;
    if (node.repairStatus !== undefined) {
      status.repair = { ...(node.repairProgress ?? { phase: 'claiming' }), detail: node.repairStatus };
    }
    const shards = node.currentShards();
    if (shards !== undefined) status.shards = shards;
    return status;
  }
}

/**
 * A node given as a string, trimmed (`FENCED_REDIS_URLS.split(',')` of a list with spaces after its commas, as the
 * service and the operator commands accept it).
 * @throws InvalidRequestError naming the entry and what is wrong with it (a bad port, no host, another scheme)
 */
function nodeUrl(text: string, index: number): string {
  const url = text.trim();
  const problem = url.startsWith(CLUSTER_ENTRY_PREFIX)
    ? `is a cluster: entry, the form of FENCED_REDIS_URLS; in nodes a Redis Cluster member is { cluster: [seed URLs] }`
    : redisUrlProblem(url);
  if (problem !== undefined) {
    throw new InvalidRequestError(
      `nodes[${index}] ${problem} (allowed: a redis:// or rediss:// URL with a host, or an ioredis client)`,
    );
  }
  return url;
}
