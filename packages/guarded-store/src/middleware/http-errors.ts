import {
  FencedError,
  HTTP_STATUS_BY_CODE,
  InternalError,
  InvalidRequestError,
  type ErrorBody,
} from '@fenced/shared';
import type { Response } from 'express';
import { StorageError } from '../db/postgres-errors.js';

/** Seconds a client should wait before retrying a write the store could not take right now. */
const RETRY_AFTER_SECONDS = '1';

/** An error as the HTTP layer answers it: status, headers and the wire body. */
export interface HttpError {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: ErrorBody;
  /** Unexpected: log it. */
  readonly unexpected: boolean;
}

/**
 * Maps any error to its HTTP answer. Fenced errors keep their code and message; a storage failure that may
 * succeed on retry is a 503 with Retry-After (code INTERNAL, no internals); express body-parser failures are
 * 400/413 INVALID_REQUEST; everything else is a 500 INTERNAL without details.
 */
export function toHttpError(error: unknown): HttpError {
  if (error instanceof StorageError) {
    const retryable = error.retryable || ('indeterminate' in error && error.indeterminate === true);
    return {
      status: retryable ? 503 : 500,
      headers: retryable ? { 'Retry-After': RETRY_AFTER_SECONDS } : {},
      body: new InternalError(
        retryable
          ? 'the store could not take the write right now; retry (with the same Idempotency-Key)'
          : 'internal error',
      ).toJSON(),
      unexpected: !retryable,
    };
  }
  if (error instanceof FencedError) {
    return {
      status: HTTP_STATUS_BY_CODE[error.code],
      headers: {},
      body: error.toJSON(),
      unexpected: error.code === 'INTERNAL',
    };
  }
  const clientStatus = bodyParserStatus(error);
  if (clientStatus !== undefined) {
    const message =
      clientStatus === 413 ? 'the request body is too large' : 'the request body is not valid JSON';
    return {
      status: clientStatus,
      headers: {},
      body: new InvalidRequestError(message).toJSON(),
      unexpected: false,
    };
  }
  return { status: 500, headers: {}, body: new InternalError().toJSON(), unexpected: true };
}

/** express.json() failures carry `status` 4xx and `expose: true`. */
function bodyParserStatus(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { status, expose } = error as { status?: unknown; expose?: unknown };
  return typeof status === 'number' && status >= 400 && status < 500 && expose === true ? status : undefined;
}

export function sendHttpError(res: Response, error: HttpError): void {
  res.status(error.status).set(error.headers).json(error.body);
}
