import {
  FENCING_LEASE_ID_HEADER,
  FENCING_PROOF_HEADER,
  FENCING_TOKEN_HEADER,
  IDEMPOTENCY_KEY_HEADER,
  InternalError,
  InvalidRequestError,
  MissingTokenError,
  isFencedError,
  parseToken,
  validateResourceName,
} from '@fenced/shared';
import { validateOpId } from '../fence.js';
import type { GuardedCallback, GuardedStore } from '../guarded-store.js';
import type { JsonCompatible } from '../json.js';
import { sendHttpError, storeHttpError } from './http-errors.js';
import type { FencedRequest, FencedRequestHandler, FencedResponse } from './http-types.js';

/** The guarded write a request may make, handed to the route by {@link fencedWrites}. */
export interface GuardedWrite<DB> {
  readonly resource: string;
  readonly token: bigint;
  /** From `Idempotency-Key`, when the client sent one. */
  readonly opId: string | undefined;
  /**
   * Runs `fn` in the request's guarded transaction (see `GuardedStore.run`). With an `Idempotency-Key` a retry
   * returns the first result, so `fn` returns JSON. Let its errors reach `fencedErrorHandler` (a stale token
   * becomes 409 STALE_TOKEN).
   */
  run<T>(fn: GuardedCallback<DB, T & JsonCompatible<T>>): Promise<T>;
}

/** Options of {@link fencedWrites}. */
export interface FencedWritesOptions<DB> {
  store: GuardedStore<DB>;
  /** The resource the request writes, e.g. `(req) => \`document:${req.params.id}\``. Validated per request. */
  resource: (req: FencedRequest) => string;
}

const LOCALS_KEY = 'fencedGuardedWrite';

/**
 * Express middleware for guarded writes (DESIGN §5). It reads `Fencing-Token` (required), `Fencing-Lease-Id`
 * and `Idempotency-Key` (optional) and answers by itself, before the route runs and so before anything is
 * written: 428 MISSING_TOKEN without a token, 400 INVALID_REQUEST for a malformed or repeated header or a bad
 * resource. When the store verifies proofs (`verifyKeys`, DESIGN §4b) it also needs `Fencing-Proof` and the
 * lease id in `Fencing-Lease-Id`, and answers 403 INVALID_PROOF for a missing or invalid proof; it logs neither
 * the proof nor the lease id (the error message carries neither). Otherwise the route gets its {@link GuardedWrite} from `guardedWrite(res)`; the fence is checked
 * when the route calls `run`, inside the write's transaction, and a stale token reaches `fencedErrorHandler`
 * as 409 STALE_TOKEN with nothing written.
 */
export function fencedWrites<DB>(options: FencedWritesOptions<DB>): FencedRequestHandler {
  const { store, resource: resourceOf } = options;
  return (req, res, next) => {
    let write: GuardedWrite<DB>;
    try {
      write = guardedWriteFor(store, req.headersDistinct, () => resourceOf(req));
    } catch (error) {
      if (isFencedError(error)) {
        sendHttpError(res, storeHttpError(error));
        return;
      }
      next(error);
      return;
    }
    res.locals[LOCALS_KEY] = write;
    next();
  };
}

/**
 * The guarded write of a request with these headers, for any HTTP framework: reads `Fencing-Token` (required),
 * `Fencing-Lease-Id`, `Fencing-Proof` and `Idempotency-Key`, validates the resource and checks proofs (when the
 * store verifies them).
 * @throws MissingTokenError, InvalidRequestError or InvalidProofError: the request's answer (428, 400, 403).
 */
export function guardedWriteFor<DB>(
  store: GuardedStore<DB>,
  headers: NodeJS.Dict<string[]>,
  resourceOf: () => string,
): GuardedWrite<DB> {
  const tokenText = singleHeader(headers, FENCING_TOKEN_HEADER);
  if (tokenText === undefined) throw new MissingTokenError();
  const token = parseToken(tokenText, `${FENCING_TOKEN_HEADER} header`);
  const leaseId = singleHeader(headers, FENCING_LEASE_ID_HEADER);
  if (leaseId !== undefined) validateLeaseIdHeader(leaseId);
  const opIdText = singleHeader(headers, IDEMPOTENCY_KEY_HEADER);
  const opId = opIdText === undefined ? undefined : validateIdempotencyKey(opIdText);
  const proof = singleHeader(headers, FENCING_PROOF_HEADER);
  const resource = validateResourceName(resourceOf());
  const fence = { resource, token, leaseId, proof };
  // Refused here, before the route runs: a forged or misplaced token never reaches a transaction. `run`
  // checks again (a cache hit), so a route that builds its own fence is covered as well.
  store.checkProofs(fence);
  return Object.freeze({
    resource,
    token,
    opId,
    run: <T>(fn: GuardedCallback<DB, T & JsonCompatible<T>>): Promise<T> =>
      opId === undefined ? store.run(fence, fn) : store.run(fence, fn, { opId }),
  });
}

/**
 * The request's guarded write, set by {@link fencedWrites}.
 * @throws InternalError when the route is not behind `fencedWrites` (a wiring mistake).
 */
export function guardedWrite<DB>(res: Pick<FencedResponse, 'locals'>): GuardedWrite<DB> {
  const write = res.locals[LOCALS_KEY] as GuardedWrite<DB> | undefined;
  if (write === undefined) throw new InternalError('route is not behind fencedWrites()');
  return write;
}

/**
 * The header's value if it appears once. Node joins repeated custom headers into one string with ', ', so
 * `headersDistinct` is what tells "sent twice" apart from "one malformed value".
 */
function singleHeader(headers: NodeJS.Dict<string[]>, name: string): string | undefined {
  const values = headers[name.toLowerCase()];
  if (values === undefined || values.length === 0) return undefined;
  if (values.length > 1)
    throw new InvalidRequestError(`${name} header must appear once, got ${values.length}`);
  return values[0];
}

const VISIBLE_ASCII = /^[\x21-\x7e]{1,255}$/;

function validateLeaseIdHeader(value: string): void {
  if (!VISIBLE_ASCII.test(value)) {
    throw new InvalidRequestError(
      `${FENCING_LEASE_ID_HEADER} header must be 1 to 255 visible ASCII characters`,
    );
  }
}

function validateIdempotencyKey(value: string): string {
  try {
    return validateOpId(value);
  } catch {
    throw new InvalidRequestError(
      `${IDEMPOTENCY_KEY_HEADER} header must be 1 to 255 visible ASCII characters`,
    );
  }
}
