// The library's public API: `Coordinator` with acquire, tryAcquire, using, extend, release and inspect, each for one
// resource and for several (overloads, each with its JSDoc), and the
// LeaseOperations its leases call back. That is why it runs past 400 lines; every protocol step it calls lives in
// one file of its own with its safety argument: protocol/ (attempt, the wait loop and its wake-ups, extend, release, inspect),
// tokens/ (the quorum max-register), nodes/ (membership, fresh initialization, folding, repair).
import { channel } from 'node:diagnostics_channel';
import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  InvalidRequestError,
  LeaseLostError,
  LockedError,
  rejectMisnamedOptions,
  validateResourceName,
} from '@fenced/shared';
import { CoordinatorClosedError, UnsafeNodeError } from './errors.js';
import { GrantedLease, type Lease, type LeaseGrant, type LeaseOperations } from './lease/lease.js';
import {
  closeAllWatches,
  type AcquireOptions,
  type LeaseWatch,
  type LeaseWatchOptions,
} from './lease/lease-watch.js';
import { GrantedMultiLease, validateResourceList, type MultiLease } from './lease/multi-lease.js';
import { newLeaseId } from './lease/lease-ids.js';
import { NodeSet, type NodeRepairStatus, type NodeStatus } from './nodes/node-set.js';
import { NODE_STATE_CHANNEL, type NodeStateEvent } from './nodes/node-events.js';
import type { RepairProgress } from './nodes/repair.js';
import {
  integer,
  MAX_TIMER_MS,
  resolveOptions,
  smallestUsableTtlMs,
  type CoordinatorOptions,
  type CoordinatorSettings,
} from './options.js';
import { attemptAcquire } from './protocol/acquire-attempt.js';
import { extendOnQuorum } from './protocol/extend.js';
import { inspectOnQuorum } from './protocol/inspect.js';
import { acquireWithin, type AcquireLoopContext } from './protocol/acquire-within.js';
import type { AttemptReport, AttemptReportOptions, VotesSink } from './lease/attempt-report.js';
import { releaseVotes } from './protocol/node-votes.js';
import { Releaser } from './protocol/release.js';
import { createLeaseSigner, type LeaseSigner } from './signing/lease-signer.js';
import { resourceKeys, resourceNameClash, type ResourceKeys } from './redlock/keys.js';
import { monotonicNow } from './redlock/validity.js';
import { TokenProposer } from './tokens/proposal.js';
import { ReleaseNotifier } from './protocol/waiters.js';

export type { AcquireOptions, NodeStatus, NodeRepairStatus, RepairProgress };
export type {
  AttemptReport,
  AttemptReportOptions,
  NodeVote,
  NodeVoteAgainst,
  NodeVoteFor,
} from './lease/attempt-report.js';

/**
 * The coordinator's acquire options: the shared {@link AcquireOptions}, plus `onAttempt`, called after every
 * attempt (one round over the requested resources) with each node's vote in it, granted or not — e.g. a node
 * whose lease key holds another value is an `against` vote with reason `held` (lease/attempt-report.ts).
 */
export interface CoordinatorAcquireOptions extends AcquireOptions, AttemptReportOptions {}

export type TryAcquireOptions = Omit<CoordinatorAcquireOptions, 'waitMs'>;

/** Payload of the `nodeError` event: a call to one node failed (timeout, connection, malformed reply, ...). */
export interface NodeErrorEvent {
  node: number;
  address: string;
  operation: string;
  error: unknown;
}

/** Payload of the `repairProgress` event: a repair this coordinator runs took a step (DESIGN §3). */
export interface RepairProgressEvent {
  node: number;
  address: string;
  /** The step: its phase, registers copied so far, and the same in words. */
  repair: NodeRepairStatus;
}

export interface CoordinatorEvents {
  nodeError: [NodeErrorEvent];
  repairProgress: [RepairProgressEvent];
  nodeState: [NodeStateEvent];
}

/** Where node state changes are published, besides the `nodeState` event (`node:diagnostics_channel`). */
const nodeStateChannel = channel(NODE_STATE_CHANNEL);

const LEASE_ID = /^[A-Za-z0-9_-]{16,128}$/;

