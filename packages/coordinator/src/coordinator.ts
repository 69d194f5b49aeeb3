// The library's public API: `Coordinator`, a facade. It holds the public overloads (one resource or several), the
// events, the lifecycle (ready, close) and the node status passthroughs; each verb checks its request
// (lease/validate-request.ts) and hands it to one step below (protocol/lease-protocol.ts), which goes down to the
// nodes without calling back up.
import { EventEmitter } from 'node:events';
import { InvalidRequestError } from '@fenced/shared';
import { CoordinatorClosedError, UnsafeNodeError } from './errors.js';
import { coordinatorEventSinks, type CoordinatorEvents } from './events/coordinator-events.js';
import type { Lease } from './lease/lease.js';
import type { AcquireOptions } from './lease/lease-watch.js';
import type { MultiLease } from './lease/multi-lease.js';
import type { CoordinatorAcquireOptions, TryAcquireOptions } from './lease/attempt-report.js';
import {
  validateAcquire,
  validateLeaseId,
  validateResource,
  validateResources,
  validateTtl,
  type RequestSettings,
} from './lease/validate-request.js';
import { NodeSet, type NodeRepairStatus, type NodeStatus } from './nodes/node-set.js';
import type { RepairProgress } from './nodes/repair.js';
import {
  integer,
  MAX_TIMER_MS,
  resolveOptions,
  type CoordinatorOptions,
  type CoordinatorSettings,
} from './options.js';
import { LeaseProtocol } from './protocol/lease-protocol.js';
import { Releaser } from './protocol/release.js';
import { ReleaseNotifier } from './protocol/waiters.js';
import { createLeaseSigner } from './signing/lease-signer.js';
import { TokenProposer } from './tokens/proposal.js';

export type { AcquireOptions, NodeStatus, NodeRepairStatus, RepairProgress };
export type { CoordinatorEvents, NodeErrorEvent, RepairProgressEvent } from './events/coordinator-events.js';
export type {
  AttemptReport,
  AttemptReportOptions,
  CoordinatorAcquireOptions,
  NodeVote,
  NodeVoteAgainst,
  NodeVoteFor,
  TryAcquireOptions,
} from './lease/attempt-report.js';

/**
 * Grants Redlock leases over N independent Redis masters, each with a fencing token from a quorum
 * max-register (DESIGN §2 and §3). Emits `nodeError` events ({ node, address, operation, error }),
 * `repairProgress` events ({ node, address, repair }) for every step of a repair it runs, and `nodeState` events
 * ({@link NodeStateEvent}: a node up or down, not a Redis server, refused as unsafe, voting or not, repair started
 * or finished, the quorum lost or regained), each change once; the same events are published on the
 * `fenced:node` diagnostics channel ({@link NODE_STATE_CHANNEL}, `node:diagnostics_channel`). A node refused as
 * unsafe while nobody listens to either is also said once by `process.emitWarning` (code `FENCED_UNSAFE_NODE`).
 */
export class Coordinator extends EventEmitter<CoordinatorEvents> {
  readonly quorum: number;
  readonly nodeCount: number;

  /**
   * The settings this coordinator runs with: the options with defaults filled in, and — after `ready()` with
   * `clusterSettings: 'adopt'` — the cluster's maxTtlMs recorded on the nodes.
   */
  get settings(): Readonly<CoordinatorSettings> {
    return this.nodes.settings;
  }

  /** The settings of the moment, and whether a node is a Cluster member (lease/validate-request.ts says why). */
  private get requestSettings(): RequestSettings {
    return this.clusterMember ? { ...this.settings, clusterMember: true } : this.settings;
  }

  private readonly nodes: NodeSet;
  /** Whether a node is a Redis Cluster member (DESIGN §3c). */
  private readonly clusterMember: boolean;
  private readonly closing = new AbortController();
  /** Every step below the verbs: acquire, extend, release, inspect, and the leases' own extend and release. */
  private readonly leases: LeaseProtocol;

  constructor(options: CoordinatorOptions) {
    super();
    const settings = resolveOptions(options);
    // Built before any connection exists: a bad key fails the constructor, not the first grant (DESIGN §4b).
    const signer = createLeaseSigner(options.signingKey);
    const events = coordinatorEventSinks(this, (node) => this.nodes?.nodes[node]?.address);
    this.nodes = new NodeSet(
      (options as { nodes?: unknown }).nodes,
      settings,
      events.nodeError,
      this.closing.signal,
      events.repairProgress,
      events.nodeState,
    );
    this.nodeCount = this.nodes.nodes.length;
    this.clusterMember = this.nodes.nodes.some((node) => node.scopes.perSlot);
    this.quorum = this.nodes.quorum;
    this.leases = new LeaseProtocol({
      nodes: this.nodes,
      proposer: new TokenProposer(),
      releaser: new Releaser(this.nodes),
      notifier: new ReleaseNotifier(this.nodes.nodes, this.nodes.probeTimeoutMs, events.nodeError),
      signer,
      closed: this.closing.signal,
    });
  }

