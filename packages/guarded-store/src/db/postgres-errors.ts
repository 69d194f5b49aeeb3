import { ErrorCode, FencedError } from '@fenced/shared';

/** The SQLSTATEs the store treats specially, by name (https://www.postgresql.org/docs/current/errcodes-appendix.html). */
export const SqlState = {
  LOCK_NOT_AVAILABLE: '55P03',
  SERIALIZATION_FAILURE: '40001',
  DEADLOCK_DETECTED: '40P01',
  QUERY_CANCELED: '57014',
  IDLE_IN_TRANSACTION_SESSION_TIMEOUT: '25P03',
  READ_ONLY_SQL_TRANSACTION: '25006',
  IN_FAILED_SQL_TRANSACTION: '25P02',
  ADMIN_SHUTDOWN: '57P01',
  CRASH_SHUTDOWN: '57P02',
  CANNOT_CONNECT_NOW: '57P03',
  TOO_MANY_CONNECTIONS: '53300',
  UNDEFINED_TABLE: '42P01',
  UNDEFINED_FUNCTION: '42883',
  INVALID_SCHEMA_NAME: '3F000',
  INVALID_SQL_STATEMENT_NAME: '26000',
  DUPLICATE_PREPARED_STATEMENT: '42P05',
} as const;
/** One of the SQLSTATEs of {@link SqlState}. */
export type SqlState = (typeof SqlState)[keyof typeof SqlState];

/** SQLSTATE class 08: connection exception. */
const CONNECTION_EXCEPTION_CLASS = '08';

/** Socket errors from Node's net layer that mean the connection is gone. */
const SOCKET_ERROR_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTCONN',
]);

/**
 * pg reports a dead connection with plain errors that carry no code; these are its messages (pg 8).
 * Matching messages is fragile, so it is confined to these two lists and pinned by the unit tests.
 * The first list: the statement reached (or may have reached) the server before the connection died.
 */
const PG_CONNECTION_LOST_MESSAGES = ['Connection terminated', 'timeout exceeded when trying to connect'];
/** The connection was already dead, so the statement was never sent: a COMMIT refused this way did not happen. */
const PG_NOT_SENT_MESSAGES = [
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
];

/**
 * A Postgres failure of a guarded (or read) transaction, classified. `cause` is the driver error.
 * The wire code is INTERNAL (MIGRATION_MISSING for a missing migration): the store's callers see a 503
 * (retryable) or 500, never the internals.
 */
export class StorageError extends FencedError {
  override readonly name: string = 'StorageError';
  constructor(
    message: string,
    /** The driver's SQLSTATE, when Postgres sent one. */
    readonly sqlstate: string | undefined,
    /** The transaction certainly did not commit, and running it again may succeed. */
    readonly retryable: boolean,
    options: { cause: unknown },
    /** `INTERNAL` but for a missing migration (`MIGRATION_MISSING`). */
    code: ErrorCode = ErrorCode.INTERNAL,
  ) {
    super(code, message, options);
  }
}

/** 55P03: a lock wait (the fence row first) outlasted `lock_timeout`. Rolled back; retry. */
export class LockTimeoutError extends StorageError {
  override readonly name = 'LockTimeoutError';
  constructor(options: { cause: unknown }) {
    super(
      'gave up waiting for a lock (lock_timeout): another transaction holds it',
      SqlState.LOCK_NOT_AVAILABLE,
      true,
      options,
    );
  }
}

/** 40001: a serialization failure (stricter isolation levels). Rolled back; retry. */
export class SerializationFailureError extends StorageError {
  override readonly name = 'SerializationFailureError';
  constructor(options: { cause: unknown }) {
    super(
      'the transaction conflicted with a concurrent one (serialization failure)',
      SqlState.SERIALIZATION_FAILURE,
      true,
      options,
    );
  }
}

/** 40P01: Postgres broke a deadlock by rolling this transaction back. Retry. */
export class DeadlockDetectedError extends StorageError {
  override readonly name = 'DeadlockDetectedError';
  constructor(options: { cause: unknown }) {
    super('the transaction was chosen as a deadlock victim', SqlState.DEADLOCK_DETECTED, true, options);
  }
}

/** 57014: the statement was canceled (statement_timeout or a cancel request). Rolled back; retry. */
export class QueryCanceledError extends StorageError {
  override readonly name = 'QueryCanceledError';
  constructor(options: { cause: unknown }) {
    super(
      'a statement was canceled (statement_timeout or cancel request)',
      SqlState.QUERY_CANCELED,
      true,
      options,
    );
  }
}

