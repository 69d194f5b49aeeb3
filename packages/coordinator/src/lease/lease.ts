import { LeaseLostError } from '@fenced/shared';
import { LeaseLifecycle } from './lease-lifecycle.js';
import { LeaseWatch, type LeaseWatchContext, type LeaseWatchOptions } from './lease-watch.js';
import { monotonicNow } from '../quorum/validity.js';
import { reportAttempt, type AttemptReportOptions, type NodeVote, type VotesSink } from './attempt-report.js';

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
  /**
   * Aborts, once, with a LeaseLostError when the lease is lost while held: an extension failed for good, or its
   * validity ran out before an extension succeeded, or the coordinator was closed while it kept the lease
   * (lease-watch.ts). With `autoExtend` the coordinator extends the lease until it is released; without it, the
   * signal still aborts when `extend()` reports the lease lost or its validity runs out (a timer armed when the
   * signal is first read). Releasing never aborts it: a released lease was not lost.
   */
  readonly signal: AbortSignal;
  /** Whether the coordinator is extending this lease in the background (`autoExtend`, until release or loss). */
  readonly autoExtending: boolean;
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

/** The operations a lease needs (protocol/lease-protocol.ts); the lease never talks to Redis itself. */
export interface LeaseOperations {
  extendLease(
    resource: string,
    leaseId: string,
    ttlMs: number,
    validUntil: number | undefined,
    onVotes?: VotesSink,
  ): Promise<LeaseGrant>;
  releaseLease(resource: string, leaseId: string, onVotes?: VotesSink): Promise<void>;
}

/** A lease made without an owner's context (the HTTP service's extend by id): nothing tracks its watch. */
const UNWATCHED = { context: { retryDelayMs: 100, live: new Set<LeaseWatch>() } };

export class GrantedLease extends LeaseLifecycle implements Lease {
  private grant: LeaseGrant;
  private expiresAtMs: number;
  protected readonly watch: LeaseWatch;

  constructor(
    private readonly operations: LeaseOperations,
    readonly resource: string,
    readonly id: string,
    grant: LeaseGrant,
    /** Signed once at grant time over (resource, token, lease id): none of them changes on extension. */
    readonly proof: string | undefined = undefined,
    watching: { context: LeaseWatchContext; options?: LeaseWatchOptions } = UNWATCHED,
  ) {
    super();
    this.grant = grant;
    this.expiresAtMs = Date.now() + (grant.validUntil - monotonicNow());
    this.watch = new LeaseWatch(this, watching.context, watching.options);
    this.watch.start();
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

  async extend(ttlMs: number = this.grant.ttlMs): Promise<void> {
    this.assertExtendable();
    try {
      const grant = await this.operations.extendLease(this.resource, this.id, ttlMs, this.grant.validUntil);
      // The token never changes on extension (DESIGN §3: one token per grant).
      this.grant = { ...grant, token: this.grant.token };
      this.expiresAtMs = Date.now() + (grant.validUntil - monotonicNow());
      this.watch.extended();
    } catch (error) {
      if (error instanceof LeaseLostError && this.state === 'held') this.markLost(error);
      throw error;
    }
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

  protected errorResource(): string {
    return this.resource;
  }

  protected validUntil(): number {
    return this.grant.validUntil;
  }

  protected releaseEverywhere(options?: AttemptReportOptions): Promise<void> {
    let votes: Promise<readonly NodeVote[]> | undefined;
    const sink = options?.onAttempt && ((v: Promise<readonly NodeVote[]>) => void (votes = v));
    const released = this.operations.releaseLease(this.resource, this.id, sink);
    return released.then(
      () => reportAttempt(options?.onAttempt, 'release', [this.resource], [votes], true),
      (error: unknown) => {
        reportAttempt(options?.onAttempt, 'release', [this.resource], [votes], false);
        throw error;
      },
    );
  }
}
