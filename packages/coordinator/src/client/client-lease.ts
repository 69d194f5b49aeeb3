import { ErrorCode, isFencedError, type FencedLease } from '@fenced/shared';
import { LeaseWatch, type LeaseWatchContext, type LeaseWatchOptions } from '../lease-watch.js';

/** What a lease needs from its client: the two calls that act on a lease by id. */
export interface LeaseCalls {
  extendById(resource: string, leaseId: string, ttlMs: number, signal?: AbortSignal): Promise<LeaseGrant>;
  releaseById(resource: string, leaseId: string): Promise<void>;
}

/** A grant or extension as the service reported it, with the monotonic time its validity is counted from. */
export interface LeaseGrant {
  resource: string;
  id: string;
  token: bigint;
  /** The fencing proof, when the service signs leases. */
  proof: string | undefined;
  ttlMs: number;
  validityMs: number;
  expiresAt: Date;
  /** `performance.now()` no later than the server's grant: validity is counted from here. */
  validFrom: number;
}

/**
 * A lease held through the HTTP service. Its id is the capability to extend and release: it is kept off
 * `JSON.stringify` and `console.log` output so that it does not end up in logs by accident.
 *
 * `await using lease = await client.acquire(...)` releases it at the end of the block.
 */
export class ClientLease implements FencedLease, AsyncDisposable {
  readonly #calls: LeaseCalls;
  readonly #id: string;
  #grant: LeaseGrant;
  #released: Promise<void> | undefined;
  readonly #watch: LeaseWatch;

  /** @internal Made by `CoordinatorClient`. */
  constructor(
    calls: LeaseCalls,
    grant: LeaseGrant,
    watching: { context: LeaseWatchContext; options?: LeaseWatchOptions } = {
      context: { retryDelayMs: 100, live: new Set() },
    },
  ) {
    this.#calls = calls;
    this.#id = grant.id;
    this.#grant = grant;
    this.#watch = new LeaseWatch(
      {
        resource: grant.resource,
        remainingMs: () => this.remainingMs(),
        extend: (ttlMs?: number) => this.extend(ttlMs),
      },
      watching.context,
      watching.options,
    );
    this.#watch.start();
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

  /** The resource this lease is for. */
  get resource(): string {
    return this.#grant.resource;
  }
  /** The lease id: the capability to extend or release. Never log it. */
  get id(): string {
    return this.#id;
  }
  /** The fencing token; an extension keeps it. Present it to the guarded store. */
  get token(): bigint {
    return this.#grant.token;
  }
  /**
   * The fencing proof (DESIGN §4b) when the service signs leases, else `undefined`. Send it to a guarded store
   * with the token (the `Fencing-Proof` header, the lease id in `Fencing-Lease-Id`); extending keeps it.
   */
  get proof(): string | undefined {
    return this.#grant.proof;
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

  /** Validity left, on this process's monotonic clock; `<= 0` once the lease must be taken as lost. */
  remainingMs(): number {
    return this.#grant.validityMs - (performance.now() - this.#grant.validFrom);
  }

  /**
   * Extends the lease (same token) to `ttlMs` from now.
   * @throws LeaseLostError when it expired or another holder took the resource.
   */
  async extend(ttlMs: number = this.#grant.ttlMs, signal?: AbortSignal): Promise<void> {
    try {
      this.#grant = await this.#calls.extendById(this.resource, this.#id, ttlMs, signal);
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
    this.#released ??= this.#calls.releaseById(this.resource, this.#id).catch((error: unknown) => {
      this.#released = undefined;
      throw error;
    });
    return this.#released;
  }

  /** Releases the lease at the end of an `await using` block. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }

  /** The lease without its id (the capability to extend or release), for logs and JSON. */
  toJSON(): { resource: string; token: string; ttlMs: number; validityMs: number; expiresAt: string } {
    return {
      resource: this.resource,
      token: this.token.toString(),
      ttlMs: this.ttlMs,
      validityMs: this.validityMs,
      expiresAt: this.expiresAt.toISOString(),
    };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `ClientLease ${JSON.stringify(this.toJSON())}`;
  }
}