/** 25P03: the transaction sat idle longer than `idle_in_transaction_session_timeout`; Postgres ended the session. */
export class IdleInTransactionTimeoutError extends StorageError {
  override readonly name = 'IdleInTransactionTimeoutError';
  constructor(options: { cause: unknown }) {
    super(
      'the transaction sat idle too long (idle_in_transaction_session_timeout) and was rolled back',
      SqlState.IDLE_IN_TRANSACTION_SESSION_TIMEOUT,
      true,
      options,
    );
  }
}

/**
 * The connection failed (SQLSTATE class 08, a server shutdown 57P0x, too many connections, a socket error).
 * When it failed while the COMMIT was in flight the outcome is unknown (`indeterminate`): the write may have
 * committed. Retrying with the same operation id is safe either way (G5).
 */
export class ConnectionLostError extends StorageError {
  override readonly name = 'ConnectionLostError';
  constructor(
    sqlstate: string | undefined,
    /** The COMMIT was sent and no answer came back: the transaction may or may not have committed. */
    readonly indeterminate: boolean,
    options: { cause: unknown },
    /** What failed, when more is known than "the connection failed" (a refused connection names host and port). */
    message?: string,
  ) {
    super(
      message ??
        (indeterminate
          ? 'the database connection failed during COMMIT: the write may or may not have committed'
          : 'the database connection failed; the transaction did not commit'),
      sqlstate,
      !indeterminate,
      options,
    );
  }
}

/** 25006: a write inside `read()`. Not retryable: writes go through `run()`. */
export class ReadOnlyTransactionError extends StorageError {
  override readonly name = 'ReadOnlyTransactionError';
  constructor(options: { cause: unknown }) {
    super(
      'a read() transaction tried to write: guarded writes go through run()',
      SqlState.READ_ONLY_SQL_TRANSACTION,
      false,
      options,
    );
  }
}

/**
 * 25P02, or COMMIT answered ROLLBACK: a statement of the transaction failed, the callback caught the error and
 * carried on, and Postgres rolled the whole transaction back (the fence included). Nothing was committed. Not
 * retryable as it is: the failing statement would most likely fail again. `cause` is that statement's error
 * when the store saw it, else the driver's 25P02 error (or `undefined`).
 */
export class TransactionAbortedError extends StorageError {
  override readonly name = 'TransactionAbortedError';
  constructor(options: { cause: unknown }) {
    super(
      'a statement in the transaction failed and its error was caught without rethrowing: Postgres rolled the transaction back, nothing was committed',
      SqlState.IN_FAILED_SQL_TRANSACTION,
      false,
      options,
    );
  }
}

/**
 * 42P01 on one of the store's own statements: its tables (`fence`, `fence_operation`) do not exist in its
 * schema, because the migrations never ran there (or ran in another schema). Not retryable: run them first.
 * Its code is `MIGRATION_MISSING` (a 500 over HTTP, with the details in the server log only).
 */
export class MigrationMissingError extends StorageError {
  override readonly name = 'MigrationMissingError';
  constructor(
    /** The schema the store looked in. */
    readonly schema: string,
    options: { cause: unknown },
  ) {
    super(
      `the guarded store's tables do not exist in schema "${schema}" (${describeCause(options.cause)}): ` +
        `call store.migrate() (or migrate(db, { schema: '${schema}' })) once before using the store; it is ` +
        'safe to run from every process at start-up',
      SqlState.UNDEFINED_TABLE,
      false,
      options,
      ErrorCode.MIGRATION_MISSING,
    );
  }
}

function describeCause(cause: unknown): string {
  return cause instanceof Error ? cause.message : 'relation does not exist';
}

/**
 * Whether a storage failure may succeed on retry: retryable ones, and a COMMIT whose outcome is unknown
 * (retried with the same operation id, it takes effect once). The HTTP layer answers these with 503.
 */
export function isTransientStorageError(error: unknown): boolean {
  return (
    error instanceof StorageError &&
    (error.retryable || (error instanceof ConnectionLostError && error.indeterminate))
  );
}

/** The store's migrations failed. `cause` is the migrator's error. */
export class MigrationError extends FencedError {
  override readonly name = 'MigrationError';
  constructor(message: string, options: { cause: unknown }) {
    super(ErrorCode.INTERNAL, message, options);
  }
}

/**
 * The SQLSTATE of an error Postgres sent. pg's DatabaseError carries it in `code` next to a `severity`; Node's
 * socket errors also use `code` (and 'EPIPE' is five letters too), so the severity tells them apart.
 */
