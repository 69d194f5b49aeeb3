import { describe, expect, it } from 'vitest';
import {
  HTTP_STATUS_BY_CODE,
  ERROR_CODES,
  FencedError,
  InternalError,
  InvalidRequestError,
  LeaseLostError,
  LockedError,
  QuorumUnavailableError,
  toHttpError,
} from '@fenced/shared';

describe('the error code → HTTP status table', () => {
  it('maps every shared error code to the status of DESIGN §5', () => {
    expect(Object.keys(HTTP_STATUS_BY_CODE).sort()).toEqual([...ERROR_CODES].sort());
    expect(HTTP_STATUS_BY_CODE).toEqual({
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
    });
  });

  it.each(ERROR_CODES.map((code) => [code]))('answers a FencedError with code %s by its row', (code) => {
    const response = toHttpError(new FencedError(code, 'because'));
    expect(response.status).toBe(HTTP_STATUS_BY_CODE[code]);
    expect(response.body.error.code).toBe(code);
  });

  it('keeps the message of errors written for callers', () => {
    expect(toHttpError(new LockedError('r', 'resource is locked')).body).toEqual({
      error: { code: 'LOCKED', message: 'resource is locked' },
    });
    expect(toHttpError(new LeaseLostError('r')).status).toBe(409);
    expect(toHttpError(new QuorumUnavailableError('2 of 5 nodes answered')).status).toBe(503);
    expect(toHttpError(new InvalidRequestError('ttlMs must be ...')).unexpected).toBe(false);
  });

  it("answers the server's configuration errors with their code and a stable message, logged as unexpected", () => {
    const unsafe = toHttpError(
      new FencedError('UNSAFE_NODE', 'refusing a node: node 2 (10.0.0.7:6379): appendfsync is everysec'),
    );
    expect(unsafe).toMatchObject({ status: 503, headers: { 'Retry-After': '1' }, unexpected: true });
    expect(unsafe.body.error.code).toBe('UNSAFE_NODE');
    expect(unsafe.body.error.message).not.toMatch(/10\.0\.0\.7|appendfsync/);
    const migration = toHttpError(
      new FencedError('MIGRATION_MISSING', 'no tables in schema "billing_secret"'),
    );
    expect(migration).toMatchObject({ status: 500, unexpected: true });
    expect(migration.body.error).toEqual({
      code: 'MIGRATION_MISSING',
      message: expect.stringContaining('not migrated') as string,
    });
    expect(migration.body.error.message).not.toContain('billing_secret');
  });

  it('turns unknown errors into 500 INTERNAL without their internals', () => {
    const secret = new Error('ERR connection to 10.0.0.7:6379 failed, lease abc123 args');
    const response = toHttpError(secret);
    expect(response).toEqual({
      status: 500,
      headers: {},
      body: { error: { code: 'INTERNAL', message: 'internal error' } },
      unexpected: true,
    });
    expect(JSON.stringify(toHttpError('a string').body)).not.toContain('string');
    expect(toHttpError(new InternalError('redis said x at 10.0.0.7')).body.error.message).toBe(
      'internal error',
    );
  });

  it('turns body-parser and router errors into 400 INVALID_REQUEST with messages of its own', () => {
    const parse = Object.assign(new SyntaxError('Unexpected token } in JSON at position 7: {"leaseId":'), {
      status: 400,
      type: 'entity.parse.failed',
    });
    expect(toHttpError(parse)).toEqual({
      status: 400,
      headers: {},
      body: {
        error: {
          code: 'INVALID_REQUEST',
          message: 'request body is not valid JSON (a JSON object is expected)',
        },
      },
      unexpected: false,
    });
    const large = Object.assign(new Error('request entity too large'), {
      status: 413,
      type: 'entity.too.large',
      limit: 16384,
    });
    expect(toHttpError(large).status).toBe(400);
    expect(toHttpError(large).body.error.message).toContain('16384 bytes');
    const decode = Object.assign(new URIError("Failed to decode param 'secret-lease-%E0%A4%A'"), {
      status: 400,
    });
    expect(toHttpError(decode).body.error.message).not.toContain('secret');
    expect(
      toHttpError(Object.assign(new Error('x'), { status: 415, type: 'charset.unsupported' })).status,
    ).toBe(400);
  });

  it('answers every 503 with Retry-After', () => {
    expect(toHttpError(new QuorumUnavailableError('2 of 5 nodes answered')).headers).toEqual({
      'Retry-After': '1',
    });
  });

  it('answers INTERNAL errors a retry may fix with 503, the caller-chosen message and no internals', () => {
    const transient = (error: FencedError) => (error.message.includes('timeout') ? 'retry' : undefined);
    expect(toHttpError(new InternalError('lock timeout at 10.0.0.7'), { transient })).toEqual({
      status: 503,
      headers: { 'Retry-After': '1' },
      body: { error: { code: 'INTERNAL', message: 'retry' } },
      unexpected: false,
    });
    expect(toHttpError(new InternalError('disk full'), { transient })).toMatchObject({
      status: 500,
      body: { error: { message: 'internal error' } },
      unexpected: true,
    });
  });

  it('does not take a 5xx status on an unknown error as a client error', () => {
    expect(toHttpError(Object.assign(new Error('x'), { status: 502 })).status).toBe(500);
  });
});
