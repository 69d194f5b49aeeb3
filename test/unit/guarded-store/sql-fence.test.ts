import { InvalidProofError, InvalidRequestError, LeaseLostError, StaleTokenError } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import { LockTimeoutError } from '../../../packages/guarded-store/src/db/postgres-errors.js';
import { leaseIdHash } from '../../../packages/guarded-store/src/fence.js';
import { SqlFence, staleTokenErrorOf } from '../../../packages/guarded-store/src/sql-fence.js';
import { generateKeyPairSync } from 'node:crypto';

const DETAIL = '{"resource" : "invoice:42", "presented" : "7", "current" : "9", "named_lease" : true}';
const MESSAGE = 'stale fencing token for resource "invoice:42": presented 7, current 9';

/** As node-postgres reports an error Postgres sent. */
function pgError(code: string, message: string, detail?: string): Error {
  return Object.assign(new Error(message), { code, severity: 'ERROR', detail });
}

describe('staleTokenErrorOf', () => {
  it('reads an FN001 from node-postgres, from its DETAIL', () => {
    const error = staleTokenErrorOf(pgError('FN001', MESSAGE, DETAIL));
    expect(error).toBeInstanceOf(StaleTokenError);
    expect(error).toMatchObject({ code: 'STALE_TOKEN', resource: 'invoice:42', presented: 7n, current: 9n });
  });

  it('looks through cause (Drizzle) and meta.driverAdapterError (Prisma)', () => {
    const drizzle = Object.assign(new Error('Failed query: select …'), {
      cause: pgError('FN001', MESSAGE, DETAIL),
    });
    expect(staleTokenErrorOf(drizzle)).toMatchObject({ resource: 'invoice:42', current: 9n });
    const prisma = Object.assign(new Error('Raw query failed. Code: `FN001`. Message: …'), {
      code: 'P2010',
      meta: {
        driverAdapterError: {
          name: 'DriverAdapterError',
          cause: { code: 'FN001', severity: 'ERROR', message: MESSAGE, detail: DETAIL },
        },
      },
    });
    expect(staleTokenErrorOf(prisma)).toMatchObject({ resource: 'invoice:42', presented: 7n, current: 9n });
  });

  it('falls back to the message where a driver drops the DETAIL, and reads an equal token', () => {
    expect(staleTokenErrorOf(pgError('FN001', MESSAGE))).toMatchObject({ presented: 7n, current: 9n });
    const equal = staleTokenErrorOf(
      pgError('FN001', 'fencing token 9 for resource "a \\"b\\"" equals the fence, which another lease …'),
    );
    expect(equal).toMatchObject({ resource: 'a "b"', presented: 9n, current: 9n });
  });

  it('leaves every other error alone', () => {
    expect(staleTokenErrorOf(pgError('23505', 'duplicate key'))).toBeUndefined();
    expect(staleTokenErrorOf(new Error(MESSAGE))).toBeUndefined();
    expect(staleTokenErrorOf(undefined)).toBeUndefined();
    // A cause cycle ends.
    const a: { cause?: unknown } = {};
    const b = { cause: a };
    a.cause = b;
    expect(staleTokenErrorOf(a)).toBeUndefined();
  });
});

describe('SqlFence', () => {
  const fence = new SqlFence({ schema: 'app', lockTimeoutMs: 1_000, idleInTransactionTimeoutMs: 500 });

  it('binds every value as a parameter, sorted as the guard locks them, settings first', () => {
    const { query } = fence.query(
      [
        { resource: 'b', token: 5n, leaseId: 'L' },
        { resource: 'a', token: 7n },
      ],
      'op-1',
    );
    expect(query.text).toContain('"app".fence_each(');
    expect(query.text.indexOf('set_config')).toBeLessThan(query.text.indexOf('fence_each'));
    expect(query.values).toEqual([
      '1000',
      '500',
      '["a","b"]',
      '["7","5"]',
      `[null,"${leaseIdHash('L')}"]`,
      'op-1',
    ]);
    expect(leaseIdHash('L')).toMatch(/^[0-9a-f]{64}$/);
  });

  it('refuses bad input, a released lease and (with verifyKeys) a missing proof before building anything', () => {
    expect(() => fence.query({ resource: '', token: 1n })).toThrow(InvalidRequestError);
    expect(() => fence.query({ resource: 'r', token: 1n }, 'has space')).toThrow(InvalidRequestError);
    expect(() => fence.query({ resource: 'r', id: 'L', token: 1n, released: true } as never)).toThrow(
      LeaseLostError,
    );
    const verifying = new SqlFence({ verifyKeys: { k1: generateKeyPairSync('ed25519').publicKey } });
    expect(verifying.verifiesProofs).toBe(true);
    expect(() => verifying.query({ resource: 'r', token: 1n, leaseId: 'L' })).toThrow(InvalidProofError);
  });

  it('maps FN001 to StaleTokenError and a lock timeout to LockTimeoutError, anything else unchanged', () => {
    expect(fence.mapError(pgError('FN001', MESSAGE, DETAIL))).toBeInstanceOf(StaleTokenError);
    const wrapped = Object.assign(new Error('Failed query'), { cause: pgError('55P03', 'lock timeout') });
    expect(fence.mapError(wrapped)).toBeInstanceOf(LockTimeoutError);
    const own = new Error('mine');
    expect(fence.mapError(own)).toBe(own);
  });

  it('reads a replay only with an operation id', () => {
    expect(fence.outcome([{ replayed: true, result: '{"a":1}' }], 'op')).toEqual({
      replayed: true,
      result: { a: 1 },
    });
    expect(fence.outcome([{ replayed: true, result: null }], 'op')).toEqual({
      replayed: true,
      result: undefined,
    });
    expect(fence.outcome([{ replayed: false, result: null }], undefined)).toEqual({
      replayed: false,
      result: undefined,
    });
  });
});
