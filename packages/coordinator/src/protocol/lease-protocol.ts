/**
 * The steps behind `Coordinator`'s verbs, over the parts it hands over once: acquire (the wait loop,
 * protocol/acquire-within.ts, over single attempts, protocol/acquire-attempt.ts), extend (protocol/extend.ts),
 * release (protocol/release.ts, waking waiters through protocol/waiters.ts) and inspect. A request comes in checked
 * (lease/validate-request.ts) and goes down to the nodes; nothing here calls back into the coordinator. The leases
 * it grants extend and release through it (`LeaseOperations`).
 *
 * Signing happens in one place, `leaseOf`: a proof is made only for grants a majority promised, once per grant,
 * and never changes on extension (DESIGN §4b; signing/lease-signer.ts).
 *
 * Tests that fail when this breaks: test/integration/coordinator/lease/lifecycle.test.ts and multi-lease.test.ts
 * (the verbs, all or nothing, extend and release by id), test/integration/service/signed-leases.test.ts (a proof on
 * every lease, kept by extend), test/integration/coordinator/lease/auto-extend.test.ts (close() stops every watch).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { LeaseLostError, LockedError } from '@fenced/shared';
import { CoordinatorClosedError } from '../errors.js';
import { GrantedLease, type Lease, type LeaseGrant, type LeaseOperations } from '../lease/lease.js';
import { closeAllWatches, type LeaseWatch, type LeaseWatchOptions } from '../lease/lease-watch.js';
import { GrantedMultiLease, type MultiLease } from '../lease/multi-lease.js';
import { newLeaseId } from '../lease/lease-ids.js';
import type { VotesSink } from '../lease/attempt-report.js';
import { validateTtl, type AcquireRequest } from '../lease/validate-request.js';
import type { NodeSet } from '../nodes/node-set.js';
import { resourceKeys, type ResourceKeys } from '../keys/key-layout.js';
import { monotonicNow } from '../quorum/validity.js';
import type { LeaseSigner } from '../signing/lease-signer.js';
import type { TokenProposer } from '../tokens/proposal.js';
import { attemptAcquire } from './acquire-attempt.js';
import { acquireWithin, type AcquireLoopContext } from './acquire-within.js';
import { extendOnQuorum } from './extend.js';
import { inspectOnQuorum } from './inspect.js';
import { releaseVotes } from './node-votes.js';
import type { Releaser } from './release.js';
import type { ReleaseNotifier } from './waiters.js';

/** What the steps run on; `closed` aborts when the owner closes. */
export interface LeaseProtocolParts {
  readonly nodes: NodeSet;
  readonly proposer: TokenProposer;
  readonly releaser: Releaser;
  readonly notifier: ReleaseNotifier;
  /** Signs every lease when the owner has a `signingKey`. */
  readonly signer: LeaseSigner | undefined;
  readonly closed: AbortSignal;
}

export class LeaseProtocol implements LeaseOperations {
  /** Watches of leases granted here that hold a timer (a keeper, an expiry timer): `close()` stops them. */
  private readonly watches = new Set<LeaseWatch>();

  constructor(private readonly parts: LeaseProtocolParts) {}

  /**
   * The lease over the request's resource (a `Lease`) or set (a `MultiLease`), or `null` for a tryAcquire that was
   * not granted.
   * @throws LockedError (naming the resource that blocked) when an acquire was not granted within `waitMs`
   */
  async acquire(request: AcquireRequest): Promise<Lease | MultiLease | null> {
    const { resources, waitMs, signal } = request;
    this.throwIfClosed(); // at once: a closed coordinator's connections would only time out
    await this.parts.nodes.started();
    signal?.throwIfAborted();
    this.throwIfClosed();
    // One id for every attempt of this acquire: a vote left by an earlier attempt is then a vote for us.
    const leaseId = newLeaseId();
    const outcome = await acquireWithin(this.loopContext(), {
      resources: typeof resources === 'string' ? [resources] : resources,
      leaseId,
      ttlMs: request.ttlMs,
      waitMs,
      signal,
      onAttempt: request.onAttempt,
    });
    if (outcome.kind === 'granted') return this.leaseOf(resources, leaseId, outcome.grants, request.watch);
    if (request.tryOnly) return null;
    throw new LockedError(
      outcome.resource,
      typeof resources === 'string'
        ? `resource is locked by another holder (not granted within ${waitMs} ms)`
        : `resource is locked by another holder (not granted within ${waitMs} ms; ${resources.length} resources requested)`,
    );
  }

  /**
   * Extend by id: every resource against no deadline (the service does not know the lease's). One resource of a
   * set lost means the set is lost: the others are released now rather than at their ttl.
   */
  async extend(
    resources: string | readonly string[],
    leaseId: string,
    ttlMs: number,
  ): Promise<Lease | MultiLease> {
    if (typeof resources === 'string') {
      const grant = await this.extendLease(resources, leaseId, ttlMs, undefined);
      return this.leaseOf(resources, leaseId, new Map([[resources, grant]]), {});
    }
    const results = await Promise.allSettled(
      resources.map((name) => this.extendLease(name, leaseId, ttlMs, undefined)),
    );
    const lost = results.find(
      (r): r is PromiseRejectedResult => r.status === 'rejected' && r.reason instanceof LeaseLostError,
    );
    if (lost !== undefined) {
      this.release(resources, leaseId).catch(() => undefined);
      throw lost.reason;
    }
    const grants = new Map<string, LeaseGrant>();
    results.forEach((result, i) => {
      if (result.status === 'rejected') throw result.reason;
      grants.set(resources[i]!, result.value);
    });
    return this.leaseOf(resources, leaseId, grants);
  }

