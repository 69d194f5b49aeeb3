import type { ErrorCode } from './error-codes.js';

/**
 * The one table from error codes to HTTP statuses (DESIGN §5), used by the coordinator service, its client and
 * the guarded-store write middleware alike.
 */
export const HTTP_STATUS_BY_CODE = Object.freeze({
  INVALID_REQUEST: 400,
  UNAUTHORIZED: 401,
  INVALID_PROOF: 403,
  LOCKED: 409,
  LEASE_LOST: 409,
  STALE_TOKEN: 409,
  MISSING_TOKEN: 428,
  QUORUM_UNAVAILABLE: 503,
  SERVICE_UNREACHABLE: 503,
  UNSAFE_NODE: 503,
  MIGRATION_MISSING: 500,
  INTERNAL: 500,
} as const satisfies Record<ErrorCode, number>);
