import { FencedError, StaleTokenError } from '@fenced/shared';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import {
  ConnectionLostError,
  DeadlockDetectedError,
  IdleInTransactionTimeoutError,
  LockTimeoutError,
  QueryCanceledError,
  ReadOnlyTransactionError,
  SerializationFailureError,
  SqlState,
  StorageError,
  TransactionAbortedError,
  classifyPostgresError,
} from '@fenced/guarded-store';

function databaseError(code: string): pg.DatabaseError {
  // As pg's parser fills it in from the server's ErrorResponse.
  const error = new pg.DatabaseError(`postgres says ${code}`, 0, 'error');
  error.code = code;
  error.severity = 'ERROR';
  return error;
}

describe('classifyPostgresError', () => {
  it.each([
    [SqlState.LOCK_NOT_AVAILABLE, LockTimeoutError, true],
    [SqlState.SERIALIZATION_FAILURE, SerializationFailureError, true],
    [SqlState.DEADLOCK_DETECTED, DeadlockDetectedError, true],
    [SqlState.QUERY_CANCELED, QueryCanceledError, true],
    [SqlState.IDLE_IN_TRANSACTION_SESSION_TIMEOUT, IdleInTransactionTimeoutError, true],
    [SqlState.READ_ONLY_SQL_TRANSACTION, ReadOnlyTransactionError, false],
    [SqlState.IN_FAILED_SQL_TRANSACTION, TransactionAbortedError, false],
    ['08006', ConnectionLostError, true],
    ['08003', ConnectionLostError, true],
    [SqlState.ADMIN_SHUTDOWN, ConnectionLostError, true],
    [SqlState.CRASH_SHUTDOWN, ConnectionLostError, true],
    [SqlState.CANNOT_CONNECT_NOW, ConnectionLostError, true],
    [SqlState.TOO_MANY_CONNECTIONS, ConnectionLostError, true],
  ])('maps SQLSTATE %s to %o (retryable: %s), keeping the driver error as cause', (code, type, retryable) => {
    const cause = databaseError(code);
    const error = classifyPostgresError(cause);
    expect(error).toBeInstanceOf(type);
    expect(error).toBeInstanceOf(StorageError);
    expect(error).toBeInstanceOf(FencedError);
    expect(error).toMatchObject({ code: 'INTERNAL', sqlstate: code, retryable, cause, name: type.name });
  });

  it('leaves other SQLSTATEs (constraint violations, syntax errors) to the caller', () => {
    expect(classifyPostgresError(databaseError('23505'))).toBeUndefined();
    expect(classifyPostgresError(databaseError('42601'))).toBeUndefined();
  });

  it('leaves the guard’s own errors and plain errors alone', () => {
    expect(classifyPostgresError(new StaleTokenError('r', 1n, 2n))).toBeUndefined();
    expect(classifyPostgresError(new Error('boom'))).toBeUndefined();
    expect(classifyPostgresError('not an error')).toBeUndefined();
  });

  it.each([
    ['Connection terminated unexpectedly', true],
    ['Connection terminated', true],
    ['timeout exceeded when trying to connect', true],
    ['Client has encountered a connection error and is not queryable', false],
    ['Client was closed and is not queryable', false],
  ])('recognizes pg’s "%s"; during COMMIT indeterminate: %s', (message, indeterminateDuringCommit) => {
    const during = classifyPostgresError(new Error(message), true);
    expect(during).toBeInstanceOf(ConnectionLostError);
    expect((during as ConnectionLostError).indeterminate).toBe(indeterminateDuringCommit);
    expect(during?.retryable).toBe(!indeterminateDuringCommit);
    const before = classifyPostgresError(new Error(message), false);
    expect((before as ConnectionLostError).indeterminate).toBe(false);
    expect(before?.retryable).toBe(true);
  });

  it('recognizes socket errors', () => {
    for (const code of ['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT']) {
      const error = Object.assign(new Error(`socket ${code}`), { code });
      expect(classifyPostgresError(error)).toBeInstanceOf(ConnectionLostError);
    }
  });
});

describe('a connection that could not be opened', () => {
  it('names the host and port tried, for one address and for several (a name that resolved to two)', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5999'), {
      code: 'ECONNREFUSED',
      address: '127.0.0.1',
      port: 5999,
    });
    const one = classifyPostgresError(refused);
    expect(one).toBeInstanceOf(ConnectionLostError);
    expect(one?.message).toMatch(/^could not connect to Postgres at 127\.0\.0\.1:5999 \(ECONNREFUSED: /);
    expect(one?.retryable).toBe(true);
    const both = Object.assign(
      new AggregateError([
        Object.assign(new Error('a'), { code: 'ECONNREFUSED', address: '::1', port: 5432 }),
        Object.assign(new Error('b'), { code: 'ECONNREFUSED', address: '127.0.0.1', port: 5432 }),
      ]),
      { code: 'ECONNREFUSED' },
    );
    expect(classifyPostgresError(both)?.message).toContain('at [::1]:5432, 127.0.0.1:5432 (ECONNREFUSED');
    const unknownHost = Object.assign(new Error('getaddrinfo ENOTFOUND db.invalid'), {
      code: 'ENOTFOUND',
      hostname: 'db.invalid',
    });
    expect(classifyPostgresError(unknownHost)?.message).toContain(
      'at db.invalid (ENOTFOUND: the host name did not resolve',
    );
  });
});
