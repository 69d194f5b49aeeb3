/**
 * The wait loop of every acquire, one resource or several: one lease over the request's resources, all or nothing.
 * A one-resource acquire is the case of a set of one (each round is then a single attempt).
 *
 * A round acquires the resources one after another in one fixed order — sorted by UTF-8 bytes, without repeats
 * (`lockOrder`), the same in every process — each with a single attempt of the one-resource protocol
 * (protocol/acquire-attempt.ts, unchanged: its lease vote, token promise and validity arguments hold per resource).
 * The first resource that is not granted ends the round: every grant the round made is released at once, and
 * only then does the caller wait (woken by the release of the resource that blocked it, with a timed fallback,
 * bounded by `waitMs`) and start a new round from the first resource.
 *
 * The first round of an acquire that may wait (`waitMs` > 0) over several resources is **optimistic**: it makes
 * every resource's attempt at once (one batch per node, so one round trip for the whole set instead of one per
 * resource, and every grant's validity starts at the same moment) and counts as failed unless every resource was
 * granted; the blocking resource is then the first one in lock order that was not. Every later round, and every
 * round of a `tryAcquire`, is ordered as above.
 *
 * Safety:
 * 1. All or nothing: a round returns a lease only when every resource was granted; on any other outcome — a
 *    resource held, too few nodes, token exhaustion, an exception — it awaits the release of every grant it made
 *    before returning or throwing, so no partial grant outlives the round on a reachable node (an unreachable one
 *    keeps the key for at most the ttl, as in the one-resource protocol).
 * 2. Validity of the set is the smallest validity of its grants: the first resource's attempt started earliest,
 *    so it usually expires first. A set whose smallest validity is at or below `minValidityMs` is released and the
 *    round counts as failed, exactly like a one-resource lease: nobody gets a set that has already expired.
 * 3. Tokens are per resource, each from that resource's own quorum max-register, so G2 holds per resource.
 *
 * Liveness:
 * 4. No deadlock: a process never waits while it holds anything — waiting happens only after the round's grants
 *    were released — so no cycle of "holds X, waits for Y" can form (the hold-and-wait condition never holds).
 * 5. No livelock between overlapping sets: all rounds but an acquire's first take resources in the same order (the
 *    optimistic first round can fail for two overlapping requests at once, each holding part of the other's set,
 *    but it is one round per acquire call: both release everything before waiting and go on in order, as below), so
 *    a process can hold a
 *    resource only if it won every smaller resource of its set in the same round. Two requests for {A, B} and
 *    {B, A} both start with A; the one that loses A holds nothing and never touches B, so the winner of A cannot
 *    be refused B by it. In general, among contenders for overlapping sets, the holder of the smallest contended
 *    resource cannot be blocked by any of them on a larger one it needs unless that one also won all of its
 *    smaller resources; the chain of blockers is ordered by resource and ends. Retries of the losers are spread
 *    by jitter, and the one-resource protocol's own split votes are handled there.
 *
 * Tests that fail when this breaks: test/integration/coordinator/lease/multi-lease.test.ts (overlapping sets are
 * exclusive; A,B vs B,A all finish within their waits; no partial grant is left after a failure or a timeout).
 */
import { QuorumUnavailableError } from '@fenced/shared';
import { TokenExhaustedError } from '../errors.js';
import type { LeaseGrant } from '../lease/lease.js';
import type { ResourceKeys } from '../keys/key-layout.js';
import type { ReleaseSubscription } from './waiters.js';
import type { AttemptResult } from './acquire-attempt.js';
import { reportAttempt, type AttemptReportOptions, type NodeVote } from '../lease/attempt-report.js';

/** What the wait loop needs from the coordinator, and nothing more. */
export interface AcquireLoopContext {
  readonly minValidityMs: number;
  readonly retryDelayMs: number;
  /** Monotonic clock. */
  now(): number;
  keysOf(resource: string): ResourceKeys;
  /** One attempt of the one-resource protocol. */
  attempt(resource: string, keys: ResourceKeys, leaseId: string, ttlMs: number): Promise<AttemptResult>;
  /** Compare-and-delete of this lease id on every node, waiting for each reply (bounded by the node timeout). */
  undo(keys: ResourceKeys, leaseId: string): Promise<void>;
  /** Waits for releases on `channel`; a release of `leaseId` (this wait's own undo) does not wake it. */
  subscribe(channel: string, maxWaitMs: number, leaseId: string): Promise<ReleaseSubscription>;
  jitter(): number;
  sleep(ms: number): Promise<void>;
  throwIfClosed(): void;
}

export interface AcquireLoopRequest {
  /** In lock order (see `lockOrder`). */
  readonly resources: readonly string[];
  readonly leaseId: string;
  readonly ttlMs: number;
  readonly waitMs: number;
  readonly signal: AbortSignal | undefined;
  /** Called after every round with each node's votes in it (lease/attempt-report.ts); what it throws is ignored. */
  readonly onAttempt?: AttemptReportOptions['onAttempt'];
}

export type AcquireLoopOutcome =
  | { readonly kind: 'granted'; readonly grants: ReadonlyMap<string, LeaseGrant> }
  /** Not granted within the wait; `resource` is the one that blocked the last round. */
  | { readonly kind: 'locked'; readonly resource: string };

type RoundResult = (
  | { readonly kind: 'granted'; readonly grants: ReadonlyMap<string, LeaseGrant> }
  | {
      readonly kind: 'blocked';
      readonly resource: string;
      readonly result: Exclude<AttemptResult, { kind: 'granted' }>;
    }
) & {
  /** Each attempted resource's votes, in lock order (for the report only, never for a decision). */
  readonly votes: readonly Promise<readonly NodeVote[]>[];
  readonly asked: readonly string[];
};

