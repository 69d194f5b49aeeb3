import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import {
  InvalidRequestError,
  LeaseLostError,
  LockedError,
  QuorumUnavailableError,
  validateResourceName,
} from '@fenced/shared';
import { NodeTimeoutError, TokenExhaustedError } from './errors.js';
import { GrantedLease, type Lease, type LeaseGrant, type LeaseOperations } from './lease.js';
import { keepLeaseAlive } from './lease-keeper.js';
import { NodeConnection } from './nodes/node-connection.js';
import { readTokenRegisters } from './nodes/repair.js';
import {
  integer,
  MAX_TIMER_MS,
  resolveOptions,
  smallestUsableTtlMs,
  type CoordinatorOptions,
  type CoordinatorSettings,
} from './options.js';
import { newLeaseId } from './lease-ids.js';
import { incarnationKey, repairMarkerKey, resourceKeys, type ResourceKeys } from './redlock/keys.js';
import { fanOut, maxAgainst, quorumOf, type NodeReply } from './redlock/quorum.js';
import type { AcquireReply } from './redlock/script-results.js';
import { driftMs, monotonicNow, validityMs } from './redlock/validity.js';
import { createLeaseSigner, type LeaseSigner } from './signing/lease-signer.js';
import { TokenProposer } from './tokens/proposal.js';
import { ReleaseNotifier, type ReleaseSubscription } from './waiters.js';

export interface AcquireOptions {
  /** Lease time to live, an integer number of ms up to `maxTtlMs`. */
  ttlMs: number;
  /** How long to keep trying while another holder has the resource. @defaultValue `0` */
  waitMs?: number;
  /** Aborts the wait; the acquire then rejects with the signal's reason. */
  signal?: AbortSignal;
}

export type TryAcquireOptions = Omit<AcquireOptions, 'waitMs'>;

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
}

/** Payload of the `nodeError` event: a call to one node failed (timeout, connection, malformed reply, ...). */
export interface NodeErrorEvent {
  node: number;
  address: string;
  operation: string;
  error: unknown;
}

export interface CoordinatorEvents {
  nodeError: [NodeErrorEvent];
}

/** How many extra promise rounds an acquire may spend when its guess was refused (DESIGN §3). */
const MAX_PROMISE_ROUNDS = 4;
/** Background retries of a release on nodes that did not answer it (backoff from retryDelayMs, capped at 5 s). */
const RELEASE_RETRIES = 8;
const RELEASE_RETRY_MAX_DELAY_MS = 5_000;
/** How often nodes that do not vote are probed again (reconnected, reconfigured, repaired elsewhere). */
const RECHECK_INTERVAL_MS = 1_000;
const LEASE_ID = /^[A-Za-z0-9_-]{16,128}$/;

type AttemptResult =
  | { readonly kind: 'granted'; readonly lease: Lease }
  /** Not granted; `retryAfterMs` is when enough holders' keys expire, if known; `contended` if we won some votes. */
  | { readonly kind: 'failed'; readonly retryAfterMs: number | undefined; readonly contended: boolean }
  /** Too few votes from reachable nodes; `retryable` when slow (timed-out) nodes may answer next time. */
  | { readonly kind: 'unavailable'; readonly error: QuorumUnavailableError; readonly retryable?: boolean }
  | { readonly kind: 'exhausted' };

/**
 * Grants Redlock leases over N independent Redis masters, each with a fencing token from a quorum
 * max-register (DESIGN §2 and §3). Emits `nodeError` events ({ node, address, operation, error }).
 */
export class Coordinator extends EventEmitter<CoordinatorEvents> implements LeaseOperations {
  readonly quorum: number;
  readonly nodeCount: number;
  readonly settings: Readonly<CoordinatorSettings>;

  private readonly nodes: NodeConnection[];
  private readonly proposer = new TokenProposer();
  private readonly notifier: ReleaseNotifier;
  private readonly probeTimeoutMs: number;
  private readonly closing = new AbortController();
  private readonly repairs = new Map<number, Promise<void>>();
  private readonly repairProblems = new Map<number, string>();
  private startup: Promise<void> | undefined;
  private recheckTimer: NodeJS.Timeout | undefined;
  private readonly releaseRetries = new Set<NodeJS.Timeout>();
  private rechecking = false;
  /** Signs every lease when `signingKey` is set (DESIGN §4b); built before any connection exists. */
  private readonly signer: LeaseSigner | undefined;

