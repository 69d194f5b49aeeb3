import { ErrorCode } from './error-codes.js';
import { FencedError, InternalError, InvalidRequestError } from './errors.js';
import { HTTP_STATUS_BY_CODE } from './http-status.js';
import type { ErrorBody } from './lease.js';

/** Seconds a client should wait before retrying a request answered with 503. */
export const RETRY_AFTER_SECONDS = 1;

/** An error as an HTTP server answers it: status, headers and the wire body (DESIGN §5). */
export interface HttpError {
  readonly status: number;
  /** `Retry-After` on every 503; nothing else. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: ErrorBody;
  /** Nobody planned for this error: log it with its stack. Its details are not in the body. */
  readonly unexpected: boolean;
}

/** Options of {@link toHttpError}. */
export interface HttpErrorOptions {
  /**
   * For an `INTERNAL` fenced error that a retry may fix (a lock timeout, a lost database connection), the
   * message to answer with; `undefined` for the others. Such an error is answered `503` with `Retry-After`,
   * code `INTERNAL`, and without its own message (which may name internals).
   * @defaultValue no error is transient
   */
  transient?: (error: FencedError) => string | undefined;
}

/**
 * The one mapping from anything thrown while serving a request to its HTTP answer, used by the coordinator
 * service and the guarded-store write middleware alike:
 *
 * - a fenced error keeps its code and message and gets its status from {@link HTTP_STATUS_BY_CODE} (messages
 *   are written for callers and never carry lease ids); `INTERNAL` ones answer `internal error` only, or 503
 *   when `options.transient` says a retry may fix them;
 * - `UNSAFE_NODE` and `MIGRATION_MISSING` (the server's configuration is wrong) keep their code and status with a
 *   stable message, and count as unexpected (to be logged with their details);
 * - request-parsing failures of express and body-parser (a 4xx `status` and a `type`) become
 *   `400 INVALID_REQUEST` with a message of ours (theirs may echo the raw input): one code, one status, so an
 *   oversized body is a 400 whose message gives the limit;
 * - everything else is `500 INTERNAL` without details.
 */
export function toHttpError(error: unknown, options: HttpErrorOptions = {}): HttpError {
  if (error instanceof FencedError) {
    // The server's own configuration is wrong: the caller gets the code and a stable message; the node
    // addresses, settings and schema names of the error's message stay in the server log.
    const serverSide = SERVER_SIDE_MESSAGES[error.code];
    if (serverSide !== undefined) {
      return answer(HTTP_STATUS_BY_CODE[error.code], new FencedError(error.code, serverSide), true);
    }
    if (error.code === ErrorCode.INTERNAL) {
      const retry = options.transient?.(error);
      return retry === undefined
        ? answer(HTTP_STATUS_BY_CODE.INTERNAL, new InternalError(), true)
        : answer(503, new InternalError(retry), false);
    }
    return answer(HTTP_STATUS_BY_CODE[error.code], error, false);
  }
  const clientError = fromRequestParsingError(error);
  if (clientError !== undefined) return answer(HTTP_STATUS_BY_CODE.INVALID_REQUEST, clientError, false);
  return answer(HTTP_STATUS_BY_CODE.INTERNAL, new InternalError(), true);
}

/** Codes of errors about the server's own configuration: the stable message a caller gets instead of theirs. */
const SERVER_SIDE_MESSAGES: Partial<Record<ErrorCode, string>> = {
  [ErrorCode.UNSAFE_NODE]:
    'a Redis node of the service was refused for settings that could lose fencing tokens (details are in the server log)',
  [ErrorCode.MIGRATION_MISSING]:
    "the server's database has no guarded-store tables: it was not migrated (details are in the server log)",
};

function answer(status: number, error: FencedError, unexpected: boolean): HttpError {
  return {
    status,
    headers: status === 503 ? { 'Retry-After': String(RETRY_AFTER_SECONDS) } : {},
    body: error.toJSON(),
    unexpected,
  };
}

/** body-parser and router errors carry a 4xx `status` (or `statusCode`) and a `type`. */
function fromRequestParsingError(error: unknown): InvalidRequestError | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { status, statusCode, type, limit } = error as {
    status?: unknown;
    statusCode?: unknown;
    type?: unknown;
    limit?: unknown;
  };
  const code = typeof status === 'number' ? status : typeof statusCode === 'number' ? statusCode : NaN;
  if (!(code >= 400 && code < 500)) return undefined;
  switch (type) {
    case 'entity.parse.failed':
      return new InvalidRequestError('request body is not valid JSON (a JSON object is expected)');
    case 'entity.too.large':
      return new InvalidRequestError(
        `request body is too large${typeof limit === 'number' ? `: at most ${limit} bytes are accepted` : ''}`,
      );
    case 'charset.unsupported':
    case 'encoding.unsupported':
      return new InvalidRequestError('request body must be UTF-8 JSON without content encoding');
    case 'request.aborted':
    case 'request.size.invalid':
      return new InvalidRequestError('request body ended early or did not match its Content-Length');
    default:
      if (error instanceof URIError || /decode param/i.test(String((error as Error).message))) {
        return new InvalidRequestError('a path segment is not valid percent-encoded UTF-8');
      }
      return new InvalidRequestError('malformed request');
  }
}
