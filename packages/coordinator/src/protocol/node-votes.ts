/**
 * Each node's vote (lease/attempt-report.ts) from its final reply to one acquire, extend or release call.
 *
 * Safety: read only. These functions look at replies the protocol already received and decided on (redlock/quorum.ts
 * `settled`); they send nothing and no decision reads what they return, so G1–G5 do not depend on them.
 */
import type { NodeReply } from '../redlock/quorum.js';
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

/**
 * Every node's vote on one resource from its final acquire reply. `asked[i]` is false for a node that was not
 * called (it does not vote).
 */
export function acquireVotes(
  resource: string,
  replies: readonly NodeReply<AcquireReply>[],
  asked: readonly boolean[],
): NodeVote[] {
  return replies.map((reply, i): NodeVote => {
    const error = failed(reply, asked[i] !== false);
    if (error !== undefined || reply.state !== 'ok') return error!;
    const value = reply.value;
    if (value.kind === 'granted') return { vote: 'for' };
    if (value.kind === 'held') return { vote: 'against', applied: 0, reason: 'held', resource };
    if (value.kind === 'ttl-above-max') return refused(`the cluster's maxTtlMs is ${value.maxTtlMs}`);
    return refused(value.kind);
  });
}

/** Every node's vote on one resource from its final extend reply (`asked` as for acquireVotes). */
export function extendVotes(
  resource: string,
  replies: readonly NodeReply<ExtendReply>[],
  asked: readonly boolean[],
): NodeVote[] {
  return replies.map((reply, i): NodeVote => {
    const error = failed(reply, asked[i] !== false);
    if (error !== undefined || reply.state !== 'ok') return error!;
    const value = reply.value;
    if (value.kind === 'extended') return { vote: 'for' };
    if (value.kind === 'not-held') return { vote: 'against', applied: 0, reason: 'not-held', resource };
    if (value.kind === 'ttl-above-max') return refused(`the cluster's maxTtlMs is ${value.maxTtlMs}`);
    return refused(value.kind);
  });
}

/**
 * Every node's vote on one resource from its final release reply (a release asks every node). A node that did
 * not hold the lease votes against here, as in redlock, although fenced counts it as released (DESIGN §2.5).
 */
export function releaseVotes(resource: string, replies: readonly NodeReply<ReleaseReply>[]): NodeVote[] {
  return replies.map((reply): NodeVote => {
    const error = failed(reply, true);
    if (error !== undefined || reply.state !== 'ok') return error!;
    return reply.value.kind === 'released'
      ? { vote: 'for' }
      : { vote: 'against', applied: 0, reason: 'not-held', resource };
  });
}
