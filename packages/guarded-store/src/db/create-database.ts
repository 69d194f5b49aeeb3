import {
  assertInteger,
  assertMatches,
  InvalidRequestError,
  invalidValue,
  mergeOptions,
} from '@fenced/shared';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { SCHEMA_NAME, SCHEMA_NAME_RULE } from '../options.js';
import { registerStorePool } from './guard-driver.js';

/** Options of {@link createDatabase}. */
export interface DatabaseOptions {
  /** `postgres://user@host:port/database`. */
  connectionString: string;
  /**
   * Schema that unqualified table names resolve to (the connections' `search_path`): usually the same as the
   * store's `schema`, so the application's tables and the store's live together. A lower-case SQL identifier.
   * @defaultValue undefined (the server's default search_path)
   */
  searchPath?: string;
  /**
   * Pool size. Each guarded transaction holds one connection from its first statement to its COMMIT.
   * @defaultValue 10
   */
  maxConnections?: number;
  /**
   * Upper bound for opening a connection.
   * @defaultValue 10_000
   */
  connectionTimeoutMs?: number;
  /**
   * `application_name`, shown in `pg_stat_activity`.
   * @defaultValue 'fenced-guarded-store'
   */
  applicationName?: string;
  /**
   * Called when a connection fails outside of any query (the server ended an idle-in-transaction session, a
   * restart, a network error). The failure also surfaces as a typed error on the next statement of that
   * connection; this hook is for logging. Without it such errors are dropped instead of crashing the process.
   * @defaultValue undefined
   */
  onConnectionError?: (error: Error) => void;
}

/** Defaults of {@link DatabaseOptions} that have one (`searchPath` and `onConnectionError` default to absent). */
export const DEFAULT_DATABASE_OPTIONS = Object.freeze({
  maxConnections: 10,
  connectionTimeoutMs: 10_000,
  applicationName: 'fenced-guarded-store',
} as const satisfies Required<
  Omit<DatabaseOptions, 'connectionString' | 'searchPath' | 'onConnectionError'>
>);

const PG_INT8_OID = 20;

const parseBigInt = (text: string): bigint => BigInt(text);

/** pg's type parsers, except int8 (text format) → `bigint` instead of a string. */
const int8AsBigInt = ((oid: number, format?: 'text' | 'binary'): unknown =>
  oid === PG_INT8_OID && format !== 'binary'
    ? parseBigInt
    : (pg.types.getTypeParser(oid, format) as unknown)) as typeof pg.types.getTypeParser;

/**
 * Builds a Kysely instance over a new `pg` pool, set up the way the guard expects:
 * - `bigint` columns (int8) come back as JS `bigint`, never `number` (tokens reach 2^63 − 1);
 * - `search_path` set at connection start-up when `searchPath` is given;
 * - connection errors outside queries are caught (pg would otherwise crash the process with an unhandled
 *   'error' event, e.g. when Postgres ends an idle-in-transaction session);
 * - a `GuardedStore` over exactly this instance knows its pool: it starts a guarded transaction in one round trip
 *   (BEGIN, settings and fence statement in one message) and turns a COMMIT that Postgres answered with
 *   ROLLBACK into `TransactionAbortedError` (see the store's README). Connection settings are not changed: the
 *   store's settings are `SET LOCAL`, so the pool's other transactions keep the server's defaults.
 *
 * The caller owns the result: `await db.destroy()` closes the pool.
 * @throws InvalidRequestError for bad options.
 */
export function createDatabase<DB>(options: DatabaseOptions): Kysely<DB> {
  const resolved = resolveDatabaseOptions(options);
  const onConnectionError = resolved.onConnectionError ?? (() => undefined);
  const pool = new pg.Pool({
    connectionString: resolved.connectionString,
    max: resolved.maxConnections,
    connectionTimeoutMillis: resolved.connectionTimeoutMs,
    application_name: resolved.applicationName,
    ...(resolved.searchPath === undefined ? {} : { options: `-c search_path=${resolved.searchPath}` }),
    types: { getTypeParser: int8AsBigInt },
  });
  // Idle clients: pg-pool re-emits their errors on the pool. Checked-out clients: pg emits on the client.
  pool.on('error', onConnectionError);
  pool.on('connect', (client) => {
    client.on('error', onConnectionError);
  });
  const db: Kysely<DB> = new StoreKysely<DB>(pool);
  registerStorePool(db, pool);
  return db;
}

/**
 * A Kysely whose `destroy()` always ends its pool: Kysely ends a pool only when its own driver used it, and a pool
 * only a `GuardedStore` used (its transactions run on a private instance over the same pool) would stay open and
 * keep the process alive for pg's idle timeout.
 */
class StoreKysely<DB> extends Kysely<DB> {
  readonly #pool: pg.Pool;
  constructor(pool: pg.Pool) {
    super({ dialect: new PostgresDialect({ pool }) });
    this.#pool = pool;
  }
  override async destroy(): Promise<void> {
    await super.destroy();
    if (!this.#pool.ended) await this.#pool.end();
  }
}

const OPTIONAL_DATABASE_OPTIONS = ['connectionString', 'searchPath', 'onConnectionError'];

function resolveDatabaseOptions(options: DatabaseOptions) {
  const merged = mergeOptions('database', DEFAULT_DATABASE_OPTIONS, options, OPTIONAL_DATABASE_OPTIONS);
  const { searchPath, onConnectionError } = merged;
  if (onConnectionError !== undefined && typeof onConnectionError !== 'function') {
    throw invalidValue('onConnectionError', 'a function', onConnectionError);
  }
  return {
    connectionString: connectionStringOf(merged.connectionString),
    searchPath:
      searchPath === undefined
        ? undefined
        : assertMatches('searchPath', searchPath, SCHEMA_NAME, SCHEMA_NAME_RULE),
    maxConnections: assertInteger('maxConnections', merged.maxConnections, { min: 1, max: 10_000 }),
    connectionTimeoutMs: assertInteger('connectionTimeoutMs', merged.connectionTimeoutMs, {
      min: 1,
      max: 2_147_483_647,
    }),
    applicationName: assertMatches(
      'applicationName',
      merged.applicationName,
      /^.{0,63}$/su,
      'a string of at most 63 characters',
    ),
    onConnectionError: onConnectionError as DatabaseOptions['onConnectionError'],
  };
}

/** Not `assertMatches`: a connection string may hold a password, so its value is never quoted. */
function connectionStringOf(value: unknown): string {
  if (typeof value !== 'string' || !/^postgres(ql)?:\/\//.test(value)) {
    throw new InvalidRequestError(
      `connectionString must be a postgres:// or postgresql:// URL, got ${typeof value === 'string' ? 'another string (not shown: it may hold a password)' : typeof value}`,
    );
  }
  return value;
}