  constructor(options: CoordinatorOptions) {
    super();
    this.settings = resolveOptions(options);
    this.signer = createLeaseSigner(options.signingKey);
    const nodes: unknown = options.nodes;
    if (!Array.isArray(nodes) || nodes.length === 0) {
      throw new InvalidRequestError('nodes must be a non-empty array of redis:// URLs or ioredis clients');
    }
    if (nodes.length > 99) throw new InvalidRequestError('nodes must hold at most 99 nodes');
    this.probeTimeoutMs = Math.max(1_000, this.settings.nodeTimeoutMs);
    this.nodes = [];
    try {
      const seen = new Map<string, number>();
      (nodes as Array<string | Redis>).forEach((node, index) => {
        const connection = new NodeConnection(
          index,
          node,
          this.settings.keyPrefix,
          (i, operation, error) => this.reportNodeError(i, operation, error),
          this.probeTimeoutMs,
        );
        this.nodes.push(connection);
        const earlier = seen.get(connection.identity);
        if (earlier !== undefined) {
          throw new InvalidRequestError(
            `nodes[${index}] duplicates nodes[${earlier}] (${connection.address}): each node must be a distinct Redis master`,
          );
        }
        seen.set(connection.identity, index);
      });
    } catch (error) {
      for (const node of this.nodes) if (node.owned) node.client.disconnect();
      throw error;
    }
    this.nodeCount = this.nodes.length;
    this.quorum = quorumOf(this.nodeCount);
    this.notifier = new ReleaseNotifier(this.nodes, this.probeTimeoutMs, (i, operation, error) =>
      this.reportNodeError(i, operation, error),
    );
  }

  // ---------------------------------------------------------------------------------------------------------
  // Public API

  /**
   * Runs the start-up checks once (CONFIG GET, INFO replication, incarnation keys; initializes a fresh cluster,
   * starts repairs of nodes that restarted empty). Every operation awaits it implicitly.
   * @throws QuorumUnavailableError when fewer than a quorum of nodes may vote; the message names each node's
   *   problems. The coordinator keeps re-checking in the background, so a later call may succeed.
   */
  async ready(): Promise<void> {
    await this.started();
    const voting = this.votingCount();
    if (voting < this.quorum) throw this.unavailable(`only ${voting} of ${this.nodeCount} nodes may vote`);
  }

