import type { FencedLease } from '@fenced/shared';
import { HeldLease, type LeaseWatching } from './held-lease.js';

/** What a lease needs from its client: the two calls that act on a lease by id. */
export interface LeaseCalls {
  extendById(resource: string, leaseId: string, ttlMs: number, signal?: AbortSignal): Promise<ReportedGrant>;
  releaseById(resource: string, leaseId: string): Promise<void>;
}

/** A grant or extension as the service reported it, with the monotonic time its validity is counted from. */
export interface ReportedGrant {
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
export class ClientLease extends HeldLease<ReportedGrant> implements FencedLease {
  readonly #calls: LeaseCalls;

  /** @internal Made by `CoordinatorClient`. */
  constructor(
    calls: LeaseCalls,
    grant: ReportedGrant,
    watching: LeaseWatching = { context: { retryDelayMs: 100, live: new Set() } },
  ) {
    super(grant, grant.resource, watching);
    this.#calls = calls;
    this.startWatch();
  }

  /** The resource this lease is for. */
  get resource(): string {
    return this.grant.resource;
  }
  /** The fencing token; an extension keeps it. Present it to the guarded store. */
  get token(): bigint {
    return this.grant.token;
  }
  /**
   * The fencing proof (DESIGN §4b) when the service signs leases, else `undefined`. Send it to a guarded store
   * with the token (the `Fencing-Proof` header, the lease id in `Fencing-Lease-Id`); extending keeps it.
   */
  get proof(): string | undefined {
    return this.grant.proof;
  }

  /** @internal */
  protected async extendCall(ttlMs: number, signal?: AbortSignal): Promise<ReportedGrant> {
    const extension = await this.#calls.extendById(this.resource, this.id, ttlMs, signal);
    // One token per grant (DESIGN §3): an extension keeps the token and the proof that signs it.
    return { ...extension, token: this.grant.token, proof: this.grant.proof };
  }

  /** @internal */
  protected releaseCall(): Promise<void> {
    return this.#calls.releaseById(this.resource, this.id);
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
