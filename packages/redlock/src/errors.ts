import type { Cluster, Redis } from 'ioredis';

/**
 * A client as redlock v5 types it. Any ioredis 4.28+ or 5 `Redis` client works, from any copy of the module; a
 * `Cluster` is one quorum member made of a whole Redis Cluster (DESIGN §3c).
 */
export type Client = Redis | Cluster;

/**
 * The per-attempt report of redlock v5, from every node's own reply in the attempt: `votesFor` the clients whose
 * node applied the call to every resource, `votesAgainst` every other client with what its node said (a
 * ResourceLockedError for a key holding another value, else the error its call failed with). The promise
 * resolves once every node answered, as redlock's.
 */
export interface ExecutionStats {
  readonly membershipSize: number;
  readonly quorumSize: number;
  readonly votesFor: Set<Client>;
  readonly votesAgainst: Map<Client, Error>;
}

export interface ExecutionResult {
  attempts: ReadonlyArray<Promise<ExecutionStats>>;
}

/** A node refused its vote because another lock holds the resource (redlock v5's class, same name). */
export class ResourceLockedError extends Error {
  override readonly name: string = 'ResourceLockedError';
  constructor(override readonly message: string) {
    super(message);
  }
}

/**
 * An operation failed: not granted within the retry window, no quorum, or a lost lock. As in redlock v5,
 * `attempts` holds one entry per attempt with each node's vote in it (`retryCount + 1` for an acquire; one for
 * an extend or release, which fenced does not retry; empty for an extension of an already-expired lock, as in
 * redlock). The fenced error that ended the operation (`LockedError`, `QuorumUnavailableError`, `LeaseLostError`)
 * is the `cause`.
 */
export class ExecutionError extends Error {
  override readonly name: string = 'ExecutionError';
  constructor(
    override readonly message: string,
    readonly attempts: ReadonlyArray<Promise<ExecutionStats>>,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
