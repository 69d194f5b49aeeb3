import { LeaseLostError } from '@fenced/shared';
import { monotonicNow } from './redlock/validity.js';

/** A granted lease. Its `token` is the fencing token to present to the guarded store. */
export interface Lease extends AsyncDisposable {
  readonly resource: string;
  /** At least 128 random bits, base64url: the capability to extend and release. Never log it. */
  readonly id: string;
  /** The fencing token of this grant; extending keeps it. */
  readonly token: bigint;
  /**
   * The fencing proof (`v1.<keyId>.<signature>`, DESIGN §4b) when the coordinator has a `signingKey`, else
   * `undefined`. Extending keeps it. A guarded store reads it from the lease: `store.run(lease, …)` sends it.
   */
  readonly proof: string | undefined;
  /** The ttl asked for at grant time or at the last extension. */
  readonly ttlMs: number;
  /** Validity at grant or extension time: `ttl − elapsed − drift`. */
  readonly validityMs: number;
  /** Wall-clock estimate of the end of validity, for people; code should use `remainingMs()`. */
  readonly expiresAt: Date;
  /** Remaining validity on the monotonic clock; `<= 0` once expired, released or lost. */
  remainingMs(): number;
  /** Compare-and-extend on a majority within the remaining validity; same token. @throws LeaseLostError */
  extend(ttlMs?: number): Promise<void>;
  /** Compare-and-delete on every node. Idempotent; an expired lease is released without error. */
  release(): Promise<void>;
}

/** What a granted or extended lease looks like right after a successful quorum. */
export interface LeaseGrant {
  readonly token: bigint;
  readonly ttlMs: number;
  readonly validityMs: number;
  /** Monotonic time (`performance.now()`) at which validity ends. */
  readonly validUntil: number;
}

/** The coordinator operations a lease needs; the lease never talks to Redis itself. */
export interface LeaseOperations {
  extendLease(
    resource: string,
    leaseId: string,
    ttlMs: number,
    validUntil: number | undefined,
  ): Promise<LeaseGrant>;
  releaseLease(resource: string, leaseId: string): Promise<void>;
}

export class GrantedLease implements Lease {
  private grant: LeaseGrant;
  private expiresAtMs: number;
  private state: 'held' | 'released' | 'lost' = 'held';
  private releasing: Promise<void> | undefined;

  constructor(
    private readonly operations: LeaseOperations,
    readonly resource: string,
    readonly id: string,
    grant: LeaseGrant,
    /** Signed once at grant time over (resource, token, lease id): none of them changes on extension. */
    readonly proof: string | undefined = undefined,
  ) {
    this.grant = grant;
    this.expiresAtMs = Date.now() + (grant.validUntil - monotonicNow());
  }

  get token(): bigint {
    return this.grant.token;
  }

  get ttlMs(): number {
    return this.grant.ttlMs;
  }

  get validityMs(): number {
    return this.grant.validityMs;
  }

  get expiresAt(): Date {
    return new Date(this.expiresAtMs);
  }

  remainingMs(): number {
    if (this.state !== 'held') return 0;
    return this.grant.validUntil - monotonicNow();
  }

  async extend(ttlMs: number = this.grant.ttlMs): Promise<void> {
    if (this.state === 'released') {
      throw new LeaseLostError(this.resource, 'the lease was released; acquire a new one');
    }
    if (this.remainingMs() <= 0) {
      this.state = 'lost';
      throw new LeaseLostError(this.resource, 'the lease expired before it was extended');
    }
    try {
      const grant = await this.operations.extendLease(this.resource, this.id, ttlMs, this.grant.validUntil);
      // The token never changes on extension (DESIGN §3: one token per grant).
      this.grant = { ...grant, token: this.grant.token };
      this.expiresAtMs = Date.now() + (grant.validUntil - monotonicNow());
    } catch (error) {
      if (error instanceof LeaseLostError) this.state = 'lost';
      throw error;
    }
  }

  release(): Promise<void> {
    if (this.state === 'released') return Promise.resolve();
    this.releasing ??= this.operations.releaseLease(this.resource, this.id).then(
      () => {
        this.state = 'released';
      },
      (error: unknown) => {
        this.releasing = undefined;
        throw error;
      },
    );
    return this.releasing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }

  /** Never prints the lease id. */
  toJSON(): { resource: string; token: string; validityMs: number; expiresAt: string } {
    return {
      resource: this.resource,
      token: this.token.toString(),
      validityMs: this.validityMs,
      expiresAt: this.expiresAt.toISOString(),
    };
  }
}
