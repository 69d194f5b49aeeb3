import {
  ERROR_CODES,
  FencedError,
  HTTP_STATUS_BY_CODE,
  InvalidRequestError,
  MissingTokenError,
  StaleTokenError,
} from '@fenced/shared';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ConnectionLostError, LockTimeoutError, ReadOnlyTransactionError } from '@fenced/guarded-store';
import { storeHttpError as toHttpError } from '../../../packages/guarded-store/src/middleware/http-errors.js';

describe("the write middleware's error answers", () => {
  it('has a status for every error code', () => {
    for (const code of ERROR_CODES) {
      expect(HTTP_STATUS_BY_CODE[code]).toBeGreaterThanOrEqual(400);
      expect(toHttpError(new FencedError(code, 'm')).status).toBe(HTTP_STATUS_BY_CODE[code]);
    }
  });

  it('answers the wire contract of DESIGN §5', () => {
    expect(toHttpError(new MissingTokenError())).toMatchObject({
      status: 428,
      body: { error: { code: 'MISSING_TOKEN' } },
    });
    expect(toHttpError(new InvalidRequestError('bad'))).toMatchObject({
      status: 400,
      body: { error: { code: 'INVALID_REQUEST', message: 'bad' } },
    });
    expect(toHttpError(new StaleTokenError('r', 1n, 2n))).toMatchObject({
      status: 409,
      body: {
        error: {
          code: 'STALE_TOKEN',
          message: expect.stringContaining(
            'stale fencing token for resource "r": presented 1, but the fence is at 2',
          ) as unknown,
        },
      },
    });
  });

  it('answers 503 with Retry-After for retryable and indeterminate storage failures, without internals', () => {
    const cause = Object.assign(new pg.DatabaseError('canceling statement due to lock timeout', 0, 'error'), {
      code: '55P03',
      severity: 'ERROR',
    });
    for (const error of [
      new LockTimeoutError({ cause }),
      new ConnectionLostError(undefined, true, { cause }),
    ]) {
      const answer = toHttpError(error);
      expect(answer).toMatchObject({
        status: 503,
        headers: { 'Retry-After': '1' },
        body: { error: { code: 'INTERNAL' } },
      });
      expect(JSON.stringify(answer.body)).not.toContain('lock timeout');
    }
  });

  it('answers 500 for storage failures a retry will not fix, and for unknown errors', () => {
    expect(toHttpError(new ReadOnlyTransactionError({ cause: null }))).toMatchObject({
      status: 500,
      unexpected: true,
    });
    expect(toHttpError(new Error('secret'))).toEqual({
      status: 500,
      headers: {},
      body: { error: { code: 'INTERNAL', message: 'internal error' } },
      unexpected: true,
    });
  });

  it('answers 400 INVALID_REQUEST for body-parser failures, as the coordinator service does', () => {
    expect(
      toHttpError(Object.assign(new SyntaxError('x'), { status: 400, type: 'entity.parse.failed' })).status,
    ).toBe(400);
    const tooLarge = Object.assign(new Error('x'), { status: 413, type: 'entity.too.large', limit: 100 });
    expect(toHttpError(tooLarge)).toMatchObject({
      status: 400,
      body: {
        error: {
          code: 'INVALID_REQUEST',
          message: 'request body is too large: at most 100 bytes are accepted',
        },
      },
    });
  });
});
