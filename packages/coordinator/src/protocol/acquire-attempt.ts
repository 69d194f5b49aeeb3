/**
 * One acquire attempt (DESIGN §2 with the token promise of §3 folded in).
 *
 * Safety argument, in the order the code keeps it:
 * 1. The lease: acquire.lua sets the lease key only when it is absent or already ours, so two attempts cannot both
 *    collect `quorum` votes at once — any two majorities share a node (quorum/quorum.ts).
 * 2. The token: it is handed out only with a majority of *promises* (acquire.lua's folded-in first round, then
 *    tokens/promise-rounds.ts); a majority of lease votes is not enough. Counting promises of fewer than `quorum`
 *    nodes would let two grants share a token or go backwards (G2).
 * 3. Validity (quorum/validity.ts) is `ttl − elapsed − drift`, measured on the monotonic clock from the start of
 *    *this* attempt — before its first vote was sent, so every node's key expires no earlier than `start + ttl` —
 *    and after every round trip the attempt needed, including the token rounds. A lease with validity at or
 *    below `minValidityMs` is released and never handed out: no caller gets an already-expired lease. No token
 *    argument rests on this timing (the restart repair seals instead of waiting, nodes/repair.ts); it is what
 *    makes the lease useful, not what keeps tokens ordered.
 * 4. A failed attempt releases everything it may hold (partial grants, or any node when replies are missing) before
 *    the caller retries (DESIGN §2.4).
 * 5. Seals (nodes/repair.ts): a node whose seal epoch changed refuses the call (SEALED) and records nothing; its reply
 *    tells the new epoch, which the node adapter keeps. An attempt that lost because of such refusals is run once
 *    more at once, as a new round with the new epochs and its own start; nothing of the refused round is counted.
 *    A node that refuses the ttl as above the cluster's recorded maxTtlMs (TTL_ABOVE_MAX) makes the attempt fail
 *    with a typed InvalidRequestError naming both values.
 *
 * Tests that fail when this breaks: test/unit/coordinator/protocol/acquire-attempt.test.ts (minority of promises, validity
 * from the wrong moment, a lease with no validity left), test/integration/coordinator/*.test.ts on real nodes.
 */
import { NodeTimeoutError } from '../errors.js';
import type { LeaseGrant } from '../lease/lease.js';
import type { ResourceKeys } from '../keys/key-layout.js';
import { fanOut, maxAgainst } from '../quorum/quorum.js';
import { driftMs, validityMs } from '../quorum/validity.js';
import type { AcquireReply } from '../scripts/script-results.js';
import { promiseRounds } from '../tokens/promise-rounds.js';
import type { TokenProposer } from '../tokens/proposal.js';
import { InvalidRequestError, QuorumUnavailableError } from '@fenced/shared';
import { votingCalls, type ProtocolContext } from '../nodes/protocol-node.js';
import type { Releaser } from './release.js';
import type { NodeVote } from '../lease/attempt-report.js';
import { acquireVotes } from './node-votes.js';

/**
 * An attempt's outcome. `votes`: every node's lease vote in it, once all replies are in (lease/attempt-report.ts);
 * absent when no node was asked (token exhaustion).
 */
export type AttemptResult = AttemptOutcome & { readonly votes?: Promise<readonly NodeVote[]> };

type AttemptOutcome =
  | { readonly kind: 'granted'; readonly grant: LeaseGrant }
  /** Not granted; `retryAfterMs` is when enough holders' keys expire, if known; `contended` if we won some votes. */
  | { readonly kind: 'failed'; readonly retryAfterMs: number | undefined; readonly contended: boolean }
  /** Too few votes from reachable nodes; `retryable` when slow (timed-out) nodes may answer next time. */
  | { readonly kind: 'unavailable'; readonly error: QuorumUnavailableError; readonly retryable?: boolean }
  | { readonly kind: 'exhausted' }
  /** The nodes refused the request itself (a ttl above the cluster's recorded maxTtlMs): retrying cannot help. */
  | { readonly kind: 'invalid'; readonly error: InvalidRequestError };

