/**
 * The simulation's modelled storage guard: a small in-memory model of the guarded store's decision, which the
 * simulated lease holders (sim-holder.ts) write through while they believe they hold a lease — paused, delayed or
 * long expired included. It is a model (the real guard is Postgres), so it copies only the rule, from
 * packages/guarded-store/src/fence-statement.ts and migrations/0006_fence_equal_token_locks.sql (`fence_raise`):
 *
 * - a token below the resource's fence is refused (stale); a higher one raises the fence;
 * - an equal token is accepted only from the lease that set the fence (a missing lease id equals nothing);
 * - with an operation id (G5; packages/guarded-store/src/guarded-store.ts `run`): after the fence, an operation
 *   that already committed on the resource returns its stored result and the callback does not run; and when the
 *   fence refuses the token, a committed operation with that id still returns its result (a retry whose first
 *   attempt committed before a successor fenced in gets its answer) instead of the stale-token error.
 *
 * The fence check, the critical section's read and its write, and the operation's record are one atomic step here,
 * as they are one transaction holding the fence row's lock there (G1's commit order is the order of these steps).
 *
 * Negative controls (`GuardVariant`) switch one protection off: `guard-no-high-water` accepts every token (G3 must
 * fail), `guard-reads-outside` makes the holders read before their guarded transaction, outside it (G4 must fail),
 * `guard-no-op-dedup` runs a retried operation again (G5 must fail), `guard-no-replay-when-stale` answers a retry
 * refused by the fence with the stale-token error even when its first attempt committed (G5 must fail).
 */

export type GuardVariant =
  'guard-no-high-water' | 'guard-reads-outside' | 'guard-no-op-dedup' | 'guard-no-replay-when-stale';

export const GUARD_VARIANTS: readonly GuardVariant[] = [
  'guard-no-high-water',
  'guard-reads-outside',
  'guard-no-op-dedup',
  'guard-no-replay-when-stale',
];

/** The grant a write presents (its token and lease), with when it was granted, for the checkers. */
export interface PresentedGrant {
  readonly resource: string;
  readonly process: string;
  readonly token: bigint;
  readonly leaseId: string;
  /** SimWorld.seq when the attempt began and when the grant completed. */
  readonly startSeq: number;
  readonly endSeq: number;
}

/** One guarded transaction as sent: an empty fence-in, or the critical section "read the value, write it + 1". */
export interface GuardedWrite {
  readonly grant: PresentedGrant;
  readonly kind: 'fence-in' | 'increment';
  readonly opId: string;
  /** With reads outside the guard (the G4 control): the value read before, by a separate unguarded read. */
  readonly readOutside?: number;
}

export type GuardOutcome =
  | { readonly kind: 'committed'; readonly result: number | null }
  | { readonly kind: 'replayed'; readonly result: number | null }
  | { readonly kind: 'stale'; readonly current: bigint };

/** A committed guarded transaction, in commit order. */
export interface CommitRecord {
  readonly grant: PresentedGrant;
  readonly kind: GuardedWrite['kind'];
  readonly opId: string;
  /** The event (SimWorld.seq) at which it committed. */
  readonly seq: number;
  /** What the critical section read and wrote (null for a fence-in). */
  readonly read: number | null;
  readonly wrote: number | null;
}

export class GuardModel {
  /** Per resource: the fence (highest token accepted) and the lease that set it. */
  private readonly fences = new Map<string, { token: bigint; leaseId: string }>();
  /** The data: one counter per resource. */
  private readonly values = new Map<string, number>();
  /** Committed operations per resource and operation id, with their result. */
  private readonly operations = new Map<string, number | null>();
  readonly commits: CommitRecord[] = [];

  constructor(readonly variant: GuardVariant | null = null) {}

  /** An unguarded read (only the G4 control's holders make one). */
  read(resource: string): number {
    return this.values.get(resource) ?? 0;
  }

  /** The guarded transaction, atomically at event `seq`. */
  apply(write: GuardedWrite, seq: number): GuardOutcome {
    const { resource, token, leaseId } = write.grant;
    const fence = this.fences.get(resource);
    const admitted =
      this.variant === 'guard-no-high-water' ||
      fence === undefined ||
      token > fence.token ||
      (token === fence.token && leaseId !== '' && leaseId === fence.leaseId);
    const opKey = `${resource}\u0000${write.opId}`;
    const dedup = this.variant !== 'guard-no-op-dedup';
    if (!admitted) {
      if (dedup && this.variant !== 'guard-no-replay-when-stale' && this.operations.has(opKey)) {
        return { kind: 'replayed', result: this.operations.get(opKey) ?? null };
      }
      return { kind: 'stale', current: fence?.token ?? 0n };
    }
    if (dedup && this.operations.has(opKey))
      return { kind: 'replayed', result: this.operations.get(opKey) ?? null };
    if (fence === undefined || token > fence.token) this.fences.set(resource, { token, leaseId });
    let read: number | null = null;
    let wrote: number | null = null;
    if (write.kind === 'increment') {
      read = write.readOutside ?? this.read(resource);
      wrote = read + 1;
      this.values.set(resource, wrote);
    }
    this.operations.set(opKey, wrote);
    this.commits.push({ grant: write.grant, kind: write.kind, opId: write.opId, seq, read, wrote });
    return { kind: 'committed', result: wrote };
  }
}
