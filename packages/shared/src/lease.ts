/**
 * What the guard needs to know about a lease: structural, so a coordinator `Lease`, an HTTP client lease or
 * a plain object all fit.
 */
export interface FencedLease {
  /** The resource the lease is for. */
  readonly resource: string;
  /** The lease id: the capability to extend or release. Never log it. */
  readonly id: string;
  /** The fencing token: unique per grant and larger than every grant that completed before this one began. */
  readonly token: bigint;
  /**
   * The coordinator's signature over resource, token and the lease id's digest (DESIGN §4b), when it signs.
   * A store with `verifyKeys` refuses a lease without a valid one.
   */
  readonly proof?: string | undefined;
}

/**
 * What the guard needs to know about a lease over several resources (one grant per resource, all under one lease
 * id): a coordinator `MultiLease`, an HTTP client multi lease, or a plain object. A guarded transaction fences
 * every resource of it, in the guard's lock order.
 */
export interface FencedMultiLease {
  /** Every resource of the lease, sorted and without repeats. */
  readonly resources: readonly string[];
  /** The lease id shared by every resource's grant. Never log it. */
  readonly id: string;
  /** The fencing token of each resource's grant. */
  readonly tokens: ReadonlyMap<string, bigint>;
  /** The fencing proof of each resource's grant, when the coordinator signs (DESIGN §4b). */
  readonly proofs?: ReadonlyMap<string, string> | undefined;
}

/** One single-resource fence per resource of a multi-resource lease (same lease id). */
export function fencesOf(lease: FencedMultiLease): FencedLease[] {
  return lease.resources.map((resource) => ({
    resource,
    id: lease.id,
    token: lease.tokens.get(resource)!,
    proof: lease.proofs?.get(resource),
  }));
}

/** Body of `POST /v1/leases`: one lease over every resource, granted all or nothing. */
export interface MultiAcquireRequestBody {
  resources: string[];
  ttlMs: number;
  waitMs?: number;
}

/** 201 from `POST /v1/leases` and 200 from its extend: tokens (decimal strings) and proofs keyed by resource. */
export interface MultiLeaseResponseBody {
  resources: string[];
  leaseId: string;
  tokens: Record<string, string>;
  proofs?: Record<string, string>;
  ttlMs: number;
  validityMs: number;
  expiresAt: string;
}

/** Body of `POST /v1/locks/{resource}/leases` and of the extend call. */
export interface AcquireRequestBody {
  /** Time to live of the lease on every Redis node, in milliseconds. */
  ttlMs: number;
  /** How long the server may wait for the lock before answering 409 LOCKED, in milliseconds. */
  waitMs?: number;
}

/** Body of `POST /v1/locks/{resource}/leases/{leaseId}/extend`. */
export interface ExtendRequestBody {
  /** The new time to live, counted from now, in milliseconds. */
  ttlMs: number;
}

/** 201 from acquire and 200 from extend. `token` is a decimal string. */
export interface LeaseResponseBody {
  /** The resource, as in the path. */
  resource: string;
  /** The lease id: the capability to extend or release. Never log it. */
  leaseId: string;
  /** The fencing token, a decimal string (it exceeds 2^53). */
  token: string;
  /** The ttl granted, in milliseconds. */
  ttlMs: number;
  /** How long the lease is valid, counted from the grant: ttlMs minus elapsed time and clock drift. */
  validityMs: number;
  /** ISO-8601 wall-clock estimate of when the lease stops being valid (for people; clients use validityMs). */
  expiresAt: string;
  /** The lease's fencing proof (`v1.<keyId>.<signature>`), present when the service signs leases. */
  proof?: string;
}

/** 200 from `GET /v1/locks/{resource}`: never carries a lease id. */
export interface LockStatusBody {
  /** The resource, as in the path. */
  resource: string;
  /** Whether a majority of nodes sees a live lease. */
  held: boolean;
  /** The holder's token, when held. */
  token?: string;
}

/** Every error response: `{ "error": { "code", "message" } }`, `code` one of the `ErrorCode` values. */
export interface ErrorBody {
  /** The error: a stable code for programs, a message for people. */
  error: { code: string; message: string };
}
