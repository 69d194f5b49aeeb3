import { fencesOf, type FencedLease, type FencedMultiLease } from '@fenced/shared';
import { HeldLease, type LeaseWatching } from './held-lease.js';

/** What a multi-resource lease needs from its client: the two calls on `/v1/leases/{leaseId}`. */
export interface MultiLeaseCalls {
  extendManyById(
    resources: readonly string[],
    leaseId: string,
    ttlMs: number,
    signal?: AbortSignal,
  ): Promise<ReportedMultiGrant>;
  releaseManyById(resources: readonly string[], leaseId: string): Promise<void>;
}

/** A multi-resource grant or extension as the service reported it (`MultiLeaseResponseBody`), parsed. */
export interface ReportedMultiGrant {
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
export class ClientMultiLease extends HeldLease<ReportedMultiGrant> implements FencedMultiLease {
  readonly #calls: MultiLeaseCalls;

  /** @internal Made by `CoordinatorClient`. */
  constructor(calls: MultiLeaseCalls, grant: ReportedMultiGrant, watching: LeaseWatching) {
    super(grant, grant.resources[0]!, watching);
    this.#calls = calls;
    this.startWatch();
  }

  /** Every resource, sorted (UTF-8 byte order). */
  get resources(): readonly string[] {
    return this.grant.resources;
  }
  /** The fencing token of each resource; an extension keeps them. */
  get tokens(): ReadonlyMap<string, bigint> {
    return this.grant.tokens;
  }
  /** The fencing proof of each resource when the service signs leases, else `undefined`. */
  get proofs(): ReadonlyMap<string, string> | undefined {
    return this.grant.proofs;
  }

  /** One single-resource fence per resource (same lease id). */
  fences(): FencedLease[] {
    return fencesOf(this);
  }

  /** @internal */
  protected async extendCall(ttlMs: number, signal?: AbortSignal): Promise<ReportedMultiGrant> {
    const extension = await this.#calls.extendManyById(this.resources, this.id, ttlMs, signal);
    // One token per grant (DESIGN §3): an extension keeps every token and the proofs that sign them.
    return { ...extension, tokens: this.grant.tokens, proofs: this.grant.proofs };
  }

  /** @internal */
  protected releaseCall(): Promise<void> {
    return this.#calls.releaseManyById(this.resources, this.id);
  }

  /** Never prints the lease id. */
  toJSON(): { resources: string[]; tokens: Record<string, string>; validityMs: number; expiresAt: string } {
    return {
      resources: [...this.resources],
      tokens: Object.fromEntries([...this.tokens].map(([r, t]) => [r, t.toString()])),
      validityMs: this.validityMs,
      expiresAt: this.expiresAt.toISOString(),
    };
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return `ClientMultiLease ${JSON.stringify(this.toJSON())}`;
  }
}
