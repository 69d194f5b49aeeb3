import { ErrorCode, isFencedError, type LeaseLostError } from '@fenced/shared';
import { LeaseLifecycle } from '../lease/lease-lifecycle.js';
import { LeaseWatch, type LeaseWatchContext, type LeaseWatchOptions } from '../lease/lease-watch.js';

/** What every grant or extension the service reports carries, whatever the number of resources. */
export interface HeldGrant {
  /** The lease id: the capability to extend or release. */
  readonly id: string;
  readonly ttlMs: number;
  readonly validityMs: number;
  readonly expiresAt: Date;
  /** `performance.now()` no later than the server's grant: validity is counted from here. */
  readonly validFrom: number;
}

/** How a lease is watched: the client's context and the acquire's `autoExtend` / `onLost`. */
export interface LeaseWatching {
  readonly context: LeaseWatchContext;
  readonly options?: LeaseWatchOptions;
}

/**
 * The HTTP client's front end of the one lease lifecycle (lease/lease-lifecycle.ts, shared with the library's
 * leases): held, then released or lost; validity on this process's monotonic clock, counted from before the
 * request was sent; the one keep-alive loop behind `autoExtend` (lease/lease-watch.ts); an idempotent release that
 * stops the watch first. {@link ClientLease} and {@link ClientMultiLease} add what their resources look like, the
 * two service calls that act on them, and what an extension keeps of the grant (its tokens and proofs).
 */
export abstract class HeldLease<G extends HeldGrant> extends LeaseLifecycle {
  #grant: G;
  readonly #resource: string;
  /** @internal */
  protected readonly watch: LeaseWatch;

  /** @internal */
  protected constructor(grant: G, watchedResource: string, watching: LeaseWatching) {
    super();
    this.#grant = grant;
    this.#resource = watchedResource;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the watch reads the lease's current grant
    const lease = this;
    this.watch = new LeaseWatch(
      {
        resource: watchedResource,
        get validityMs() {
          return lease.validityMs;
        },
        remainingMs: () => this.remainingMs(),
        extend: (ttlMs?: number) => this.extend(ttlMs),
      },
      watching.context,
      watching.options,
    );
  }

  /** @internal Starts the watch; a subclass calls it once its own fields are set. */
  protected startWatch(): void {
    this.watch.start();
  }

  /** @internal The last grant or extension. */
  protected get grant(): G {
    return this.#grant;
  }

  /**
   * @internal The service call that extends this lease; it returns the new grant with what an extension never
   * changes (tokens, proofs) kept from `this.grant`.
   */
  protected abstract extendCall(ttlMs: number, signal?: AbortSignal): Promise<G>;

  /** @internal The service call that releases this lease. */
  protected abstract releaseCall(): Promise<void>;

  /** The lease id: the capability to extend or release. Never log it. */
  get id(): string {
    return this.#grant.id;
  }
  /** The ttl of the last grant or extension, in milliseconds. */
  get ttlMs(): number {
    return this.#grant.ttlMs;
  }
  /** Validity reported at the grant or the last extension. */
  get validityMs(): number {
    return this.#grant.validityMs;
  }
  /** Wall-clock estimate of the end of validity, for people; code should use `remainingMs()`. */
  get expiresAt(): Date {
    return this.#grant.expiresAt;
  }
  /** Whether `release()` has completed (an `await using` block's end releases too). */
  get released(): boolean {
    return this.state === 'released';
  }

  /**
   * Extends the lease (same token or tokens, same proofs) to `ttlMs` from now.
   * @throws LeaseLostError when it was released, expired, or another holder took a resource.
   */
  async extend(ttlMs: number = this.#grant.ttlMs, signal?: AbortSignal): Promise<void> {
    this.assertExtendable();
    try {
      this.#grant = await this.extendCall(ttlMs, signal);
      this.watch.extended();
    } catch (error) {
      if (isFencedError(error) && error.code === ErrorCode.LEASE_LOST && this.state === 'held') {
        this.markLost(error as LeaseLostError);
      }
      throw error;
    }
  }

  /** @internal */
  protected errorResource(): string {
    return this.#resource;
  }

  /** @internal */
  protected validUntil(): number {
    return this.#grant.validFrom + this.#grant.validityMs;
  }

  /** @internal */
  protected releaseEverywhere(): Promise<void> {
    return this.releaseCall();
  }
}
