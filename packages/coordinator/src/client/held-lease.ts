import { ErrorCode, isFencedError } from '@fenced/shared';
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
 * What {@link ClientLease} and {@link ClientMultiLease} share: the grant that each extension replaces, validity on
 * this process's monotonic clock, the watch behind `signal` and `autoExtend`, and an idempotent release. The
 * subclasses add what their resources look like and the two calls that act on them.
 */
export abstract class HeldLease<G extends HeldGrant> implements AsyncDisposable {
  #grant: G;
  #released: Promise<void> | undefined;
  readonly #watch: LeaseWatch;

  /** @internal */
  protected constructor(grant: G, watchedResource: string, watching: LeaseWatching) {
    this.#grant = grant;
    this.#watch = new LeaseWatch(
      {
        resource: watchedResource,
        remainingMs: () => this.remainingMs(),
        extend: (ttlMs?: number) => this.extend(ttlMs),
      },
      watching.context,
      watching.options,
    );
  }

  /** @internal Starts the watch; a subclass calls it once its own fields are set. */
  protected startWatch(): void {
    this.#watch.start();
  }

  /** @internal The last grant or extension. */
  protected get grant(): G {
    return this.#grant;
  }

  /** @internal The service call that extends this lease. */
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
    return this.#released !== undefined;
  }
  /**
   * Aborts, once, with a LeaseLostError when the lease is lost while held: an extension failed for good, its
   * validity ran out first (on this process's clock), or the client was closed while keeping it. With
   * `autoExtend` the client extends the lease until it is released; without it the signal still aborts when
   * `extend()` reports the lease lost or its validity runs out (a timer armed when the signal is first read).
   * Releasing never aborts it.
   */
  get signal(): AbortSignal {
    return this.#watch.signal;
  }
  /** Whether the client is extending this lease in the background (`autoExtend`, until release or loss). */
  get autoExtending(): boolean {
    return this.#watch.autoExtending;
  }

  /** Validity left, on this process's monotonic clock; `<= 0` once the lease must be taken as lost. */
  remainingMs(): number {
    return this.#grant.validityMs - (performance.now() - this.#grant.validFrom);
  }

  /**
   * Extends the lease (same token or tokens) to `ttlMs` from now.
   * @throws LeaseLostError when it expired or another holder took a resource.
   */
  async extend(ttlMs: number = this.#grant.ttlMs, signal?: AbortSignal): Promise<void> {
    try {
      this.#grant = await this.extendCall(ttlMs, signal);
      this.#watch.extended();
    } catch (error) {
      if (isFencedError(error) && error.code === ErrorCode.LEASE_LOST) this.#watch.lost(error);
      throw error;
    }
  }

  /**
   * Releases the lease. Idempotent: later calls share the first call's promise (a failed release may be
   * tried again). Releasing a lease that already expired succeeds.
   */
  release(): Promise<void> {
    // No extension may start once a release began: stop the keeper and the expiry timer first.
    this.#watch.stop();
    this.#released ??= this.releaseCall().catch((error: unknown) => {
      this.#released = undefined;
      throw error;
    });
    return this.#released;
  }

  /** Releases the lease at the end of an `await using` block. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }
}
