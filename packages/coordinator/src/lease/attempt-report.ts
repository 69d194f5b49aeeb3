import type { AcquireOptions } from './lease-watch.js';
/**
 * What each node voted in one attempt of an acquire, extend or release, read from the replies the attempt already
 * received: for callers that show votes per node (e.g. @fenced/redlock's `ExecutionStats`, redlock v5's
 * `votesFor` / `votesAgainst`). The types and the report hook; protocol/node-votes.ts reads each node's reply.
 *
 * Safety: nothing here sends a call or takes part in a decision. The report is built after the fact from the same
 * replies the vote counting used (quorum/quorum.ts `settled`, every node's final reply), so it cannot change
 * what is granted (G1–G5 rest on the attempt and its Lua scripts, not on this file). It never carries a lease id.
 */

/** One node's vote in one attempt, from that node's own reply. */
export type NodeVote = NodeVoteFor | NodeVoteAgainst;

/** The node applied the call to every resource of the attempt (granted, extended, released). */
export interface NodeVoteFor {
  readonly vote: 'for';
}

/**
 * A vote against, by `reason`:
 * - `held` (acquire): the node's lease key for `resource` holds another value (another holder, or a key set by
 *   hand);
 * - `not-held` (extend, release): the node's lease key for `resource` does not hold this lease (expired, released,
 *   or taken);
 * - `not-voting`: the node was not asked, it does not vote now (unreachable when last seen, refused as unsafe,
 *   restarted empty, under repair); its own last error is on the coordinator's `nodeError` event;
 * - `error`: the node was asked and could not vote: its call failed (a timeout, a closed connection, a malformed
 *   reply, a Redis error — `error` is what the call failed with), or it refused the call itself (restarted empty,
 *   sealed by a repair, a corrupt register, a ttl above the cluster's maximum).
 *
 * `applied` counts the resources of the attempt the node did apply the call to (granted, extended, released).
 */
export type NodeVoteAgainst = {
  readonly vote: 'against';
  readonly applied: number;
} & (
  | { readonly reason: 'held' | 'not-held'; readonly resource: string }
  | { readonly reason: 'not-voting' | 'error'; readonly error: Error }
);

/** One attempt of an operation and every node's vote in it. */
export interface AttemptReport {
  /**
   * `acquire`: one round over the requested resources (protocol/acquire-within.ts). `extend`, `release`: one
   * extension or release of a lease, every resource of it (each resource one call per node).
   */
  readonly operation: 'acquire' | 'extend' | 'release';
  /**
   * The resources the attempt asked the nodes about, in lock order. An acquire round stops at the first
   * resource not granted, so this may be a prefix of the request; the last one is then the resource that
   * blocked it.
   */
  readonly resources: readonly string[];
  /** Whether the operation succeeded in this attempt (an acquire: every resource, with enough validity left). */
  readonly succeeded: boolean;
  /**
   * Every node's vote, in node order, once every node answered (each bounded by `nodeTimeoutMs`), like redlock's
   * stats, which resolve once all votes are in. Never rejects. A node votes for only when it applied the call to
   * every resource in `resources`; otherwise its vote is its first vote against in lock order.
   */
  readonly votes: Promise<readonly NodeVote[]>;
}

/** Where a caller asks for the report of an operation's attempts (acquire options, `extend`, `release`). */
export interface AttemptReportOptions {
  /**
   * Called after every attempt with each node's vote in it. Only reports: what it throws is ignored, and it
   * decides nothing.
   */
  onAttempt?: ((report: AttemptReport) => void) | undefined;
}

/** A sink for one resource's votes, handed down to the call that fans out. */
export type VotesSink = (votes: Promise<readonly NodeVote[]>) => void;

/**
 * Calls `onAttempt` with the report of one attempt over `resources`, from each resource's votes (`undefined` for a
 * resource whose nodes were not asked); nothing when no node was asked. What the hook throws is ignored.
 */
export function reportAttempt(
  onAttempt: AttemptReportOptions['onAttempt'],
  operation: AttemptReport['operation'],
  resources: readonly string[],
  perResource: readonly (Promise<readonly NodeVote[]> | undefined)[],
  succeeded: boolean,
): void {
  if (onAttempt === undefined) return;
  const asked = resources.filter((_, i) => perResource[i] !== undefined);
  if (asked.length === 0) return;
  const votes = perResource.filter((v): v is Promise<readonly NodeVote[]> => v !== undefined);
  try {
    onAttempt({ operation, resources: asked, succeeded, votes: Promise.all(votes).then(combineVotes) });
  } catch {
    // A report hook cannot change an outcome.
  }
}

/**
 * A node's vote over several resources: for when it voted for every one, else its first vote against, with
 * `applied` the number of resources it voted for.
 */
export function combineVotes(perResource: readonly (readonly NodeVote[])[]): NodeVote[] {
  const nodeCount = perResource[0]?.length ?? 0;
  return Array.from({ length: nodeCount }, (_, i): NodeVote => {
    const votes = perResource.map((resourceVotes) => resourceVotes[i]!);
    const against = votes.find((v): v is NodeVoteAgainst => v.vote === 'against');
    if (against === undefined) return { vote: 'for' };
    return { ...against, applied: votes.filter((v) => v.vote === 'for').length };
  });
}

/**
 * The coordinator's acquire options: the shared {@link AcquireOptions}, plus `onAttempt`, called after every
 * attempt (one round over the requested resources) with each node's vote in it, granted or not — e.g. a node
 * whose lease key holds another value is an `against` vote with reason `held`.
 */
export interface CoordinatorAcquireOptions extends AcquireOptions, AttemptReportOptions {}

/** The options of `tryAcquire`: those of `acquire` without `waitMs` (it makes one attempt and never waits). */
export type TryAcquireOptions = Omit<CoordinatorAcquireOptions, 'waitMs'>;