  // ---------------------------------------------------------------------------------------------------------
  // Public API

  /**
   * Runs the start-up checks once (CONFIG GET, INFO replication, incarnation keys; initializes a fresh cluster,
   * starts repairs of nodes that restarted empty). Every operation awaits it implicitly.
   * @throws UnsafeNodeError when a node fails the start-up checks (unless `unsafeAllowUnsafeNodes`), naming the
   *   node and the setting
   * @throws ClusterSettingsError when this process's node count, or its maxTtlMs (unless `clusterSettings:
   *   'adopt'`), differs from the cluster's settings recorded on the nodes, naming both values
   * @throws QuorumUnavailableError when fewer than a quorum of nodes may vote; the message names each node's
   *   problems. The coordinator keeps re-checking in the background, so a later call may succeed.
   * @throws CoordinatorClosedError after `close()`
   */
  async ready(): Promise<void> {
    this.throwIfClosed();
    await this.nodes.started();
    const unsafe = this.nodes.unsafeNodes();
    if (unsafe.length > 0) throw new UnsafeNodeError(unsafe);
    const voting = this.nodes.votingCount();
    if (voting < this.quorum)
      throw this.nodes.unavailable(`only ${voting} of ${this.nodeCount} nodes may vote`);
  }

  /**
   * Acquires a lease, waiting up to `waitMs` while another holder has it.
   * @throws LockedError when not granted within `waitMs`
   * @throws QuorumUnavailableError when no majority of nodes can vote: at once when a majority is unreachable or
   *   refused; when nodes are only slow (timeouts), after retrying within `waitMs`
   * @throws InvalidRequestError for a bad resource name, ttl or wait
   */
  async acquire(resource: string, options: CoordinatorAcquireOptions): Promise<Lease>;
  /**
   * Acquires one lease over several resources, all or nothing (protocol/acquire-within.ts): every resource is
   * granted, each with its own token, or none is. Resources are taken in sorted order, one attempt each, and
   * every partial grant is released before waiting, so overlapping requests neither deadlock nor livelock.
   * @throws LockedError (naming the resource that blocked) when not granted within `waitMs`
   */
  async acquire(resources: readonly string[], options: CoordinatorAcquireOptions): Promise<MultiLease>;
  async acquire(
    resource: string | readonly string[],
    options: CoordinatorAcquireOptions,
  ): Promise<Lease | MultiLease> {
    // Not `null`: an acquire that may wait throws LockedError when not granted.
    return (await this.leases.acquire(validateAcquire(this.requestSettings, resource, options, true)))!;
  }

  /**
   * One attempt, no waiting: the lease, or `null` when another holder has it.
   * @throws QuorumUnavailableError when no majority of nodes could vote
   */
  async tryAcquire(resource: string, options: TryAcquireOptions): Promise<Lease | null>;
  /** One round over several resources, no waiting: the lease over all of them, or `null` (nothing held). */
  async tryAcquire(resources: readonly string[], options: TryAcquireOptions): Promise<MultiLease | null>;
  async tryAcquire(
    resource: string | readonly string[],
    options: TryAcquireOptions,
  ): Promise<Lease | MultiLease | null> {
    return this.leases.acquire(validateAcquire(this.requestSettings, resource, options, false));
  }

  /**
   * Runs `fn` while holding the lease: an `autoExtend` lease whose signal (combined with `options.signal`) is
   * handed to `fn`, always released afterwards. `fn`'s own error is never replaced by a release failure.
   */
  async using<T>(
    resource: string,
    options: AcquireOptions,
    fn: (lease: Lease, signal: AbortSignal) => Promise<T>,
  ): Promise<T>;
  /** As above, under one lease over several resources (all or nothing), extended and released as one. */
  async using<T>(
    resources: readonly string[],
    options: AcquireOptions,
    fn: (lease: MultiLease, signal: AbortSignal) => Promise<T>,
  ): Promise<T>;
  async using<T>(
    resource: string | readonly string[],
    options: AcquireOptions,
    fn:
      | ((lease: Lease, signal: AbortSignal) => Promise<T>)
      | ((lease: MultiLease, signal: AbortSignal) => Promise<T>),
  ): Promise<T> {
    if (typeof fn !== 'function')
      throw new InvalidRequestError('using needs a function to run under the lease');
    const kept = validateAcquire(this.requestSettings, resource, { ...options, autoExtend: true }, true);
    const lease = (await this.leases.acquire(kept))!;
    const signal =
      options.signal === undefined ? lease.signal : AbortSignal.any([lease.signal, options.signal]);
    try {
      return await (fn as (lease: Lease | MultiLease, signal: AbortSignal) => Promise<T>)(lease, signal);
    } finally {
      // Releasing stops the keeper before anything is sent.
      // A failed release only delays the next holder by the remaining ttl; it must not mask fn's outcome.
      await lease.release().catch(() => undefined);
    }
  }