  /**
   * Acquires a lease, waiting up to `waitMs` while another holder has it.
   * @throws LockedError when not granted within `waitMs`
   * @throws QuorumUnavailableError when no majority of nodes can vote: at once when a majority is unreachable or
   *   refused; when nodes are only slow (timeouts), after retrying within `waitMs`
   * @throws InvalidRequestError for a bad resource name, ttl or wait
   */
  async acquire(resource: string, options: AcquireOptions): Promise<Lease> {
    const { ttlMs, waitMs, signal } = this.validateAcquire(resource, options, true);
    const lease = await this.acquireWithin(resource, ttlMs, waitMs, signal);
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
  async tryAcquire(resource: string, options: TryAcquireOptions): Promise<Lease | null> {
    const { ttlMs, signal } = this.validateAcquire(resource, options, false);
    return this.acquireWithin(resource, ttlMs, 0, signal);
  }

  /**
   * Runs `fn` while holding the lease: extends it before expiry, aborts `signal` with a LeaseLostError when an
   * extension fails, and always releases. `fn`'s own error is never replaced by a release failure.
   */
  async using<T>(
    resource: string,
    options: AcquireOptions,
    fn: (lease: Lease, signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    if (typeof fn !== 'function')
      throw new InvalidRequestError('using needs a function to run under the lease');
    const lease = await this.acquire(resource, options);
    const keeper = keepLeaseAlive(lease, {
      retryDelayMs: this.settings.retryDelayMs,
      signal: options.signal,
    });
    try {
      return await fn(lease, keeper.signal);
    } finally {
      keeper.stop();
      // A failed release only delays the next holder by the remaining ttl; it must not mask fn's outcome.
      await lease.release().catch(() => undefined);
    }
  }

  /**
   * Extends a lease by id (for the HTTP service): compare-and-extend on a majority; the token is unchanged.
   * @throws LeaseLostError when the lease expired or another holder has the resource
   * @throws QuorumUnavailableError when too few nodes answered to tell
   */
  async extend(resource: string, leaseId: string, ttlMs: number): Promise<Lease> {
    validateResourceName(resource);
    this.validateLeaseId(leaseId);
    this.validateTtl(ttlMs);
    const grant = await this.extendLease(resource, leaseId, ttlMs, undefined);
    return new GrantedLease(
      this,
      resource,
      leaseId,
      grant,
      this.signer?.sign(resource, grant.token, leaseId),
    );
  }

  /**
   * Releases a lease by id: compare-and-delete on every node. An expired or unknown lease is a success.
   * @throws QuorumUnavailableError when fewer than a quorum of nodes confirmed (the lease then expires by itself)
   */
  async release(resource: string, leaseId: string): Promise<void> {
    validateResourceName(resource);
    this.validateLeaseId(leaseId);
    await this.releaseLease(resource, leaseId);
  }

  /** Whether a majority of nodes holds a lease on the resource, and its token. Never returns a lease id. */
  async inspect(resource: string): Promise<{ held: boolean; token?: bigint }> {
    validateResourceName(resource);
    await this.started();
    const keys = resourceKeys(this.settings.keyPrefix, resource);
    const timeout = this.settings.nodeTimeoutMs;
    const inc = incarnationKey(this.settings.keyPrefix);
    const result = await fanOut(
      this.votingCalls((node) => node.script('inspect', timeout, [keys.lease, inc], [])),
      (reply) => reply.kind === 'view' && reply.held,
    );
    this.noteAbstentions(result.replies);
    if (result.outcome === 'won') {
      let token: bigint | undefined;
      for (const reply of result.replies) {
        if (reply.state === 'ok' && reply.value.kind === 'view' && reply.value.token !== null) {
          if (token === undefined || reply.value.token > token) token = reply.value.token;
        }
      }
      return token === undefined ? { held: true } : { held: true, token };
    }
    const answered = result.replies.filter((r) => r.state === 'ok' && r.value.kind === 'view').length;
    const undecided = result.replies.filter((r) => r.state === 'pending').length;
    if (answered + undecided < this.quorum)
      throw this.unavailable('could not read a majority of nodes', result.replies);
    return { held: false };
  }

  /** Probes every node now (for `/readyz`): one entry per node, in node order. */
  async nodeStatus(): Promise<NodeStatus[]> {
    await this.started();
    await Promise.all(this.nodes.map((node) => node.probe(this.probeTimeoutMs)));
    await this.afterProbe();
    return this.nodes.map((node) => this.statusOf(node));
  }

  /**
   * Repairs a node that restarted empty (DESIGN §3): copies, for every token register found on at least
   * `N − quorum + 1` initialized nodes, the highest value into it, sits out `maxTtlMs`, then lets it vote.
   * Runs in the background on its own when such a node is detected; this returns the running repair.
   */
  repairNode(index: number): Promise<void> {
    integer('node index', index, { min: 0, max: this.nodeCount - 1 });
    const running = this.repairs.get(index);
    if (running !== undefined) return running;
    const node = this.nodes[index]!;
    const repair = this.runRepair(node).finally(() => this.repairs.delete(index));
    this.repairs.set(index, repair);
    return repair;
  }

  /** Stops background work, unsubscribes, and closes the clients this coordinator created. */
  async close(): Promise<void> {
    if (this.closing.signal.aborted) return;
    this.closing.abort(new QuorumUnavailableError('the coordinator is closed'));
    if (this.recheckTimer !== undefined) clearInterval(this.recheckTimer);
    for (const timer of this.releaseRetries) clearTimeout(timer);
    this.releaseRetries.clear();
    await Promise.allSettled([...this.repairs.values()]);
    await this.notifier.close();
    await Promise.all(this.nodes.map((node) => node.close()));
  }

  // ---------------------------------------------------------------------------------------------------------
  // Acquire (DESIGN §2 with the token promise of §3 folded in)

  private async acquireWithin(
    resource: string,
    ttlMs: number,
    waitMs: number,
    signal: AbortSignal | undefined,
  ): Promise<Lease | null> {
    await this.started();
    signal?.throwIfAborted();
    this.throwIfClosed();
    const keys = resourceKeys(this.settings.keyPrefix, resource);
    // One id for every attempt of this acquire: a vote left by an earlier attempt is then a vote for us.
    const leaseId = newLeaseId();
    const deadline = monotonicNow() + waitMs;
    let subscription: ReleaseSubscription | undefined;
    let granted = false;
    try {
      for (;;) {
        let result = await this.attempt(resource, keys, leaseId, ttlMs);
        let unavailable: QuorumUnavailableError | undefined;
        switch (result.kind) {
          case 'granted':
            granted = true;
            return result.lease;
          case 'unavailable':
            // A majority definitely unreachable (refused connections, non-voting nodes) fails fast; slow nodes
            // that timed out may answer the next attempt, so those are retried while the wait lasts.
            if (result.retryable !== true) throw result.error;
            unavailable = result.error;
            result = { kind: 'failed', retryAfterMs: undefined, contended: false };
            break;
          case 'exhausted':
            throw new TokenExhaustedError(resource);
          case 'failed':
            break;
        }
        signal?.throwIfAborted();
        this.throwIfClosed();
        const remaining = deadline - monotonicNow();
        if (remaining <= 0) {
          if (unavailable !== undefined) throw unavailable;
          return null;
        }
        if (subscription === undefined) {
          subscription = await this.notifier.subscribe(keys.channel, remaining);
          // Try again at once: a release between the failed attempt and the subscription sent no message we heard.
          continue;
        }
        const fallback = result.retryAfterMs ?? this.settings.retryDelayMs + this.jitter();
        const woken = await subscription.wait(Math.min(fallback, remaining), signal, this.closing.signal);
        signal?.throwIfAborted();
        this.throwIfClosed();
        // A split vote means several contenders: spread their retries. A plain hand-over retries at once.
        if (woken && result.contended)
          await sleep(Math.min(this.jitter(), Math.max(0, deadline - monotonicNow())));
      }
    } finally {
      subscription?.close(granted);
    }
  }

  private async attempt(
    resource: string,
    keys: ResourceKeys,
    leaseId: string,
    ttlMs: number,
  ): Promise<AttemptResult> {
    const guess = this.proposer.firstGuess(resource);
    if (guess === null) return { kind: 'exhausted' };
    const start = monotonicNow();
    // A vote that arrives after ttl − drift − minValidity can no longer make a usable lease, so waiting longer
    // for it is pointless; a generous nodeTimeoutMs therefore never outlasts a short lease.
    const usableMs = ttlMs - driftMs(ttlMs, this.settings.driftFactor) - this.settings.minValidityMs;
    const timeout = Math.max(1, Math.min(this.settings.nodeTimeoutMs, usableMs));
    const result = await fanOut(
      this.votingCalls((node) => node.acquire(timeout, keys, leaseId, ttlMs, guess)),
      (reply) => reply.kind === 'granted',
    );
    this.noteAbstentions(result.replies);
    let granted = 0;
    let promised = 0;
    const heldTtls: number[] = [];
    for (const reply of result.replies) {
      if (reply.state !== 'ok') continue;
      const value: AcquireReply = reply.value;
      if (value.kind === 'granted') {
        granted++;
        if (value.promised) promised++;
        this.proposer.observe(resource, value.promised ? guess : value.cur);
      } else if (value.kind === 'held') {
        this.proposer.observe(resource, value.cur);
        if (value.pttlMs >= 0) heldTtls.push(value.pttlMs);
      }
    }

    if (result.outcome === 'lost') {
      // Partial grants — and, when some replies are still out, any node at all — may hold our id: release
      // before the next attempt so a failed attempt never blocks others (DESIGN §2.4).
      await this.releaseAttempt(keys, leaseId);
      // Classify from every node's final reply, not the snapshot at the decision: nodes still silent then (a
      // partition, a hang) would otherwise read as "held by another", and a majority cut off would end a wait
      // in LOCKED instead of QUORUM_UNAVAILABLE. The release above already waited out the same per-node bound.
      const replies = await result.settled;
      const unavailable = replies.filter(
        (r) =>
          r.state === 'error' ||
          (r.state === 'ok' && (r.value.kind === 'not-initialized' || r.value.kind === 'corrupt')),
      ).length;
      if (unavailable > maxAgainst(this.nodeCount)) {
        const timedOut = replies.filter(
          (r) => r.state === 'error' && r.error instanceof NodeTimeoutError,
        ).length;
        return {
          kind: 'unavailable',
          error: this.unavailable('no majority of nodes could vote', replies),
          retryable: unavailable - timedOut <= maxAgainst(this.nodeCount),
        };
      }
      heldTtls.sort((a, b) => a - b);
      // The next attempt can win once `quorum − granted` more holders' keys have expired.
      const needed = this.quorum - granted;
      const retryAfterMs =
        needed >= 1 && heldTtls.length >= needed ? heldTtls[needed - 1]! + 1 + this.jitter() : undefined;
      return { kind: 'failed', retryAfterMs, contended: granted > 0 };
    }

    // The lease won a majority. The token is valid only if a majority also promised it (DESIGN §3).
    let token = guess;
    if (promised < this.quorum) {
      const second = await this.promiseRounds(resource, keys, leaseId, guess);
      if (second.kind !== 'promised') {
        await this.releaseAttempt(keys, leaseId);
        return second.kind === 'unavailable'
          ? second
          : second.kind === 'exhausted'
            ? second
            : { kind: 'failed', retryAfterMs: undefined, contended: true };
      }
      token = second.token;
    }

    // Validity from the start of this (winning) attempt, after every round trip it needed (DESIGN §2.3).
    const validity = validityMs(ttlMs, monotonicNow() - start, this.settings.driftFactor);
    if (validity <= this.settings.minValidityMs) {
      // Too little left to be useful — or already expired: never hand that out. Counts as a failed attempt.
      await this.releaseAttempt(keys, leaseId);
      // Not "locked": the nodes were too slow for this ttl. Retried while the wait lasts, reported as 503.
      return {
        kind: 'unavailable',
        retryable: true,
        error: new QuorumUnavailableError(
          `quorum unavailable: the nodes answered too slowly for a ${ttlMs} ms ttl (validity left ${validity} ms, ` +
            `minValidityMs is ${this.settings.minValidityMs}); retry, or use a longer ttl`,
        ),
      };
    }
    const grant: LeaseGrant = {
      token,
      ttlMs,
      validityMs: validity,
      validUntil: start + ttlMs - driftMs(ttlMs, this.settings.driftFactor),
    };
    return {
      kind: 'granted',
      lease: new GrantedLease(this, resource, leaseId, grant, this.signer?.sign(resource, token, leaseId)),
    };
  }

  /**
   * Second (and later) token rounds: propose above every register value seen, until a majority promises.
   * Bounded: contention here means other holders minted tokens in between, and the caller retries the lease.
   */
  private async promiseRounds(
    resource: string,
    keys: ResourceKeys,
    leaseId: string,
    refused: bigint,
  ): Promise<
    | { kind: 'promised'; token: bigint }
    | { kind: 'contended' }
    | { kind: 'exhausted' }
    | { kind: 'unavailable'; error: QuorumUnavailableError; retryable: boolean }
  > {
    const timeout = this.settings.nodeTimeoutMs;
    const inc = incarnationKey(this.settings.keyPrefix);
    let previous = refused;
    for (let round = 0; round < MAX_PROMISE_ROUNDS; round++) {
      const proposal = this.proposer.nextAbove(resource, previous);
      if (proposal === null) return { kind: 'exhausted' };
      previous = proposal;
      const result = await fanOut(
        this.votingCalls((node) =>
          node.script('promise', timeout, [keys.lease, keys.token, inc], [leaseId, proposal.toString()]),
        ),
        (reply) => reply.kind === 'promised',
      );
      this.noteAbstentions(result.replies);
      for (const reply of result.replies) {
        if (reply.state === 'ok' && (reply.value.kind === 'promised' || reply.value.kind === 'refused')) {
          this.proposer.observe(resource, reply.value.cur);
        }
      }
      if (result.outcome === 'won') return { kind: 'promised', token: proposal };
      const answered = result.replies.filter(
        (r) => r.state === 'ok' && (r.value.kind === 'promised' || r.value.kind === 'refused'),
      ).length;
      const pending = result.replies.filter((r) => r.state === 'pending').length;
      if (answered + pending < this.quorum) {
        return {
          kind: 'unavailable',
          error: this.unavailable('no majority of nodes answered the token promise', result.replies),
          // A majority just granted the lease, so the nodes are there: most likely slow, worth another attempt.
          retryable: true,
        };
      }
    }
    return { kind: 'contended' };
  }

  // ---------------------------------------------------------------------------------------------------------
  // Extend and release (LeaseOperations)

  /** @internal Compare-and-extend on a majority, finishing before `validUntil` when it is known. */
  async extendLease(
    resource: string,
    leaseId: string,
    ttlMs: number,
    validUntil: number | undefined,
  ): Promise<LeaseGrant> {
    this.validateTtl(ttlMs);
    await this.started();
    this.throwIfClosed();
    const keys = resourceKeys(this.settings.keyPrefix, resource);
    const inc = incarnationKey(this.settings.keyPrefix);
    const start = monotonicNow();
    // Within the remaining validity: a reply after the lease ended proves nothing, so do not wait for it.
    const timeout = Math.min(
      this.settings.nodeTimeoutMs,
      validUntil === undefined ? Infinity : validUntil - start,
    );
    if (timeout <= 0) throw new LeaseLostError(resource, 'the lease expired before it was extended');
    const result = await fanOut(
      this.votingCalls((node) =>
        node.script('extend', Math.ceil(timeout), [keys.lease, inc], [leaseId, ttlMs]),
      ),
      (reply) => reply.kind === 'extended',
    );
    this.noteAbstentions(result.replies);
    const now = monotonicNow();
    if (result.outcome === 'won') {
      if (validUntil !== undefined && now > validUntil) {
        this.releaseInBackground(keys, leaseId);
        throw new LeaseLostError(resource, 'the extension completed only after the lease had expired');
      }
      let token: bigint | null = null;
      for (const reply of result.replies) {
        if (reply.state === 'ok' && reply.value.kind === 'extended' && reply.value.token !== null) {
          if (token === null || reply.value.token > token) token = reply.value.token;
        }
      }
      const validity = validityMs(ttlMs, now - start, this.settings.driftFactor);
      if (token === null || validity <= 0) {
        this.releaseInBackground(keys, leaseId);
        throw new LeaseLostError(resource, 'the extension left no validity');
      }
      return {
        token,
        ttlMs,
        validityMs: validity,
        validUntil: start + ttlMs - driftMs(ttlMs, this.settings.driftFactor),
      };
    }
    const unavailable = result.replies.filter(
      (r) => r.state === 'error' || (r.state === 'ok' && r.value.kind === 'not-initialized'),
    ).length;
    if (unavailable > maxAgainst(this.nodeCount)) {
      throw this.unavailable('could not reach a majority of nodes to extend the lease', result.replies);
    }
    // Had it and lost it (expired, or another holder took over): distinct from never getting it.
    this.releaseInBackground(keys, leaseId);
    throw new LeaseLostError(resource);
  }

  /** @internal Compare-and-delete everywhere; success once a majority confirmed it does not hold the lease. */
  async releaseLease(resource: string, leaseId: string): Promise<void> {
    await this.started();
    const keys = resourceKeys(this.settings.keyPrefix, resource);
    const releasing = this.releaseEverywhere(keys, leaseId);
    this.notifier.released(keys.channel, leaseId);
    const replies = await releasing;
    if (replies.outcome === 'lost') {
      throw this.unavailable(
        'could not confirm the release on a majority of nodes; it is retried in the background, and the lease ' +
          'expires by itself within its ttl',
        replies.replies,
      );
    }
  }

  /** One release round on every node; nodes that do not answer it are retried in the background. */
  private releaseEverywhere(keys: ResourceKeys, leaseId: string) {
    const result = this.releaseOn(this.nodes, keys, leaseId);
    void result.then(({ settled }) =>
      settled.then((replies) =>
        this.retryReleaseLater(this.failedNodes(this.nodes, replies), keys, leaseId, 0),
      ),
    );
    return result;
  }

  /**
   * Keeps releasing, with backoff, on the nodes whose release failed (unreachable, timed out, reset): the lease key
   * left on such a node would otherwise refuse that node's vote to the next holder until the ttl ends. It is
   * compare-and-delete by lease id, so a late retry never touches a successor's lease (F11); it gives up after
   * {@link RELEASE_RETRIES} tries (the ttl ends it anyway) and when the coordinator closes.
   */
  private retryReleaseLater(
    nodes: readonly NodeConnection[],
    keys: ResourceKeys,
    leaseId: string,
    attempt: number,
  ): void {
    if (nodes.length === 0 || attempt >= RELEASE_RETRIES || this.closing.signal.aborted) return;
    const delay = Math.min(this.settings.retryDelayMs * 2 ** attempt, RELEASE_RETRY_MAX_DELAY_MS);
    const timer = setTimeout(() => {
      this.releaseRetries.delete(timer);
      void this.releaseOn(nodes, keys, leaseId)
        .then(({ settled }) => settled)
        .then((replies) =>
          this.retryReleaseLater(this.failedNodes(nodes, replies), keys, leaseId, attempt + 1),
        );
    }, delay);
    timer.unref();
    this.releaseRetries.add(timer);
  }

  private failedNodes(
    nodes: readonly NodeConnection[],
    replies: readonly NodeReply<unknown>[],
  ): NodeConnection[] {
    return nodes.filter((_, i) => replies[i]?.state === 'error');
  }

  /** One release round on these nodes (voting or not: a node that stopped voting may still hold our key). */
  private releaseOn(nodes: readonly NodeConnection[], keys: ResourceKeys, leaseId: string) {
    const timeout = this.settings.nodeTimeoutMs;
    return fanOut(
      nodes.map((node) => () => node.release(timeout, keys, leaseId)),
      () => true,
    );
  }

  /**
   * Undoes a failed attempt: compare-and-delete on every node, waiting for every reply (each bounded by the node
   * timeout), so that neither the next attempt nor the caller sees our partial grants left on reachable nodes.
   */
  private async releaseAttempt(keys: ResourceKeys, leaseId: string): Promise<void> {
    const timeout = this.settings.nodeTimeoutMs;
    await Promise.allSettled(this.nodes.map((node) => node.release(timeout, keys, leaseId)));
  }

  private releaseInBackground(keys: ResourceKeys, leaseId: string): void {
    this.releaseEverywhere(keys, leaseId).catch(() => undefined);
  }

  // ---------------------------------------------------------------------------------------------------------
  // Nodes: start-up checks, fresh initialization, restart repair

  private started(): Promise<void> {
    this.startup ??= this.start();
    return this.startup;
  }

  private async start(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.probe(this.probeTimeoutMs, { waitForConnection: true })));
    for (const node of this.nodes) {
      const problems = node.lastProbe?.configProblems ?? [];
      if (problems.length > 0) {
        const verdict = this.settings.unsafeAllowUnsafeNodes
          ? 'accepted (unsafeAllowUnsafeNodes)'
          : 'refused';
        this.reportNodeError(
          node.index,
          'check',
          new Error(`node ${node.address} ${verdict}: ${problems.join('; ')}`),
        );
      }
    }
    await this.afterProbe();
    this.recheckTimer = setInterval(() => void this.recheck(), RECHECK_INTERVAL_MS);
    this.recheckTimer.unref();
  }

