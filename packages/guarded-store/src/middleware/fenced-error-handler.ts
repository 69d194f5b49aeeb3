import { FencedError, toHttpError } from '@fenced/shared';
import { sendHttpError, storeHttpError } from './http-errors.js';
import type { FencedErrorRequestHandler } from './http-types.js';

/** Options of {@link fencedErrorHandler}. */
export interface FencedErrorHandlerOptions {
  /**
   * Where unexpected errors (500s) are logged, e.g. a pino logger. Expected ones (409, 400, 503) are not.
   * @defaultValue undefined (not logged)
   */
  logger?: {
    /** Called once per unexpected error, with the error as `err` (pino's convention). */
    error: (details: { err: unknown }, message: string) => void;
  };
}

/**
 * Whether the error handler leaves `error` to the next handler untouched: an application's own HTTP error (it
 * carries a `status` or `statusCode` from 400 to 599, as http-errors and most frameworks' errors do, and is
 * neither a fenced error nor one of express's request-parsing errors). A 422 "insufficient funds" stays a 422.
 */
export function isForeignHttpError(error: unknown): boolean {
  if (error instanceof FencedError || typeof error !== 'object' || error === null) return false;
  const { status, statusCode } = error as { status?: unknown; statusCode?: unknown };
  const code = typeof status === 'number' ? status : typeof statusCode === 'number' ? statusCode : NaN;
  if (!(code >= 400 && code < 600)) return false;
  // express's body parsers set `type` (entity.parse.failed …): the guarded request's own body was bad.
  return !isRequestParsingError(error);
}

const PARSING_TYPES = new Set([
  'entity.parse.failed',
  'entity.too.large',
  'entity.verify.failed',
  'charset.unsupported',
  'encoding.unsupported',
  'request.aborted',
  'request.size.invalid',
  'stream.encoding.set',
  'stream.not.readable',
  'parameters.too.many',
]);

function isRequestParsingError(error: object): boolean {
  const { type } = error as { type?: unknown };
  return (typeof type === 'string' && PARSING_TYPES.has(type)) || error instanceof URIError;
}

/**
 * Express error handler for the guarded routes, answering with `{ "error": { "code", "message" } }`: 409
 * STALE_TOKEN when a guarded `run` was fenced off, 403 INVALID_PROOF, 503 with Retry-After for retryable
 * storage failures, 400 for bad requests (a malformed header, a body express could not parse), and 500 INTERNAL
 * (no details) for an error nobody planned for. An application's own HTTP error — one carrying a 4xx or 5xx
 * `status` or `statusCode`, such as a 422 "insufficient funds" — is not its to answer: it goes on to the next
 * error handler untouched (express's default answers with its status). Mount it after the routes that use
 * `fencedWrites`, after your own error handlers or before them.
 */
export function fencedErrorHandler(options: FencedErrorHandlerOptions = {}): FencedErrorRequestHandler {
  return (error: unknown, _req, res, next) => {
    if (res.headersSent || isForeignHttpError(error)) {
      next(error);
      return;
    }
    const answer = error instanceof FencedError ? storeHttpError(error) : toHttpError(error);
    if (answer.unexpected) options.logger?.error({ err: error }, 'request failed');
    sendHttpError(res, answer);
  };
}
