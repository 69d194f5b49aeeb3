/**
 * Extend (DESIGN §2.6): compare-and-extend on a majority, within the remaining validity; never mints a token.
 *
 * Safety argument:
 * - extend.lua prolongs the lease key only when it holds *this* lease id, so a late extend never prolongs a
 *   successor's lease (F11).
 * - Success needs `quorum` nodes that still held our key: with fewer, another holder may already have a majority,
 *   and telling the caller "extended" would hand out two overlapping leases without even Redlock's timing bound.
 * - The new validity is measured from the start of the extension (every node's new expiry is at or after it),
 *   minus drift; an extension that completes only after the old validity ended proves nothing (the key may have
 *   expired and been taken in between) and is reported as lost.
 * - "Had it and lost it" is `LeaseLostError`, distinct from "never got it" (`LockedError`).
 *
 * Tests that fail when this breaks: test/unit/coordinator/protocol/extend.test.ts (an extend that succeeds on a minority),
 * test/fault/late-commands.test.ts on real nodes.
 */
import { InvalidRequestError, LeaseLostError } from '@fenced/shared';
import type { LeaseGrant } from '../lease/lease.js';
import type { ResourceKeys } from '../keys/key-layout.js';
import { fanOut, maxAgainst } from '../quorum/quorum.js';
import { driftMs, validityMs } from '../quorum/validity.js';
import { votingCalls, type ProtocolContext } from '../nodes/protocol-node.js';
import type { Releaser } from './release.js';
import type { VotesSink } from '../lease/attempt-report.js';
import { extendVotes } from './node-votes.js';

export interface ExtendRequest {
  readonly resource: string;
  readonly keys: ResourceKeys;
  readonly leaseId: string;
  readonly ttlMs: number;
  /** Monotonic end of the current validity, when known (a Lease knows it; an extend by id does not). */
  readonly validUntil: number | undefined;
}

/**
 * Compare-and-extend on a majority, finishing before `validUntil` when it is known. The token in the result is
 * the one the nodes store with the lease (the highest reported by the majority that extended).
 * @throws LeaseLostError when the lease expired or another holder has the resource
 * @throws QuorumUnavailableError when too few nodes answered to tell
 */
export async function extendOnQuorum(
  context: ProtocolContext,
  releaser: Pick<Releaser, 'inBackground'>,
  request: ExtendRequest,
  /** Gets every node's vote once all replies are in (lease/attempt-report.ts); for reports only. */
  onVotes?: VotesSink,
): Promise<LeaseGrant> {
  const { resource, keys, leaseId, ttlMs, validUntil } = request;
  const { settings, clock } = context;
  const start = clock.now();
  // Within the remaining validity: a reply after the lease ended proves nothing, so do not wait for it.
  const timeout = Math.min(settings.nodeTimeoutMs, validUntil === undefined ? Infinity : validUntil - start);
  if (timeout <= 0) throw new LeaseLostError(resource, 'the lease expired before it was extended');
  const calls = votingCalls(context, (node) => node.extend(Math.ceil(timeout), keys, leaseId, ttlMs));
  const result = await fanOut(calls, (reply) => reply.kind === 'extended');
  const asked = calls.map((call) => call !== null);
  onVotes?.(result.settled.then((replies) => extendVotes(resource, replies, asked)));
  context.noteAbstentions(result.replies);
  const now = clock.now();
  if (result.outcome === 'won') {
    if (validUntil !== undefined && now > validUntil) {
      releaser.inBackground(keys, leaseId);
      throw new LeaseLostError(resource, 'the extension completed only after the lease had expired');
    }
    let token: bigint | null = null;
    for (const reply of result.replies) {
      if (reply.state === 'ok' && reply.value.kind === 'extended' && reply.value.token !== null) {
        if (token === null || reply.value.token > token) token = reply.value.token;
      }
    }
    const validity = validityMs(ttlMs, now - start, settings.driftFactor);
    if (token === null || validity <= 0) {
      releaser.inBackground(keys, leaseId);
      throw new LeaseLostError(resource, 'the extension left no validity');
    }
    return {
      token,
      ttlMs,
      validityMs: validity,
      validUntil: start + ttlMs - driftMs(ttlMs, settings.driftFactor),
    };
  }
  const aboveMax = result.replies.find((r) => r.state === 'ok' && r.value.kind === 'ttl-above-max');
  if (aboveMax?.state === 'ok' && aboveMax.value.kind === 'ttl-above-max') {
    // The nodes refused the ttl itself; the lease is untouched (it keeps its current expiry).
    throw new InvalidRequestError(
      `ttlMs must be at most ${aboveMax.value.maxTtlMs}, the cluster's maxTtlMs recorded on the nodes ` +
        `(see fenced-coordinator settings), got ${ttlMs}`,
    );
  }
  const unavailable = result.replies.filter(
    (r) => r.state === 'error' || (r.state === 'ok' && r.value.kind === 'not-initialized'),
  ).length;
  if (unavailable > maxAgainst(context.nodes.length)) {
    throw context.unavailable('could not reach a majority of nodes to extend the lease', result.replies);
  }
  // Had it and lost it (expired, or another holder took over): distinct from never getting it.
  releaser.inBackground(keys, leaseId);
  throw new LeaseLostError(resource);
}