/**
 * Rounds until every resource is granted, the wait runs out, or the nodes are unavailable.
 * @throws QuorumUnavailableError, TokenExhaustedError, the signal's reason, CoordinatorClosedError
 */
export async function acquireWithin(
  context: AcquireLoopContext,
  request: AcquireLoopRequest,
): Promise<AcquireLoopOutcome> {
  const { signal } = request;
  const deadline = context.now() + request.waitMs;
  const subscriptions = new Map<string, ReleaseSubscription>();
  let granted = false;
  // The optimistic first round (see the top of this file): a set's resources at once.
  let allAtOnce = request.resources.length > 1 && request.waitMs > 0;
  try {
    for (;;) {
      const round = await attemptRound(context, request, allAtOnce);
      allAtOnce = false;
      reportAttempt(request.onAttempt, 'acquire', round.asked, round.votes, round.kind === 'granted');
      if (round.kind === 'granted') {
        granted = true;
        return round;
      }
      let result = round.result;
      let unavailable: QuorumUnavailableError | undefined;
      if (result.kind === 'unavailable') {
        if (result.retryable !== true) throw result.error;
        unavailable = result.error;
        result = { kind: 'failed', retryAfterMs: undefined, contended: false };
      } else if (result.kind === 'exhausted') {
        throw new TokenExhaustedError(round.resource);
      } else if (result.kind === 'invalid') {
        throw result.error;
      }
      signal?.throwIfAborted();
      context.throwIfClosed();
      const remaining = deadline - context.now();
      if (remaining <= 0) {
        if (unavailable !== undefined) throw unavailable;
        return { kind: 'locked', resource: round.resource };
      }
      const keys = context.keysOf(round.resource);
      let subscription = subscriptions.get(round.resource);
      if (subscription === undefined) {
        subscription = await context.subscribe(keys.channel, remaining, request.leaseId);
        subscriptions.set(round.resource, subscription);
        // A release between the failed round and the subscription sent no message we heard: try again at once.
        continue;
      }
      const fallback = result.retryAfterMs ?? context.retryDelayMs + context.jitter();
      const woken = await subscription.wait(Math.min(fallback, remaining), signal);
      signal?.throwIfAborted();
      context.throwIfClosed();
      if (woken && result.contended) {
        await context.sleep(Math.min(context.jitter(), Math.max(0, deadline - context.now())));
      }
    }
  } finally {
    for (const subscription of subscriptions.values()) subscription.close(granted);
  }
}

/**
 * One round: a single attempt per resource, in lock order one after another, or all at once (`allAtOnce`); every
 * grant released when any resource fails.
 */
async function attemptRound(
  context: AcquireLoopContext,
  request: AcquireLoopRequest,
  allAtOnce: boolean,
): Promise<RoundResult> {
  const { resources, leaseId, ttlMs } = request;
  const grants = new Map<string, LeaseGrant>();
  // Each attempted resource's votes, in lock order: the round's report (read only, never for the decision).
  const asked: string[] = [];
  const votes: Promise<readonly NodeVote[]>[] = [];
  let done = false;
  try {
    if (allAtOnce) {
      const settled = await Promise.allSettled(
        resources.map((resource) => context.attempt(resource, context.keysOf(resource), leaseId, ttlMs)),
      );
      // Every grant is recorded before anything is decided, so the finally below releases all of them.
      settled.forEach((outcome, i) => {
        if (outcome.status === 'fulfilled' && outcome.value.kind === 'granted') {
          grants.set(resources[i]!, outcome.value.grant);
        }
      });
      let blocked: RoundResult | undefined;
      for (const [i, outcome] of settled.entries()) {
        const resource = resources[i]!;
        if (outcome.status === 'rejected') throw outcome.reason;
        const result = outcome.value;
        if (result.votes !== undefined) {
          asked.push(resource);
          votes.push(result.votes);
        }
        if (result.kind !== 'granted') blocked ??= { kind: 'blocked', resource, result, asked, votes };
      }
      if (blocked !== undefined) return blocked;
    } else {
      for (const resource of resources) {
        const result = await context.attempt(resource, context.keysOf(resource), leaseId, ttlMs);
        if (result.votes !== undefined) {
          asked.push(resource);
          votes.push(result.votes);
        }
        if (result.kind !== 'granted') return { kind: 'blocked', resource, result, asked, votes };
        grants.set(resource, result.grant);
      }
    }
    let validUntil = Infinity;
    for (const grant of grants.values()) validUntil = Math.min(validUntil, grant.validUntil);
    const validity = Math.floor(validUntil - context.now());
    if (validity <= context.minValidityMs) {
      return {
        kind: 'blocked',
        resource: resources[0]!,
        result: {
          kind: 'unavailable',
          retryable: true,
          error: new QuorumUnavailableError(
            `quorum unavailable: acquiring ${resources.length} resources one after another took too long for a ` +
              `${ttlMs} ms ttl (validity left ${validity} ms); retry, or use a longer ttl`,
          ),
        },
        asked,
        votes,
      };
    }
    done = true;
    return { kind: 'granted', grants, asked, votes };
  } finally {
    // All or nothing: any way out of the round but a full grant releases what the round holds, and waits for it
    // (each node's reply bounded by the node timeout) before anyone waits or retries.
    if (!done && grants.size > 0) {
      await Promise.all([...grants.keys()].map((r) => context.undo(context.keysOf(r), leaseId)));
    }
  }
}
