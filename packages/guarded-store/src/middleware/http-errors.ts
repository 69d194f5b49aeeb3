import { toHttpError, type FencedError, type HttpError } from '@fenced/shared';
import { isTransientStorageError } from '../db/postgres-errors.js';
import type { FencedResponse } from './http-types.js';

const RETRY_MESSAGE = 'the store could not take the write right now; retry (with the same Idempotency-Key)';

/**
 * The shared mapping (`toHttpError` of `@fenced/shared`) with the store's view of which failures a retry may
 * fix: lock timeouts, serialization failures, lost connections and the like answer 503 with Retry-After.
 */
export function storeHttpError(error: unknown): HttpError {
  return toHttpError(error, {
    transient: (fenced: FencedError) => (isTransientStorageError(fenced) ? RETRY_MESSAGE : undefined),
  });
}

export function sendHttpError(res: FencedResponse, error: HttpError): void {
  res.status(error.status).set(error.headers).json(error.body);
}
