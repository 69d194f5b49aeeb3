/**
 * The one list of error codes, shared by the coordinator, its HTTP API, the client and the guarded store.
 * Every error body on the wire is `{ "error": { "code": ErrorCode, "message": string } }`.
 */
export const ErrorCode = {
  /** The request or the options were malformed; the message says what is allowed. */
  INVALID_REQUEST: 'INVALID_REQUEST',
  /** No valid API key was presented. */
  UNAUTHORIZED: 'UNAUTHORIZED',
  /** The lease was not granted within the wait: somebody else holds it. */
  LOCKED: 'LOCKED',
  /** A majority of the Redis nodes could not be reached (or refused to vote). */
  QUORUM_UNAVAILABLE: 'QUORUM_UNAVAILABLE',
  /** The lease was held and has been lost (expired or taken over): had it and lost it. */
  LEASE_LOST: 'LEASE_LOST',
  /** A guarded write carried a token below the resource's fence (or equal, from another lease). */
  STALE_TOKEN: 'STALE_TOKEN',
  /** A guarded write carried no fencing token. */
  MISSING_TOKEN: 'MISSING_TOKEN',
  /**
   * A guarded write's fencing proof was missing, malformed, signed by an unknown key, or not valid for exactly
   * its resource, token and lease (DESIGN §4b). Refused before the fence row is touched.
   */
  INVALID_PROOF: 'INVALID_PROOF',
  /**
   * The client could not reach the service (connection refused, timed out, network failure). Raised by
   * clients only; never sent by a server.
   */
  SERVICE_UNREACHABLE: 'SERVICE_UNREACHABLE',
  /**
   * A Redis node has settings that could lose fencing tokens (persistence, eviction policy, role) and was refused
   * (`UnsafeNodeError` of @fenced/coordinator, which names the node and the setting). Not a passing outage: the
   * node's configuration must change. Over HTTP the details stay in the server log.
   */
  UNSAFE_NODE: 'UNSAFE_NODE',
  /**
   * The guarded store's tables do not exist in its schema: `migrate()` was never run there
   * (`MigrationMissingError` of @fenced/guarded-store). Over HTTP the details stay in the server log.
   */
  MIGRATION_MISSING: 'MIGRATION_MISSING',
  /** Anything unexpected; the details stay in the server log. */
  INTERNAL: 'INTERNAL',
} as const;

/** One of the stable error codes of {@link ErrorCode}. */
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** Every error code, for exhaustive tables and tests. */
export const ERROR_CODES: readonly ErrorCode[] = Object.freeze(Object.values(ErrorCode));

/** Whether `value` is one of the {@link ERROR_CODES} (for example a code read from an error body). */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && (ERROR_CODES as readonly string[]).includes(value);
}