  /** Releases every resource in parallel (nothing waits while holding); the first failure is thrown. */
  async release(resources: string | readonly string[], leaseId: string): Promise<void> {
    const names = typeof resources === 'string' ? [resources] : resources;
    const results = await Promise.allSettled(names.map((name) => this.releaseLease(name, leaseId)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
  }

  async inspect(resource: string): Promise<{ held: boolean; token?: bigint }> {
    await this.parts.nodes.started();
    return inspectOnQuorum(this.parts.nodes, this.keysOf(resource));
  }

  /** Compare-and-extend on a majority, finishing before `validUntil` when it is known. */
  async extendLease(
    resource: string,
    leaseId: string,
    ttlMs: number,
    validUntil: number | undefined,
    onVotes?: VotesSink,
  ): Promise<LeaseGrant> {
    const { nodes, releaser } = this.parts;
    validateTtl(nodes.settings, ttlMs);
    await nodes.started();
    this.throwIfClosed();
    return extendOnQuorum(
      nodes,
      releaser,
      { resource, keys: this.keysOf(resource), leaseId, ttlMs, validUntil },
      onVotes,
    );
  }

  /** Compare-and-delete everywhere; success once a majority confirmed it does not hold the lease. */
  async releaseLease(resource: string, leaseId: string, onVotes?: VotesSink): Promise<void> {
    const { nodes, releaser, notifier } = this.parts;
    await nodes.started();
    const keys = this.keysOf(resource);
    const releasing = releaser.everywhere(keys, leaseId);
    notifier.released(keys.channel, leaseId);
    const replies = await releasing;
    onVotes?.(replies.settled.then((settled) => releaseVotes(resource, settled)));
    if (replies.outcome === 'lost') {
      throw nodes.unavailable(
        'could not confirm the release on a majority of nodes; it is retried in the background, and the lease ' +
          'expires by itself within its ttl',
        replies.replies,
      );
    }
  }

  /** The owner is closing: kept and watched leases are lost (lease-watch.ts), background work stops. */
  async close(): Promise<void> {
    closeAllWatches(this.watches, new CoordinatorClosedError());
    this.parts.releaser.close();
    await this.parts.notifier.close();
  }

  /**
   * The lease for the grants of one resource (a `Lease`) or of a set (a `MultiLease`), each grant signed here, the
   * only place that signs (DESIGN §4b). Without `watch` the lease is not tracked (a set extended by id).
   */
  private leaseOf(
    resources: string | readonly string[],
    leaseId: string,
    grants: ReadonlyMap<string, LeaseGrant>,
    watch?: LeaseWatchOptions,
  ): Lease | MultiLease {
    const signer = this.parts.signer;
    const proofs =
      signer === undefined
        ? undefined
        : new Map([...grants].map(([r, grant]) => [r, signer.sign(r, grant.token, leaseId)]));
    const watching = watch && {
      context: { retryDelayMs: this.parts.nodes.settings.retryDelayMs, live: this.watches },
      options: watch,
    };
    if (typeof resources !== 'string') return new GrantedMultiLease(this, leaseId, grants, proofs, watching);
    return new GrantedLease(
      this,
      resources,
      leaseId,
      grants.get(resources)!,
      proofs?.get(resources),
      watching,
    );
  }

  /** What the wait loop runs on, with the settings of the moment (protocol/acquire-within.ts). */
  private loopContext(): AcquireLoopContext {
    const { nodes, proposer, releaser, notifier } = this.parts;
    const { minValidityMs, retryDelayMs, retryJitterMs } = nodes.settings;
    const jitter = () => Math.random() * retryJitterMs;
    return {
      minValidityMs,
      retryDelayMs,
      now: monotonicNow,
      keysOf: (resource) => this.keysOf(resource),
      attempt: (resource, keys, leaseId, ttlMs) =>
        attemptAcquire(nodes, { proposer, releaser, jitter }, { resource, keys, leaseId, ttlMs }),
      undo: (keys, leaseId) => releaser.undoAttempt(keys, leaseId),
      subscribe: (channel, maxWaitMs, leaseId) => notifier.subscribe(channel, maxWaitMs, leaseId),
      jitter,
      sleep: (ms) => sleep(ms),
      throwIfClosed: () => this.throwIfClosed(),
    };
  }

  private keysOf(resource: string): ResourceKeys {
    const { keyPrefix, keyLayout, holdRedlockKey } = this.parts.nodes.settings;
    return resourceKeys(keyPrefix, resource, keyLayout, holdRedlockKey);
  }

  private throwIfClosed(): void {
    if (this.parts.closed.aborted) throw new CoordinatorClosedError();
  }
}