/**
 * Grants Redlock leases over N independent Redis masters, each with a fencing token from a quorum
 * max-register (DESIGN §2 and §3). Emits `nodeError` events ({ node, address, operation, error }),
 * `repairProgress` events ({ node, address, repair }) for every step of a repair it runs, and `nodeState` events
 * ({@link NodeStateEvent}: a node up or down, not a Redis server, refused as unsafe, voting or not, repair started
 * or finished, the quorum lost or regained), each change once; the same events are published on the
 * `fenced:node` diagnostics channel ({@link NODE_STATE_CHANNEL}, `node:diagnostics_channel`). A node refused as
 * unsafe while nobody listens to either is also said once by `process.emitWarning` (code `FENCED_UNSAFE_NODE`).
 */
export class Coordinator extends EventEmitter<CoordinatorEvents> implements LeaseOperations {
  readonly quorum: number;
  readonly nodeCount: number;

  /**
   * The settings this coordinator runs with: the options with defaults filled in, and — after `ready()` with
   * `clusterSettings: 'adopt'` — the cluster's maxTtlMs recorded on the nodes.
   */
  get settings(): Readonly<CoordinatorSettings> {
    return this.nodes.settings;
  }

  private readonly nodes: NodeSet;
  private readonly proposer = new TokenProposer();
  private readonly releaser: Releaser;
  private readonly notifier: ReleaseNotifier;
  private readonly closing = new AbortController();
  /** Signs every lease when `signingKey` is set (DESIGN §4b); built before any connection exists. */
  private readonly signer: LeaseSigner | undefined;
  /** Watches of leases this coordinator granted that hold a timer (a keeper, an expiry timer): close() stops them. */
  private readonly watches = new Set<LeaseWatch>();

  constructor(options: CoordinatorOptions) {
    super();
    const settings = resolveOptions(options);
    this.signer = createLeaseSigner(options.signingKey);
    const unsafeWarned = new Set<number>();
    this.nodes = new NodeSet(
      (options as { nodes?: unknown }).nodes,
      settings,
      (i, operation, error) => this.reportNodeError(i, operation, error),
      this.closing.signal,
      (node, repair) =>
        this.emit('repairProgress', {
          node,
          address: this.nodes?.nodes[node]?.address ?? `node ${node}`,
          repair,
        }),
      (event) => {
        this.emit('nodeState', event);
        if (nodeStateChannel.hasSubscribers) nodeStateChannel.publish(event);
        // A node refused as unsafe makes the coordinator refuse to start or to count it: say so once even when
        // nobody listens to either, rather than only through a QuorumUnavailableError later.
        else if (
          event.change === 'unsafe' &&
          !event.accepted &&
          event.node !== null &&
          this.listenerCount('nodeState') === 0 &&
          !unsafeWarned.has(event.node)
        ) {
          unsafeWarned.add(event.node);
          process.emitWarning(
            `fenced: node ${event.node} (${event.address}) refused: ${event.settings?.join('; ')} — it could lose fencing tokens; fix its configuration (or set unsafeAllowUnsafeNodes for development only)`,
            { code: 'FENCED_UNSAFE_NODE' },
          );
        }
      },
    );
    this.nodeCount = this.nodes.nodes.length;
    this.quorum = this.nodes.quorum;
    this.releaser = new Releaser(this.nodes);
    this.notifier = new ReleaseNotifier(this.nodes.nodes, this.nodes.probeTimeoutMs, (i, operation, error) =>
      this.reportNodeError(i, operation, error),
    );
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
    if (Array.isArray(resource)) return this.acquireMany(resource, options, true);
    return this.acquireOne(resource as string, options);
  }

  private async acquireOne(resource: string, options: CoordinatorAcquireOptions): Promise<Lease> {
    const { ttlMs, waitMs, signal, watch, onAttempt } = this.validateAcquire(resource, options, true);
    const lease = await this.acquireWithin(resource, ttlMs, waitMs, signal, watch, onAttempt);
    if (lease === null) {
      throw new LockedError(
        resource,
        `resource is locked by another holder (not granted within ${waitMs} ms)`,
      );
    }
    return lease;
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
    if (Array.isArray(resource)) return this.acquireMany(resource, options, false);
    const { ttlMs, signal, watch, onAttempt } = this.validateAcquire(resource as string, options, false);
    return this.acquireWithin(resource as string, ttlMs, 0, signal, watch, onAttempt);
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
    const kept = { ...options, autoExtend: true };
    const lease: Lease | MultiLease = Array.isArray(resource)
      ? await this.acquireMany(resource, kept, true)
      : await this.acquireOne(resource as string, kept);
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
    if (Array.isArray(resource)) return this.extendMany(resource, leaseId, ttlMs);
    this.validateResource(resource);
    this.validateLeaseId(leaseId);
    this.validateTtl(ttlMs);
    const grant = await this.extendLease(resource as string, leaseId, ttlMs, undefined);
    return this.leaseOf(resource as string, leaseId, grant);
  }