export interface AttemptRequest {
  readonly resource: string;
  readonly keys: ResourceKeys;
  readonly leaseId: string;
  readonly ttlMs: number;
}

/** What an attempt uses besides the node set: where token proposals come from, and how to undo partial grants. */
export interface AttemptDeps {
  readonly proposer: TokenProposer;
  readonly releaser: Pick<Releaser, 'undoAttempt'>;
  /** Random extra delay for retries, 0 ..= retryJitterMs. */
  readonly jitter: () => number;
}

/**
 * One attempt: lease votes and the first token round on every voting node, then more token rounds if needed. Run
 * once more at once when it lost only because nodes refused it as sealed (their new epochs are known now).
 */
export async function attemptAcquire(
  context: ProtocolContext,
  deps: AttemptDeps,
  request: AttemptRequest,
): Promise<AttemptResult> {
  const sink: VoteSink = {};
  let result = await attemptOnce(context, deps, request, sink);
  if (result.sealed) result = await attemptOnce(context, deps, request, sink);
  return sink.votes === undefined ? result : { ...result, votes: sink.votes };
}

/** Where a round leaves its nodes' votes (read only for the report; the decision never looks at it). */
interface VoteSink {
  votes?: Promise<readonly NodeVote[]>;
}

/** `sealed`: the attempt failed and some node refused it as sealed. */
async function attemptOnce(
  context: ProtocolContext,
  deps: AttemptDeps,
  request: AttemptRequest,
  sink: VoteSink,
): Promise<AttemptOutcome & { readonly sealed?: boolean }> {
  const { resource, keys, leaseId, ttlMs } = request;
  const { settings, clock } = context;
  const proposal = deps.proposer.firstProposal(resource);
  if (proposal === null) return { kind: 'exhausted' };
  const start = clock.now();
  // A vote that arrives after ttl − drift − minValidity can no longer make a usable lease, so waiting longer
  // for it is pointless; a generous nodeTimeoutMs therefore never outlasts a short lease.
  const usableMs = ttlMs - driftMs(ttlMs, settings.driftFactor) - settings.minValidityMs;
  const timeout = Math.max(1, Math.min(settings.nodeTimeoutMs, usableMs));
  const calls = votingCalls(context, (node) => node.acquire(timeout, keys, leaseId, ttlMs, proposal));
  const result = await fanOut(calls, (reply) => reply.kind === 'granted');
  const asked = calls.map((call) => call !== null);
  sink.votes = result.settled.then((replies) => acquireVotes(resource, replies, asked));
  context.noteAbstentions(result.replies);
  let granted = 0;
  let promised = 0;
  let sealed = false;
  let settingsRefused = false;
  let maxTtlRecorded: number | undefined;
  const heldTtls: number[] = [];
  for (const reply of result.replies) {
    if (reply.state !== 'ok') continue;
    const value: AcquireReply = reply.value;
    if (value.kind === 'granted') {
      granted++;
      if (value.promised) promised++;
      deps.proposer.observe(resource, value.promised ? proposal : value.cur);
    } else if (value.kind === 'held') {
      deps.proposer.observe(resource, value.cur);
      if (value.pttlMs >= 0) heldTtls.push(value.pttlMs);
    } else if (value.kind === 'sealed') {
      sealed = true;
    } else if (value.kind === 'ttl-above-max') {
      maxTtlRecorded = value.maxTtlMs;
    } else if (value.kind === 'settings-mismatch') {
      settingsRefused = true;
    }
  }

  if (result.outcome === 'lost') {
    // Partial grants — and, when some replies are still out, any node at all — may hold our id: release
    // before the next attempt so a failed attempt never blocks others (DESIGN §2.4).
    await deps.releaser.undoAttempt(keys, leaseId);
    if (maxTtlRecorded !== undefined) {
      return {
        kind: 'invalid',
        error: new InvalidRequestError(
          `ttlMs must be at most ${maxTtlRecorded}, the cluster's maxTtlMs recorded on the nodes (this process is ` +
            `configured with ${settings.maxTtlMs}; see fenced-coordinator settings), got ${ttlMs}`,
        ),
      };
    }
    if (settingsRefused) {
      // A node refused this process's node count or key layout (the nodes check them on every call, DESIGN §3): read
      // the cluster's settings again before the next round — adopt, or throw ClusterSettingsError. The next round
      // builds its keys from the settings then in force (the wait loop's keysOf).
      const changed = await context.refreshSettings();
      if (changed) return { kind: 'failed', retryAfterMs: 0, contended: false };
    }
    // Classify from every node's final reply, not the snapshot at the decision: nodes still silent then (a
    // partition, a hang) would otherwise read as "held by another", and a majority cut off would end a wait
    // in LOCKED instead of QUORUM_UNAVAILABLE. The release above already waited out the same per-node bound.
    const replies = await result.settled;
    const nodeCount = context.nodes.length;
    const unavailable = replies.filter(
      (r) =>
        r.state === 'error' ||
        (r.state === 'ok' && (r.value.kind === 'not-initialized' || r.value.kind === 'corrupt')),
    ).length;
    if (unavailable > maxAgainst(nodeCount)) {
      const timedOut = replies.filter(
        (r) => r.state === 'error' && r.error instanceof NodeTimeoutError,
      ).length;
      return {
        kind: 'unavailable',
        error: context.unavailable('no majority of nodes could vote', replies),
        retryable: unavailable - timedOut <= maxAgainst(nodeCount),
      };
    }
    heldTtls.sort((a, b) => a - b);
    // The next attempt can win once `quorum − granted` more holders' keys have expired.
    const needed = context.quorum - granted;
    const retryAfterMs =
      needed >= 1 && heldTtls.length >= needed ? heldTtls[needed - 1]! + 1 + deps.jitter() : undefined;
    return { kind: 'failed', retryAfterMs, contended: granted > 0, sealed };
  }

  // The lease won a majority. The token is valid only if a majority also promised it (DESIGN §3).
  let token = proposal;
  if (promised < context.quorum) {
    // Only the nodes whose grant is in: there the record stands, and a promise fixes its token (acquire.lua).
    const grantedAt = result.replies.map((r) => r.state === 'ok' && r.value.kind === 'granted');
    const second = await promiseRounds(
      context,
      deps.proposer,
      request,
      proposal,
      (i) => grantedAt[i] === true,
    );
    if (second.kind !== 'promised') {
      await deps.releaser.undoAttempt(keys, leaseId);
      return second.kind === 'unavailable' || second.kind === 'exhausted'
        ? second
        : { kind: 'failed', retryAfterMs: undefined, contended: true };
    }
    token = second.token;
  }

  // Validity from the start of this (winning) attempt, after every round trip it needed (DESIGN §2.3).
  const validity = validityMs(ttlMs, clock.now() - start, settings.driftFactor);
  if (validity <= settings.minValidityMs) {
    // Too little left to be useful — or already expired: never hand that out. Counts as a failed attempt.
    await deps.releaser.undoAttempt(keys, leaseId);
    // Not "locked": the nodes were too slow for this ttl. Retried while the wait lasts, reported as 503.
    return {
      kind: 'unavailable',
      retryable: true,
      error: new QuorumUnavailableError(
        `quorum unavailable: the nodes answered too slowly for a ${ttlMs} ms ttl (validity left ${validity} ms, ` +
          `minValidityMs is ${settings.minValidityMs}); retry, or use a longer ttl`,
      ),
    };
  }
  return {
    kind: 'granted',
    grant: {
      token,
      ttlMs,
      validityMs: validity,
      validUntil: start + ttlMs - driftMs(ttlMs, settings.driftFactor),
    },
  };
}
