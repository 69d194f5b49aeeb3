import type { MultiLease } from '@fenced/coordinator';
import type { ExecutionResult, ExecutionStats } from './errors.js';
import type { LongLockKeeper } from './keeper.js';

/** What a lock needs from its Redlock (redlock v5 calls back into the instance the same way). */
export interface LockOwner {
  release(lock: Lock): Promise<ExecutionResult>;
  extend(lock: Lock, duration: number): Promise<Lock>;
}

/**
 * A granted lock, shaped like redlock v5's `Lock`, plus the fencing side: `token` (one-resource locks), `tokens`
 * (every lock) and `proofs` (when the coordinator signs). Pass it to a guarded store: `store.run(lock, …)` fences
 * every resource of it.
 */
export class Lock {
  /**
   * Every resource of the lock, sorted (UTF-8 byte order) and without repeats: the order fenced acquires them in.
   * redlock v5 kept the order the caller gave.
   */
  readonly resources: string[];
  /** The fencing token of each resource. */
  readonly tokens: ReadonlyMap<string, bigint>;
  /** The fencing proof of each resource when the coordinator has a signing key. */
  readonly proofs: ReadonlyMap<string, string> | undefined;
  /** @internal Extends the lease while a duration above the cluster's maximum TTL lasts (keeper.ts). */
  keeper: LongLockKeeper | undefined;

  constructor(
    readonly redlock: LockOwner,
    /** @internal The coordinator lease behind this lock, shared by the locks an extension returns. */
    readonly lease: MultiLease,
    readonly attempts: ReadonlyArray<Promise<ExecutionStats>>,
    /**
     * Wall-clock ms (`Date.now()`) at which the lock stops being valid: the lease's validity, which accounts for
     * elapsed time and drift. Set to 0 once the lock is released or replaced by an extension, as in redlock.
     */
    public expiration: number,
  ) {
    this.resources = [...lease.resources];
    this.tokens = lease.tokens;
    this.proofs = lease.proofs;
  }

  /** The lock's random value (its lease id): the capability to extend and release. Never log it. */
  get value(): string {
    return this.lease.id;
  }

  /** Same as `value`, under the name a guarded store reads. */
  get id(): string {
    return this.lease.id;
  }

  /** The fencing token of a one-resource lock; `undefined` for several resources (read `tokens`). */
  get token(): bigint | undefined {
    return this.resources.length === 1 ? this.tokens.get(this.resources[0]!) : undefined;
  }

  /** The fencing proof of a one-resource lock when signing is on. */
  get proof(): string | undefined {
    return this.resources.length === 1 ? this.proofs?.get(this.resources[0]!) : undefined;
  }

  release(): Promise<ExecutionResult> {
    return this.redlock.release(this);
  }

  extend(duration: number): Promise<Lock> {
    return this.redlock.extend(this, duration);
  }

  /** Never prints the lock value. */
  toJSON(): { resources: string[]; tokens: Record<string, string>; expiration: number } {
    return {
      resources: this.resources,
      tokens: Object.fromEntries([...this.tokens].map(([r, t]) => [r, t.toString()])),
      expiration: this.expiration,
    };
  }
}