  /**
   * Extends a lease by id (for the HTTP service): compare-and-extend on a majority; the token is unchanged.
   * @throws LeaseLostError when the lease expired or another holder has the resource
   * @throws QuorumUnavailableError when too few nodes answered to tell
   */
  async extend(resource: string, leaseId: string, ttlMs: number): Promise<Lease>;
  /**
   * Extends a multi-resource lease by id (for the HTTP service): every resource, same tokens. When any resource
   * was lost the whole set is released and that resource's LeaseLostError is thrown.
   */
  async extend(resources: readonly string[], leaseId: string, ttlMs: number): Promise<MultiLease>;
  async extend(
    resource: string | readonly string[],
    leaseId: string,
    ttlMs: number,
  ): Promise<Lease | MultiLease> {
    const names = validateResources(this.requestSettings, resource);
    validateLeaseId(leaseId);
    validateTtl(this.requestSettings, ttlMs);
    return this.leases.extend(names, leaseId, ttlMs);
  }

  /**
   * Releases a lease by id: compare-and-delete on every node. An expired or unknown lease is a success.
   * @throws QuorumUnavailableError when fewer than a quorum of nodes confirmed (the lease then expires by itself)
   */
  async release(resource: string, leaseId: string): Promise<void>;
  /** Releases every resource of a multi-resource lease by id, in parallel; the first failure is thrown. */
  async release(resources: readonly string[], leaseId: string): Promise<void>;
  async release(resource: string | readonly string[], leaseId: string): Promise<void> {
    const names = validateResources(this.requestSettings, resource);
    validateLeaseId(leaseId);
    await this.leases.release(names, leaseId);
  }

  /** Whether a majority of nodes holds a lease on the resource, and its token. Never returns a lease id. */
  async inspect(resource: string): Promise<{ held: boolean; token?: bigint }> {
    return this.leases.inspect(validateResource(this.requestSettings, resource));
  }

  /** Probes every node now (for `/readyz`): one entry per node, in node order. */
  nodeStatus(): Promise<NodeStatus[]> {
    return this.nodes.nodeStatus();
  }

  /**
   * The node view as this process last saw it, without calling any node: what the last probes, votes and
   * repairs left (`repair` shows a running repair's phase and registers copied). Non-voting and unreachable
   * nodes are re-probed in the background every second; voting nodes only by `nodeStatus()` or
   * `recentNodeStatus()`, so a voting node that stopped answering still shows reachable here until then.
   */
  cachedNodeStatus(): NodeStatus[] {
    return this.nodes.cachedStatus();
  }

  /**
   * The node view, probing every node again only when some node's last probe is older than `maxAgeMs` (one
   * probe round at a time, shared by concurrent callers). For scrapers: however often they ask, each node gets
   * at most one probe per `maxAgeMs`.
   */
  recentNodeStatus(maxAgeMs: number): Promise<NodeStatus[]> {
    integer('maxAgeMs', maxAgeMs, { min: 0, max: MAX_TIMER_MS });
    return this.nodes.recentStatus(maxAgeMs);
  }

  /**
   * Repairs a node that restarted empty (DESIGN §3; nodes/repair.ts). Runs in the background on its own when
   * such a node is detected; this returns the running repair, or starts one.
   */
  repairNode(index: number): Promise<void> {
    integer('node index', index, { min: 0, max: this.nodeCount - 1 });
    return this.nodes.repairNode(index);
  }

  /**
   * Stops background work, unsubscribes, and closes the clients this coordinator created. Leases it keeps
   * (`autoExtend`) or watches (`lease.signal` read) stop being extended: their signals abort with a
   * LeaseLostError and `onLost` is called. Leases are not released; they run out at their ttl.
   */
  async close(): Promise<void> {
    if (this.closing.signal.aborted) return;
    this.closing.abort(new CoordinatorClosedError());
    await this.leases.close();
    await this.nodes.close();
  }

  private throwIfClosed(): void {
    if (this.closing.signal.aborted) throw new CoordinatorClosedError();
  }
}