  /**
   * Releases a lease by id: compare-and-delete on every node. An expired or unknown lease is a success.
   * @throws QuorumUnavailableError when fewer than a quorum of nodes confirmed (the lease then expires by itself)
   */
  async release(resource: string, leaseId: string): Promise<void>;
  /** Releases every resource of a multi-resource lease by id, in parallel; the first failure is thrown. */
  async release(resources: readonly string[], leaseId: string): Promise<void>;
  async release(resource: string | readonly string[], leaseId: string): Promise<void> {
    const names: readonly string[] = Array.isArray(resource)
      ? validateResourceList(resource, this.validateResource)
      : [this.validateResource(resource)];
    this.validateLeaseId(leaseId);
    await releaseEvery(names, (name) => this.releaseLease(name, leaseId));
  }

  /** Whether a majority of nodes holds a lease on the resource, and its token. Never returns a lease id. */
  async inspect(resource: string): Promise<{ held: boolean; token?: bigint }> {
    this.validateResource(resource);
    await this.nodes.started();
    return inspectOnQuorum(this.nodes, this.keysOf(resource));
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
    closeAllWatches(this.watches, new CoordinatorClosedError());
    this.releaser.close();
    await this.notifier.close();
    await this.nodes.close();
  }

  // ---------------------------------------------------------------------------------------------------------
  // LeaseOperations: what a Lease calls back

  /** @internal Compare-and-extend on a majority, finishing before `validUntil` when it is known. */
  async extendLease(
    resource: string,
    leaseId: string,
    ttlMs: number,
    validUntil: number | undefined,
    onVotes?: VotesSink,
  ): Promise<LeaseGrant> {
    this.validateTtl(ttlMs);
    await this.nodes.started();
    this.throwIfClosed();
    return extendOnQuorum(
      this.nodes,
      this.releaser,
      { resource, keys: this.keysOf(resource), leaseId, ttlMs, validUntil },
      onVotes,
    );
  }

  /** @internal Compare-and-delete everywhere; success once a majority confirmed it does not hold the lease. */
  async releaseLease(resource: string, leaseId: string, onVotes?: VotesSink): Promise<void> {
    await this.nodes.started();
    const keys = this.keysOf(resource);
    const releasing = this.releaser.everywhere(keys, leaseId);
    this.notifier.released(keys.channel, leaseId);
    const replies = await releasing;
    onVotes?.(replies.settled.then((settled) => releaseVotes(resource, settled)));
    if (replies.outcome === 'lost') {
      throw this.nodes.unavailable(
        'could not confirm the release on a majority of nodes; it is retried in the background, and the lease ' +
          'expires by itself within its ttl',
        replies.replies,
      );
    }
  }

  /**
   * The wait loop of a one-resource acquire (protocol/acquire-within.ts, a set of one): the lease, or `null`
   * when it was not granted within `waitMs`.
   */
  private async acquireWithin(
    resource: string,
    ttlMs: number,
    waitMs: number,
    signal: AbortSignal | undefined,
    watch: LeaseWatchOptions = {},
    onAttempt?: (report: AttemptReport) => void,
  ): Promise<Lease | null> {
    this.throwIfClosed(); // at once: a closed coordinator's connections would only time out
    await this.nodes.started();
    signal?.throwIfAborted();
    this.throwIfClosed();
    // One id for every attempt of this acquire: a vote left by an earlier attempt is then a vote for us.
    const leaseId = newLeaseId();
    const outcome = await acquireWithin(this.acquireLoopContext(), {
      resources: [resource],
      leaseId,
      ttlMs,
      waitMs,
      signal,
      onAttempt,
    });
    if (outcome.kind !== 'granted') return null;
    return this.leaseOf(resource, leaseId, outcome.grants.get(resource)!, watch);
  }

