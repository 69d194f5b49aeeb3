/**
 * Each node's vote (lease/attempt-report.ts) from its final reply to one acquire, extend or release call.
 *
 * Safety: read only. These functions look at replies the protocol already received and decided on (quorum/quorum.ts
 * `settled`); they send nothing and no decision reads what they return, so G1–G5 do not depend on them.
 */
import type { NodeReply } from '../quorum/quorum.js';
import type { AcquireReply, ExtendReply, ReleaseReply } from '../scripts/script-results.js';
import type { NodeVote, NodeVoteAgainst } from '../lease/attempt-report.js';

/** The error of a node's reply that failed (or never came). */
function failed(reply: NodeReply<unknown>, asked: boolean): NodeVoteAgainst | undefined {
  if (!asked) {
    return {
      vote: 'against',
      applied: 0,
      reason: 'not-voting',
      error: new Error('the node does not vote now'),
    };
  }
  if (reply.state === 'pending') {
    return { vote: 'against', applied: 0, reason: 'error', error: new Error('the node did not reply') };
  }
  if (reply.state === 'error') {
    const error = reply.error instanceof Error ? reply.error : new Error(String(reply.error));
    return { vote: 'against', applied: 0, reason: 'error', error };
  }
  return undefined;
}

function refused(detail: string): NodeVoteAgainst {
  return {
    vote: 'against',
    applied: 0,
    reason: 'error',
    error: new Error(`the node refused the call: ${detail}`),
  };
}

/** A node's refusal of the call itself (not a vote on the lease): a ttl above the cluster's maximum, or no state. */
function refusal(value: AcquireReply | ExtendReply): NodeVoteAgainst {
  return refused(value.kind === 'ttl-above-max' ? `the cluster's maxTtlMs is ${value.maxTtlMs}` : value.kind);
}

/** Every node's vote from its reply: a failed, missing or unasked reply votes against, any other as `vote` says. */
function votesOf<R>(
  replies: readonly NodeReply<R>[],
  asked: readonly boolean[] | undefined,
  vote: (value: R) => NodeVote,
): NodeVote[] {
  return replies.map((reply, i): NodeVote => {
    const error = failed(reply, asked?.[i] !== false);
    if (error !== undefined || reply.state !== 'ok') return error!;
    return vote(reply.value);
  });
}

/**
 * Every node's vote on one resource from its final acquire reply. `asked[i]` is false for a node that was not
 * called (it does not vote).
 */
export function acquireVotes(
  resource: string,
  replies: readonly NodeReply<AcquireReply>[],
  asked: readonly boolean[],
): NodeVote[] {
  return votesOf(replies, asked, (value) => {
    if (value.kind === 'granted') return { vote: 'for' };
    if (value.kind === 'held') return { vote: 'against', applied: 0, reason: 'held', resource };
    return refusal(value);
  });
}

/** Every node's vote on one resource from its final extend reply (`asked` as for acquireVotes). */
export function extendVotes(
  resource: string,
  replies: readonly NodeReply<ExtendReply>[],
  asked: readonly boolean[],
): NodeVote[] {
  return votesOf(replies, asked, (value) => {
    if (value.kind === 'extended') return { vote: 'for' };
    if (value.kind === 'not-held') return { vote: 'against', applied: 0, reason: 'not-held', resource };
    return refusal(value);
  });
}

/**
 * Every node's vote on one resource from its final release reply (a release asks every node). A node that did
 * not hold the lease votes against here, as in redlock, although fenced counts it as released (DESIGN §2.5).
 */
export function releaseVotes(resource: string, replies: readonly NodeReply<ReleaseReply>[]): NodeVote[] {
  return votesOf(replies, undefined, (value) =>
    value.kind === 'released'
      ? { vote: 'for' }
      : { vote: 'against', applied: 0, reason: 'not-held', resource },
  );
}
