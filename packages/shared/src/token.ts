import { InvalidRequestError } from './errors.js';
import { describeValue } from './validation.js';

// Both typed `bigint`, not inferred: their declarations then carry no BigInt literal, which TypeScript refuses in
// the .d.ts files of a project targeting below ES2020 (node-redlock's own tsconfig targets es2018).
/** The smallest fencing token. Tokens are positive 64-bit signed integers: 1 ..= 2^63 - 1 (Postgres `bigint`). */
export const MIN_TOKEN: bigint = 1n;
/** The largest fencing token, 2^63 - 1. */
export const MAX_TOKEN: bigint = (1n << 63n) - 1n;

/** The HTTP header a guarded write carries its token in. */
export const FENCING_TOKEN_HEADER = 'Fencing-Token';

/**
 * The optional HTTP header naming the lease a guarded write belongs to. With it, one lease may write more than
 * once with its token (an equal token is accepted only from the same lease). The guard compares it and stores
 * only a digest, so a client may send any stable per-lease value (for example a digest of its lease id).
 */
export const FENCING_LEASE_ID_HEADER = 'Fencing-Lease-Id';

/**
 * The HTTP header a guarded write carries its lease's fencing proof in (DESIGN §4b): the `proof` string of the
 * lease, unchanged. Required when the store verifies proofs; the lease id must then come in
 * `Fencing-Lease-Id`, exactly as granted, because the proof signs its digest.
 */
export const FENCING_PROOF_HEADER = 'Fencing-Proof';

/** The optional HTTP header carrying a guarded write's operation id: retries with the same key take effect once (G5). */
export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';

const DECIMAL = /^(0|[1-9][0-9]{0,18})$/;

/**
 * Parses a token from its wire form: a decimal string without sign, spaces, leading zeros or exponent.
 * Tokens are strings on the wire and inside Lua because doubles lose precision above 2^53.
 * @throws InvalidRequestError naming what is allowed.
 */
export function parseToken(text: unknown, what = 'fencing token'): bigint {
  if (typeof text !== 'string' || !DECIMAL.test(text)) {
    throw new InvalidRequestError(
      `${what} must be a decimal integer from ${MIN_TOKEN} to ${MAX_TOKEN} (no sign, spaces or leading zeros), got ${describeValue(text)}`,
    );
  }
  const value = BigInt(text);
  if (value < MIN_TOKEN || value > MAX_TOKEN) {
    throw new InvalidRequestError(
      `${what} must be from ${MIN_TOKEN} to ${MAX_TOKEN}, got ${describeValue(text)}`,
    );
  }
  return value;
}

/** Checks a bigint token is in range. */
export function assertToken(value: unknown, what = 'fencing token'): bigint {
  if (typeof value !== 'bigint' || value < MIN_TOKEN || value > MAX_TOKEN) {
    throw new InvalidRequestError(
      `${what} must be a bigint from ${MIN_TOKEN} to ${MAX_TOKEN}, got ${describeValue(value)}`,
    );
  }
  return value;
}

/** The wire form of a token: its decimal digits. @throws InvalidRequestError for a token out of range. */
export function formatToken(token: bigint): string {
  return assertToken(token).toString(10);
}