  /** Validates, then runs the multi-resource rounds (protocol/acquire-within.ts); `null` when not granted. */
  private async acquireMany(
    resources: readonly string[],
    options: CoordinatorAcquireOptions | TryAcquireOptions,
    allowWait: true,
  ): Promise<MultiLease>;
  private async acquireMany(
    resources: readonly string[],
    options: CoordinatorAcquireOptions | TryAcquireOptions,
    allowWait: false,
  ): Promise<MultiLease | null>;
  private async acquireMany(
    resources: readonly string[],
    options: CoordinatorAcquireOptions | TryAcquireOptions,
    allowWait: boolean,
  ): Promise<MultiLease | null> {
    const names = validateResourceList(resources, this.validateResource);
    const { ttlMs, waitMs, signal, watch, onAttempt } = this.validateAcquire(names[0]!, options, allowWait);
    this.throwIfClosed(); // at once: a closed coordinator's connections would only time out
    await this.nodes.started();
    signal?.throwIfAborted();
    this.throwIfClosed();
    const leaseId = newLeaseId();
    const outcome = await acquireWithin(this.acquireLoopContext(), {
      resources: names,
      leaseId,
      ttlMs,
      waitMs,
      signal,
      onAttempt,
    });
    if (outcome.kind === 'granted') {
      const signer = this.signer;
      const proofs =
        signer === undefined
          ? undefined
          : new Map([...outcome.grants].map(([r, grant]) => [r, signer.sign(r, grant.token, leaseId)]));
      return new GrantedMultiLease(this, leaseId, outcome.grants, proofs, {
        context: this.watchContext(),
        options: watch,
      });
    }
    if (!allowWait) return null;
    throw new LockedError(
      outcome.resource,
      `resource is locked by another holder (not granted within ${waitMs} ms; ${names.length} resources requested)`,
    );
  }

  /** Extend by id of a set: every resource against no deadline (the service does not know the lease's). */
  private async extendMany(
    resources: readonly string[],
    leaseId: string,
    ttlMs: number,
  ): Promise<MultiLease> {
    const names = validateResourceList(resources, this.validateResource);
    this.validateLeaseId(leaseId);
    this.validateTtl(ttlMs);
    const results = await Promise.allSettled(
      names.map((name) => this.extendLease(name, leaseId, ttlMs, undefined)),
    );
    const lost = results.find(
      (r): r is PromiseRejectedResult => r.status === 'rejected' && r.reason instanceof LeaseLostError,
    );
    if (lost !== undefined) {
      // One resource gone means the set is gone: free the others now rather than at their ttl.
      releaseEvery(names, (name) => this.releaseLease(name, leaseId)).catch(() => undefined);
      throw lost.reason;
    }
    const grants = new Map<string, LeaseGrant>();
    results.forEach((result, i) => {
      if (result.status === 'rejected') throw result.reason;
      grants.set(names[i]!, result.value);
    });
    const signer = this.signer;
    const proofs =
      signer === undefined
        ? undefined
        : new Map([...grants].map(([r, grant]) => [r, signer.sign(r, grant.token, leaseId)]));
    return new GrantedMultiLease(this, leaseId, grants, proofs);
  }

  private acquireLoopContext(): AcquireLoopContext {
    return {
      minValidityMs: this.settings.minValidityMs,
      retryDelayMs: this.settings.retryDelayMs,
      now: monotonicNow,
      keysOf: (resource) => this.keysOf(resource),
      attempt: (resource, keys, leaseId, ttlMs) => this.attempt(resource, keys, leaseId, ttlMs),
      undo: (keys, leaseId) => this.releaser.undoAttempt(keys, leaseId),
      subscribe: (channel, maxWaitMs, leaseId) => this.notifier.subscribe(channel, maxWaitMs, leaseId),
      jitter: () => this.jitter(),
      sleep: (ms) => sleep(ms),
      throwIfClosed: () => this.throwIfClosed(),
    };
  }

  private attempt(resource: string, keys: ResourceKeys, leaseId: string, ttlMs: number) {
    return attemptAcquire(
      this.nodes,
      { proposer: this.proposer, releaser: this.releaser, jitter: () => this.jitter() },
      { resource, keys, leaseId, ttlMs },
    );
  }

  // ---------------------------------------------------------------------------------------------------------
  // Small helpers

  /** A Lease for a grant, with its proof when this coordinator signs (DESIGN §4b). */
  private leaseOf(
    resource: string,
    leaseId: string,
    grant: LeaseGrant,
    watch: LeaseWatchOptions = {},
  ): GrantedLease {
    return new GrantedLease(
      this,
      resource,
      leaseId,
      grant,
      this.signer?.sign(resource, grant.token, leaseId),
      {
        context: this.watchContext(),
        options: watch,
      },
    );
  }

