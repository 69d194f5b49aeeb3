import { ErrorCode, isFencedError, type FencedLease, type FencedMultiLease } from '@fenced/shared';
import { LeaseWatch, type LeaseWatchContext, type LeaseWatchOptions } from '../lease-watch.js';

/** What a multi-resource lease needs from its client: the two calls on `/v1/leases/{leaseId}`. */
export interface MultiLeaseCalls {
  extendManyById(
    resources: readonly string[],
    leaseId: string,
    ttlMs: number,
    signal?: AbortSignal,
  ): Promise<MultiLeaseGrant>;
  releaseManyById(resources: readonly string[], leaseId: string): Promise<void>;
}

/** A multi-resource grant or extension as the service reported it (`MultiLeaseResponseBody`), parsed. */
export interface MultiLeaseGrant {
  resources: readonly string[];
  id: string;
  tokens: ReadonlyMap<string, bigint>;
  proofs: ReadonlyMap<string, string> | undefined;
  ttlMs: number;
  validityMs: number;
  expiresAt: Date;
  /** `performance.now()` no later than the server's grant: validity is counted from here. */
  validFrom: number;
}

/**
 * A lease over several resources held through the HTTP service (`POST /v1/leases`): all granted, each with its
 * own token, under one lease id; extended and released as one. Like `ClientLease`, the id is kept off
 * `JSON.stringify` and `console.log` output. There is no single `token`: pass the lease to a guarded store, which
 * fences every resource, or use `fences()`.
 */
export class ClientMultiLease implements FencedMultiLease, AsyncDisposable {
  readonly #calls: MultiLeaseCalls;
  readonly #id: string;
  readonly #tokens: ReadonlyMap<string, bigint>;
  readonly #proofs: ReadonlyMap<string, string> | undefined;
  #grant: MultiLeaseGrant;
  #released: Promise<void> | undefined;
  readonly #watch: LeaseWatch;

  /** @internal Made by `CoordinatorClient`. */
  constructor(
    calls: MultiLeaseCalls,
    grant: MultiLeaseGrant,
    watching: { context: LeaseWatchContext; options?: LeaseWatchOptions },
  ) {
    this.#calls = calls;
    this.#id = grant.id;
    this.#grant = grant;
    this.#tokens = grant.tokens;
    this.#proofs = grant.proofs;
    this.#watch = new LeaseWatch(
      {
        resource: grant.resources[0]!,
        remainingMs: () => this.remainingMs(),
        extend: (ttlMs?: number) => this.extend(ttlMs),
      },
      watching.context,
      watching.options,
    );
    this.#watch.start();
  }

  /** Every resource, sorted (UTF-8 byte order). */
  get resources(): readonly string[] {
    return this.#grant.resources;
  }
  /** The lease id shared by every resource: the capability to extend or release. Never log it. */
  get id(): string {
    return this.#id;
  }
  /** The fencing token of each resource; an extension keeps them. */
  get tokens(): ReadonlyMap<string, bigint> {
    return this.#tokens;
  }
  /** The fencing proof of each resource when the service signs leases, else `undefined`. */
  get proofs(): ReadonlyMap<string, string> | undefined {
    return this.#proofs;
  }
  /** The ttl of the last grant or extension, in milliseconds. */
  get ttlMs(): number {
    return this.#grant.ttlMs;
  }
  /** Validity of the whole set reported at the grant or the last extension. */
  get validityMs(): number {
    return this.#grant.validityMs;
  }
  /** Wall-clock estimate of the end of validity, for people; code should use `remainingMs()`. */
  get expiresAt(): Date {
    return this.#grant.expiresAt;
  }
  /** Whether `release()` completed. */
  get released(): boolean {
    return this.#released !== undefined;
  }
  /** As `ClientLease.signal`, for the whole set. */
  get signal(): AbortSignal {
    return this.#watch.signal;
  }
  /** Whether a keeper extends the lease in the background (`autoExtend`), until release, loss or close. */
  get autoExtending(): boolean {
    return this.#watch.autoExtending;
  }

  /** Validity left, on this process's monotonic clock; `<= 0` once the lease must be taken as lost. */
  remainingMs(): number {
    return this.#grant.validityMs - (performance.now() - this.#grant.validFrom);
  }

  /** One single-resource fence per resource (same lease id). */
  fences(): FencedLease[] {
    return this.resources.map((resource) => ({
      resource,
      id: this.#id,
      token: this.#tokens.get(resource)!,
      proof: this.#proofs?.get(resource),
    }));
  }

  /**
   * Extends every resource (same tokens) to `ttlMs` from now.
   * @throws LeaseLostError when any resource was lost; the service then releases the whole set.
   */
  async extend(ttlMs: number = this.#grant.ttlMs, signal?: AbortSignal): Promise<void> {
    try {
      this.#grant = await this.#calls.extendManyById(this.resources, this.#id, ttlMs, signal);
      this.#watch.extended();
    } catch (error) {
      if (isFencedError(error) && error.code === ErrorCode.LEASE_LOST) this.#watch.lost(error);
      throw error;
    }
  }

  /** Releases every resource. Idempotent (a failed release may be tried again); an expired lease succeeds. */
  release(): Promise<void> {
    this.#watch.stop();
    this.#released ??= this.#calls.releaseManyById(this.resources, this.#id).catch((error: unknown) => {
      this.#released = undefined;
      throw error;
    });
    return this.#released;
  }

  /** `await using`: releases the lease. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }

  /** Never prints the lease id. */
  toJSON(): { resources: string[]; tokens: Record<string, string>; validityMs: number; expiresAt: string } {
    return {
      resources: [...this.resources],
      tokens: Object.fromEntries([...this.#tokens].map(([r, t]) => [r, t.toString()])),
      validityMs: this.validityMs,
      expiresAt: this.expiresAt.toISOString(),
    };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `ClientMultiLease ${JSON.stringify(this.toJSON())}`;
  }
}
