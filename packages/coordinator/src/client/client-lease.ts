import type { FencedLease } from '@fenced/shared';

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

  /** @internal Made by `CoordinatorClient`. */
  constructor(calls: LeaseCalls, grant: LeaseGrant) {
    this.#calls = calls;
    this.#id = grant.id;
    this.#grant = grant;
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
    this.#grant = await this.#calls.extendById(this.resource, this.#id, ttlMs, signal);
  }

  /**
   * Releases the lease. Idempotent: later calls share the first call's promise (a failed release may be
   * tried again). Releasing a lease that already expired succeeds.
   */
  release(): Promise<void> {
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
