import {
  ErrorCode,
  FencedError,
  InternalError,
  InvalidProofError,
  InvalidRequestError,
  LeaseLostError,
  LockedError,
  MissingTokenError,
  QuorumUnavailableError,
  UnauthorizedError,
  isErrorCode,
} from '@fenced/shared';

/**
 * The typed error of `@fenced/shared` for an error response of the service (`{ error: { code, message } }`).
 * A body that is not the documented shape (a proxy's 502 page, say) becomes `INTERNAL`, or
 * `QUORUM_UNAVAILABLE` for 502/503/504 so that it is retried like the service's own 503.
 */
export function errorFromResponse(status: number, body: unknown, resource: string): FencedError {
  const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  const message = typeof error?.message === 'string' ? error.message : `HTTP ${status} from the coordinator`;
  if (!isErrorCode(error?.code)) {
    return status === 502 || status === 503 || status === 504
      ? new QuorumUnavailableError(message)
      : new InternalError(message);
  }
  switch (error.code) {
    case ErrorCode.INVALID_REQUEST:
      return new InvalidRequestError(message);
    case ErrorCode.UNAUTHORIZED:
      return new UnauthorizedError(message);
    case ErrorCode.LOCKED:
      return new LockedError(resource, message);
    case ErrorCode.QUORUM_UNAVAILABLE:
      return new QuorumUnavailableError(message);
    case ErrorCode.LEASE_LOST:
      return new LeaseLostError(resource, message);
    case ErrorCode.MISSING_TOKEN:
      return new MissingTokenError(message);
    case ErrorCode.INVALID_PROOF:
      // The coordinator never sends it (a guarded store does); the reason is not on the wire.
      return new InvalidProofError(resource, 'mismatch', message);
    case ErrorCode.INTERNAL:
      return new InternalError(message);
    case ErrorCode.UNSAFE_NODE:
    case ErrorCode.MIGRATION_MISSING:
      // The service's own configuration is wrong (the details are in its log): not retried.
      return new FencedError(error.code, message);
    case ErrorCode.STALE_TOKEN:
    case ErrorCode.SERVICE_UNREACHABLE:
      // The coordinator never sends these: StaleTokenError needs token facts the body does not carry, and
      // SERVICE_UNREACHABLE is the client's own verdict.
      return new FencedError(error.code, message);
  }
}

/** Socket error codes, as fetch (undici) reports them in its error's `cause` chain, in words. */
const NETWORK_FAILURES: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'connect timed out',
  UND_ERR_CONNECT_TIMEOUT: 'connect timed out',
  UND_ERR_SOCKET: 'connection closed',
  EPIPE: 'connection closed',
};

/** What went wrong with a fetch that threw: the socket error code in words, else the innermost message. */
export function networkFailure(error: unknown): string {
  let innermost = 'network error';
  const seen = new Set<unknown>();
  const queue: unknown[] = [error];
  while (queue.length > 0) {
    const current = queue.shift();
    if (typeof current !== 'object' || current === null || seen.has(current)) continue;
    seen.add(current);
    const { code, message, cause, errors } = current as {
      code?: unknown;
      message?: unknown;
      cause?: unknown;
      errors?: unknown;
    };
    if (typeof code === 'string' && code in NETWORK_FAILURES) return `${NETWORK_FAILURES[code]} (${code})`;
    if (typeof message === 'string' && message !== '' && message !== 'fetch failed') innermost = message;
    queue.push(cause, ...(Array.isArray(errors) ? (errors as unknown[]) : []));
  }
  return innermost;
}