export function sqlstateOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, severity } = error as { code?: unknown; severity?: unknown };
  return typeof code === 'string' && typeof severity === 'string' && /^[0-9A-Z]{5}$/.test(code)
    ? code
    : undefined;
}

/** 'lost': the connection failed with the statement possibly delivered; 'not-sent': it was dead before. */
function connectionFailure(error: unknown, sqlstate: string | undefined): 'lost' | 'not-sent' | undefined {
  if (sqlstate !== undefined) {
    const failed =
      sqlstate.startsWith(CONNECTION_EXCEPTION_CLASS) ||
      sqlstate === SqlState.ADMIN_SHUTDOWN ||
      sqlstate === SqlState.CRASH_SHUTDOWN ||
      sqlstate === SqlState.CANNOT_CONNECT_NOW ||
      sqlstate === SqlState.TOO_MANY_CONNECTIONS;
    return failed ? 'lost' : undefined;
  }
  if (!(error instanceof Error)) return undefined;
  if (PG_NOT_SENT_MESSAGES.some((message) => error.message.startsWith(message))) return 'not-sent';
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && SOCKET_ERROR_CODES.has(code)) return 'lost';
  return PG_CONNECTION_LOST_MESSAGES.some((message) => error.message.startsWith(message))
    ? 'lost'
    : undefined;
}

/**
 * Maps a driver error to a {@link StorageError} subclass by SQLSTATE group, keeping it as `cause`; returns
 * `undefined` for anything else (constraint violations, syntax errors, the caller's own errors), which the
 * store rethrows unchanged.
 * @param duringCommit whether the COMMIT was in flight: a lost connection then leaves the outcome unknown.
 */
export function classifyPostgresError(error: unknown, duringCommit = false): StorageError | undefined {
  if (error instanceof FencedError) return undefined;
  const sqlstate = sqlstateOf(error);
  const options = { cause: error };
  switch (sqlstate) {
    case SqlState.LOCK_NOT_AVAILABLE:
      return new LockTimeoutError(options);
    case SqlState.SERIALIZATION_FAILURE:
      return new SerializationFailureError(options);
    case SqlState.DEADLOCK_DETECTED:
      return new DeadlockDetectedError(options);
    case SqlState.QUERY_CANCELED:
      return new QueryCanceledError(options);
    case SqlState.IDLE_IN_TRANSACTION_SESSION_TIMEOUT:
      return new IdleInTransactionTimeoutError(options);
    case SqlState.READ_ONLY_SQL_TRANSACTION:
      return new ReadOnlyTransactionError(options);
    case SqlState.IN_FAILED_SQL_TRANSACTION:
      return new TransactionAbortedError(options);
  }
  const unreachable = unreachableServer(error);
  if (unreachable !== undefined) return new ConnectionLostError(sqlstate, false, options, unreachable);
  const failure = connectionFailure(error, sqlstate);
  if (failure === undefined) return undefined;
  return new ConnectionLostError(sqlstate, duringCommit && failure === 'lost', options);
}

/** Errors of opening a connection: the server was never reached, so nothing was sent. */
const CONNECT_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * For a connection that could not be opened (refused, no route, unknown host), a message naming where the
 * store tried to connect: `could not connect to Postgres at 127.0.0.1:5999 (ECONNREFUSED) …`. Node's socket
 * errors carry the address and port (an AggregateError of several when a name resolved to several addresses).
 */
function unreachableServer(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code } = error as { code?: unknown };
  if (typeof code !== 'string' || !CONNECT_ERROR_CODES.has(code)) return undefined;
  const parts = error instanceof AggregateError && error.errors.length > 0 ? error.errors : [error];
  const endpoints = [
    ...new Set(
      parts.map((part: unknown) => {
        const { address, port, hostname } = part as { address?: unknown; port?: unknown; hostname?: unknown };
        const host =
          typeof address === 'string' ? address : typeof hostname === 'string' ? hostname : undefined;
        if (host === undefined) return undefined;
        return typeof port === 'number' ? `${host.includes(':') ? `[${host}]` : host}:${port}` : host;
      }),
    ),
  ].filter((endpoint) => endpoint !== undefined);
  // Nothing says where: the generic message of ConnectionLostError is as good.
  if (endpoints.length === 0) return undefined;
  const what =
    code === 'ENOTFOUND' || code === 'EAI_AGAIN' ? 'the host name did not resolve' : 'nothing answered there';
  return (
    `could not connect to Postgres at ${endpoints.join(', ')} (${code}: ${what}): check that the server runs and ` +
    'that the connection string names its host and port; nothing was sent, the transaction did not begin'
  );
}
