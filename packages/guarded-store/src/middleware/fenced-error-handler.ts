import type { ErrorRequestHandler } from 'express';
import { sendHttpError, storeHttpError } from './http-errors.js';

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
 * Express error handler answering every error with `{ "error": { "code", "message" } }`: 409 STALE_TOKEN when
 * a guarded `run` was fenced off, 503 with Retry-After for retryable storage failures, 400 for bad requests,
 * 500 INTERNAL (no details) for anything else. Mount it after the routes that use `fencedWrites`.
 */
export function fencedErrorHandler(options: FencedErrorHandlerOptions = {}): ErrorRequestHandler {
  return (error: unknown, _req, res, next) => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const answer = storeHttpError(error);
    if (answer.unexpected) options.logger?.error({ err: error }, 'request failed');
    sendHttpError(res, answer);
  };
}