  private watchContext(): { retryDelayMs: number; live: Set<LeaseWatch> } {
    return { retryDelayMs: this.settings.retryDelayMs, live: this.watches };
  }

  private keysOf(resource: string): ResourceKeys {
    return resourceKeys(this.settings.keyPrefix, resource, this.settings.keyLayout);
  }

  /** A valid resource name that is not inside this coordinator's own namespace in the `'redlock'` key layout. */
  private readonly validateResource = (resource: unknown): string => {
    const name = validateResourceName(resource);
    if (resourceNameClash(this.settings.keyPrefix, name, this.settings.keyLayout)) {
      throw new InvalidRequestError(
        `resource must not start with "${this.settings.keyPrefix}:" under keyLayout 'redlock' (the lease key is the ` +
          `resource name itself, and that namespace holds the coordinator's own keys), got "${name.slice(0, 80)}" (string)`,
      );
    }
    return name;
  };

  private reportNodeError(node: number, operation: string, error: unknown): void {
    const address = this.nodes?.nodes[node]?.address ?? `node ${node}`;
    this.emit('nodeError', { node, address, operation, error });
  }

  private jitter(): number {
    return Math.random() * this.settings.retryJitterMs;
  }

  private throwIfClosed(): void {
    if (this.closing.signal.aborted) throw new CoordinatorClosedError();
  }

  private validateAcquire(
    resource: string,
    options: CoordinatorAcquireOptions | TryAcquireOptions,
    allowWait: boolean,
  ): {
    ttlMs: number;
    waitMs: number;
    signal: AbortSignal | undefined;
    watch: LeaseWatchOptions;
    onAttempt: ((report: AttemptReport) => void) | undefined;
  } {
    this.validateResource(resource);
    if (typeof options !== 'object' || options === null) {
      throw new InvalidRequestError('acquire options must be an object with ttlMs');
    }
    rejectMisnamedOptions('acquire', options, ACQUIRE_OPTION_NAMES);
    this.validateTtl(options.ttlMs);
    const rawWait: unknown = (options as AcquireOptions).waitMs;
    if (!allowWait && rawWait !== undefined)
      throw new InvalidRequestError('tryAcquire does not wait: drop waitMs');
    const waitMs = rawWait === undefined ? 0 : integer('waitMs', rawWait, { min: 0, max: MAX_TIMER_MS });
    const signal: unknown = options.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new InvalidRequestError('signal must be an AbortSignal');
    }
    const { autoExtend, onLost } = options as { autoExtend?: unknown; onLost?: unknown };
    if (autoExtend !== undefined && typeof autoExtend !== 'boolean') {
      throw new InvalidRequestError('autoExtend must be true or false');
    }
    if (onLost !== undefined && typeof onLost !== 'function') {
      throw new InvalidRequestError('onLost must be a function');
    }
    const onAttempt: unknown = options.onAttempt;
    if (onAttempt !== undefined && typeof onAttempt !== 'function') {
      throw new InvalidRequestError(
        `onAttempt must be a function (or left out), got ${onAttempt === null ? 'null' : typeof onAttempt}`,
      );
    }
    return {
      ttlMs: options.ttlMs,
      waitMs,
      signal,
      watch: { autoExtend: autoExtend === true, ...(onLost ? { onLost: options.onLost! } : {}) },
      onAttempt: options.onAttempt,
    };
  }

  private validateTtl(ttlMs: unknown): asserts ttlMs is number {
    integer('ttlMs', ttlMs, { min: smallestUsableTtlMs(this.settings), max: this.settings.maxTtlMs });
  }

  private validateLeaseId(leaseId: unknown): asserts leaseId is string {
    if (typeof leaseId !== 'string' || !LEASE_ID.test(leaseId)) {
      throw new InvalidRequestError('leaseId must be 16 to 128 characters of base64url (A-Z a-z 0-9 _ -)');
    }
  }
}

/** The acquire options: a key that only looks like one of them (`ttl`, `waitms`) is refused with the name meant. */
const ACQUIRE_OPTION_NAMES = ['ttlMs', 'waitMs', 'signal', 'autoExtend', 'onLost', 'onAttempt'] as const;

/** Runs `release` for every resource in parallel (nothing waits while holding); the first failure is thrown. */
async function releaseEvery(resources: readonly string[], release: (resource: string) => Promise<void>) {
  const results = await Promise.allSettled(resources.map(release));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
}