  /** Probes nodes that do not vote, so they rejoin when reachable, reconfigured or repaired. */
  private async recheck(): Promise<void> {
    if (this.rechecking || this.closing.signal.aborted) return;
    this.rechecking = true;
    try {
      const idle = this.nodes.filter(
        (n) => !n.isVoting(this.settings.unsafeAllowUnsafeNodes) && !this.repairs.has(n.index),
      );
      if (idle.length === 0) return;
      await Promise.all(idle.map((node) => node.probe(this.probeTimeoutMs)));
      await this.afterProbe();
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
    if (this.closing.signal.aborted) return;
    const uninitialized = this.nodes.filter(
      (n) => !n.initialized && n.lastProbe?.reachable === true && this.configAccepted(n),
    );
    if (uninitialized.length === 0) return;
    if (await this.nothingToLose()) {
      // Every node is reachable and none holds a lease or a token register: there is no state a node could
      // have lost, so initializing the uninitialized ones is safe (a brand-new cluster, or several coordinators
      // initializing it at once). A lease or register created after this probe cannot involve an uninitialized
      // node, because its scripts refuse to vote. With any node unreachable, its registers might be the only
      // copy: then nothing is initialized, and nodes that lost state are repaired instead.
      const inc = incarnationKey(this.settings.keyPrefix);
      await Promise.all(
        uninitialized.map(async (node) => {
          try {
            await node.call('initialize', this.probeTimeoutMs, (c) => c.set(inc, randomUUID(), 'NX'));
            node.initialized = true;
          } catch {
            // stays non-voting; the next re-check tries again
          }
        }),
      );
      return;
    }
    if (!this.nodes.some((n) => n.initialized)) return;
    for (const node of uninitialized) {
      if (!this.repairs.has(node.index)) this.repairNode(node.index).catch(() => undefined);
    }
  }

  /** Every node reachable, and none holds a lease or token register. */
  private async nothingToLose(): Promise<boolean> {
    if (!this.nodes.every((n) => n.lastProbe?.reachable === true)) return false;
    try {
      const found = await Promise.all(this.nodes.map((n) => n.hasResourceKeys(this.probeTimeoutMs)));
      return !found.includes(true);
    } catch {
      return false;
    }
  }

  /** A script said NOT_INITIALIZED: the node restarted empty. It stops voting until repaired. */
  private noteAbstentions(replies: readonly NodeReply<{ kind: string }>[]): void {
    replies.forEach((reply, index) => {
      if (reply.state !== 'ok') return;
      const node = this.nodes[index]!;
      if (reply.value.kind === 'not-initialized' && node.initialized) {
        node.initialized = false;
        this.reportNodeError(
          index,
          'vote',
          new Error(
            `node ${node.address} has no incarnation key: it restarted empty and must be repaired before it votes`,
          ),
        );
        if (!this.closing.signal.aborted) this.repairNode(index).catch(() => undefined);
      } else if (reply.value.kind === 'corrupt') {
        this.reportNodeError(
          index,
          'vote',
          new Error(`node ${node.address} holds a token register that is not a decimal token`),
        );
      }
    });
  }

  private async runRepair(node: NodeConnection): Promise<void> {
    const prefix = this.settings.keyPrefix;
    const marker = repairMarkerKey(prefix);
    const repairId = randomUUID();
    const timeout = this.probeTimeoutMs;
    node.repairStatus = 'restarted empty: repair starting';
    try {
      // Any N − quorum + 1 nodes meet every majority that promised a token (together with the empty node they
      // cover all N), so their maximum is at least every token granted before the repair read them.
      const required = this.nodeCount - this.quorum + 1;
      const sources = this.nodes.filter(
        (n) => n !== node && n.isVoting(this.settings.unsafeAllowUnsafeNodes),
      );
      if (sources.length < required) {
        throw new Error(`needs ${required} voting nodes to copy token registers from, has ${sources.length}`);
      }
      const claimed = await node.call('repair', timeout, (c) =>
        c.set(marker, repairId, 'PX', this.settings.maxTtlMs + 60_000, 'NX'),
      );
      if (claimed !== 'OK') throw new Error('another process is repairing this node');
      // Initialized meanwhile (by another coordinator, or our view was stale): nothing to repair.
      if ((await node.call('repair', timeout, (c) => c.exists(incarnationKey(prefix)))) === 1) {
        await node.call('repair', timeout, (c) => c.del(marker)).catch(() => undefined);
        node.initialized = true;
        this.repairProblems.delete(node.index);
        return;
      }
      const maxima = new Map<string, bigint>();
      let answered = 0;
      await Promise.all(
        sources.map(async (source) => {
          try {
            const registers = await readTokenRegisters(source, prefix, timeout);
            for (const [key, value] of registers) {
              const known = maxima.get(key);
              if (known === undefined || value > known) maxima.set(key, value);
            }
            answered++;
          } catch (error) {
            this.reportNodeError(source.index, 'repair-read', error);
          }
        }),
      );
      if (answered < required)
        throw new Error(`only ${answered} of the ${required} nodes needed could be read`);
      node.repairStatus = `restarted empty: copying ${maxima.size} token registers`;
      const entries = [...maxima];
      for (let i = 0; i < entries.length; i += 100) {
        await Promise.all(
          entries.slice(i, i + 100).map(async ([key, value]) => {
            const reply = await node.script(
              'repair-token',
              timeout,
              [key, marker],
              [value.toString(), repairId],
            );
            if (reply.kind !== 'raised') throw new Error(`copying ${key} failed: ${reply.kind}`);
          }),
        );
      }
      // Leases granted with this node's vote before it lost them may still be live elsewhere: sit out the
      // longest ttl so they have all expired before this node votes again (Redlock's delayed restart).
      const until = new Date(Date.now() + this.settings.maxTtlMs);
      node.repairStatus = `restarted empty: token registers repaired; sits out until ${until.toISOString()} (maxTtlMs) before voting`;
      await sleep(this.settings.maxTtlMs, undefined, { signal: this.closing.signal });
      const finished = await node.script(
        'finish-repair',
        timeout,
        [marker, incarnationKey(prefix)],
        [repairId, randomUUID()],
      );
      if (finished.kind !== 'finished') throw new Error('the node restarted again during the repair');
      node.initialized = true;
      this.repairProblems.delete(node.index);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.repairProblems.set(node.index, `restarted empty and not repaired yet: ${message}`);
      if (!this.closing.signal.aborted) this.reportNodeError(node.index, 'repair', error);
      throw error;
    } finally {
      node.repairStatus = undefined;
    }
  }

  private statusOf(node: NodeConnection): NodeStatus {
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
    else if (!node.initialized && probe?.reachable) {
      problems.push(
        this.repairProblems.get(node.index) ??
          (this.nodes.some((n) => n.initialized)
            ? 'restarted empty (no incarnation key): waiting for repair'
            : 'not initialized: a fresh cluster is initialized once all nodes are reachable and empty'),
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
    return status;
  }

  // ---------------------------------------------------------------------------------------------------------
  // Small helpers

  /** One call per node in node order; `null` (no call, a vote against) for nodes that may not vote. */
  private votingCalls<T>(call: (node: NodeConnection) => Promise<T>): ((() => Promise<T>) | null)[] {
    return this.nodes.map((node) =>
      node.isVoting(this.settings.unsafeAllowUnsafeNodes) ? () => call(node) : null,
    );
  }

  private votingCount(): number {
    return this.nodes.filter((n) => n.isVoting(this.settings.unsafeAllowUnsafeNodes)).length;
  }

  private unavailable(
    summary: string,
    replies?: readonly NodeReply<{ kind: string }>[],
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
      `quorum unavailable: ${summary} (quorum is ${this.quorum} of ${this.nodeCount})${detail ? `: ${detail}` : ''}`,
      reasons,
    );
  }

  private reportNodeError(node: number, operation: string, error: unknown): void {
    const address = this.nodes[node]?.address ?? `node ${node}`;
    this.emit('nodeError', { node, address, operation, error });
  }

  private jitter(): number {
    return Math.random() * this.settings.retryJitterMs;
  }

  private throwIfClosed(): void {
    if (this.closing.signal.aborted) throw new QuorumUnavailableError('the coordinator is closed');
  }

  private validateAcquire(
    resource: string,
    options: AcquireOptions | TryAcquireOptions,
    allowWait: boolean,
  ): { ttlMs: number; waitMs: number; signal: AbortSignal | undefined } {
    validateResourceName(resource);
    if (typeof options !== 'object' || options === null) {
      throw new InvalidRequestError('acquire options must be an object with ttlMs');
    }
    this.validateTtl(options.ttlMs);
    const rawWait: unknown = (options as AcquireOptions).waitMs;
    if (!allowWait && rawWait !== undefined)
      throw new InvalidRequestError('tryAcquire does not wait: drop waitMs');
    const waitMs = rawWait === undefined ? 0 : integer('waitMs', rawWait, { min: 0, max: MAX_TIMER_MS });
    const signal: unknown = options.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new InvalidRequestError('signal must be an AbortSignal');
    }
    return { ttlMs: options.ttlMs, waitMs, signal };
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
