import { ErrorCode } from './error-codes.js';

/** Base class of every error the fenced packages throw on purpose. `code` is stable; `message` is for people. */
export class FencedError extends Error {
  override readonly name: string = 'FencedError';
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }

  /** The wire form of DESIGN §5. Never contains lease ids or internals beyond the message. */
  toJSON(): { error: { code: ErrorCode; message: string } } {
    return { error: { code: this.code, message: this.message } };
  }
}

/** Bad arguments, options, environment, headers or bodies. The message names what was wrong and what is allowed. */
export class InvalidRequestError extends FencedError {
  override readonly name = 'InvalidRequestError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(ErrorCode.INVALID_REQUEST, message, options);
  }
}

/** No valid API key was presented. */
export class UnauthorizedError extends FencedError {
  override readonly name = 'UnauthorizedError';
  constructor(message = 'a valid API key is required (Authorization: Bearer <key>)') {
    super(ErrorCode.UNAUTHORIZED, message);
  }
}

/** The lease was never granted: another holder kept it for the whole wait. */
export class LockedError extends FencedError {
  override readonly name = 'LockedError';
  constructor(
    readonly resource: string,
    message = `resource is locked by another holder`,
  ) {
    super(ErrorCode.LOCKED, message);
  }
}

/** No majority of nodes answered (or enough refused to vote) to decide. */
export class QuorumUnavailableError extends FencedError {
  override readonly name = 'QuorumUnavailableError';
  constructor(
    message: string,
    /** Per-node reasons, in node order, for diagnosis. */
    readonly nodeErrors: readonly (string | null)[] = [],
    options?: { cause?: unknown },
  ) {
    super(ErrorCode.QUORUM_UNAVAILABLE, message, options);
  }
}

/** The lease was held and is now lost (expired, or taken over). Distinct from never getting it. */
export class LeaseLostError extends FencedError {
  override readonly name = 'LeaseLostError';
  constructor(
    readonly resource: string,
    message = 'the lease was lost: it expired or another holder took the resource',
    options?: { cause?: unknown },
  ) {
    super(ErrorCode.LEASE_LOST, message, options);
  }
}

/** What {@link StaleTokenError} knows about the refused write besides the tokens. */
export interface StaleTokenDetails {
  /**
   * Whether the write named its lease (a `Fencing-Lease-Id` header, a lease object or `leaseId` passed to
   * `store.run`). Only matters for a token equal to the fence.
   */
  readonly namedLease?: boolean;
}

/**
 * A guarded write was fenced off: its token is below the resource's fence, or equal to it from another lease
 * (or from a write that named no lease). Nothing was written. `presented` and `current` are the two tokens.
 */
export class StaleTokenError extends FencedError {
  override readonly name = 'StaleTokenError';
  constructor(
    readonly resource: string,
    readonly presented: bigint,
    readonly current: bigint,
    details: StaleTokenDetails = {},
  ) {
    super(ErrorCode.STALE_TOKEN, staleTokenMessage(resource, presented, current, details));
  }
}

function staleTokenMessage(
  resource: string,
  presented: bigint,
  current: bigint,
  { namedLease }: StaleTokenDetails,
): string {
  const quoted = JSON.stringify(resource);
  if (presented < current) {
    return (
      `stale fencing token for resource ${quoted}: presented ${presented}, but the fence is at ${current} ` +
      `(a later lease has written): this holder lost the resource and must stop`
    );
  }
  if (presented === current) {
    const sameLease =
      'an equal token is accepted only from the lease that set the fence, so every write of a lease must name ' +
      `it (the Fencing-Lease-Id header, or store.run(lease, …) with the lease itself)`;
    return namedLease === false
      ? `fencing token ${presented} for resource ${quoted} equals the fence, and this write named no lease: ${sameLease}`
      : `fencing token ${presented} for resource ${quoted} equals the fence, which another lease (or a write ` +
          `naming no lease) set: ${sameLease}`;
  }
  return `stale fencing token for resource ${quoted}: presented ${presented}, the fence is at ${current}`;
}

/** A guarded write carried no fencing token. */
export class MissingTokenError extends FencedError {
  override readonly name = 'MissingTokenError';
  constructor(message = 'a guarded write needs a Fencing-Token header (a decimal token from 1 to 2^63-1)') {
    super(ErrorCode.MISSING_TOKEN, message);
  }
}

/** Why a fencing proof was refused; stable, for callers and metrics. Never carries the proof or the lease id. */
export type InvalidProofReason =
  /** No proof at all, with verification on. */
  | 'missing'
  /** Not `v1.<keyId>.<signature>`, or a signature of the wrong size. */
  | 'malformed'
  /** A well-formed proof whose key id is not among the store's verification keys. */
  | 'unknown-key'
  /** The signature does not match this resource, token and lease (or was made by another key). */
  | 'mismatch'
  /** The fence names no lease id, so there is nothing to check the proof's lease digest against. */
  | 'missing-lease-id';

/**
 * A guarded write's fencing proof does not vouch for exactly its resource, token and lease (DESIGN §4b). Thrown
 * before the fence row is touched and before the callback runs: nothing was written.
 */
export class InvalidProofError extends FencedError {
  override readonly name = 'InvalidProofError';
  constructor(
    readonly resource: string,
    readonly reason: InvalidProofReason,
    message: string,
  ) {
    super(ErrorCode.INVALID_PROOF, message);
  }
}

/**
 * The client could not reach the service at all: the connection was refused, it timed out, or the network
 * failed — after the client's retries. Distinct from {@link QuorumUnavailableError}, which the service sends
 * when it is up but a majority of its Redis nodes is not. Never sent over the wire.
 */
export class ServiceUnreachableError extends FencedError {
  override readonly name = 'ServiceUnreachableError';
  constructor(
    message: string,
    /** The service's origin (`http://host:port`), without credentials or path. */
    readonly origin: string,
    /** How many requests were made before giving up. */
    readonly attempts: number,
    options?: { cause?: unknown },
  ) {
    super(ErrorCode.SERVICE_UNREACHABLE, message, options);
  }
}

/** Anything unexpected; the wire message is only `internal error`, the details stay in the server's log. */
export class InternalError extends FencedError {
  override readonly name = 'InternalError';
  constructor(message = 'internal error', options?: { cause?: unknown }) {
    super(ErrorCode.INTERNAL, message, options);
  }
}

/** Whether `value` is an error the fenced packages threw on purpose (any subclass of {@link FencedError}). */
export function isFencedError(value: unknown): value is FencedError {
  return value instanceof FencedError;
}
