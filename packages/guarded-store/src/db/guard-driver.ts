import {
  CompiledQuery,
  IdentifierNode,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  RawNode,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type QueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';
import type pg from 'pg';
import { SqlState, sqlstateOf, TransactionAbortedError } from './postgres-errors.js';

/**
 * The transactions of a `GuardedStore` over a pool that `createDatabase` made: a private Kysely instance on the
 * same `pg` pool whose driver
 *
 * - sends BEGIN together with the store's fence statement in one simple-protocol message (escaped literals, no
 *   bound parameters: see {@link storeStatement}), so BEGIN, the settings and the fence row upsert cost one
 *   round trip instead of two. A transaction whose first statement is anything else sends BEGIN on its own
 *   first, as the stock driver does;
 * - runs the one-fence statements as server-side prepared statements, prepared once per connection (their own
 *   round trips, the first time): Postgres then skips parsing and planning them in every transaction. If a
 *   statement is gone (someone ran DEALLOCATE or DISCARD on the pooled connection), the transaction is rolled
 *   back and run once more with the statement's literal form;
 * - reads the command tag of COMMIT: Postgres answers COMMIT of a transaction that an error aborted with
 *   ROLLBACK, which the stock driver reports as success. Here it is a {@link TransactionAbortedError}, unless
 *   the transaction was read-only (nothing was lost).
 *
 * Everything else behaves as Kysely's `PostgresDriver`: results, errors (with the caller's stack appended),
 * savepoints, no streaming without a cursor.
 */

/** The `pg` pool of each Kysely instance `createDatabase` built (the store did not create any other pool). */
const storePools = new WeakMap<object, pg.Pool>();
/** One private Kysely per pool, shared by the stores over it. */
const guardDatabases = new WeakMap<pg.Pool, Kysely<unknown>>();

/** A statement of the store: what {@link storeStatement} takes. */
export interface StoreStatement {
  /**
   * The statements to run after BEGIN, several separated by semicolons; the result is the rows of all of them
   * and the command tag of the last. (With `prepared`, it may be a getter: it is read only when the prepared
   * statements cannot be used.)
   */
  readonly text: string;
  /**
   * Optionally the same work as server-side prepared statements: `text` is then used only when one of them
   * cannot be (it vanished from the session).
   */
  readonly prepared?: {
    /** The statements to prepare once per connection. */
    readonly statements: readonly PreparedStatement[];
    /** What to run after BEGIN instead of `text`: the same settings, then `execute <name>(…)` of each. */
    readonly execute: string;
  };
}

/** One server-side prepared statement of the store. */
export interface PreparedStatement {
  /** The statement's name, a plain identifier unique per statement text. */
  readonly name: string;
  /** `prepare <name> (…) as …`. */
  readonly prepare: string;
}

const storeStatements = new WeakMap<CompiledQuery, StoreStatement>();

/**
 * Wraps a statement of the store (no bound parameters) for `trx.executeQuery(…)`: on a transaction of the
 * private instance that has not sent BEGIN yet, it goes out in the same message as BEGIN. Its result is the rows of
 * all its statements and the command tag of the last. Elsewhere (a Kysely the store did not create) it runs as plain SQL text.
 */
export function storeStatement<R>(statement: StoreStatement): CompiledQuery<R> {
  const compiled = CompiledQuery.raw(statement.prepared?.execute ?? statement.text) as CompiledQuery<R>;
  storeStatements.set(compiled, statement);
  return compiled;
}

/** The pool `createDatabase` built `db` over, if it did (for tests of its lifecycle). */
export function storePoolOf(db: object): pg.Pool | undefined {
  return storePools.get(db);
}

/** Called by `createDatabase` for the instance it returns. */
export function registerStorePool(db: object, pool: pg.Pool): void {
  storePools.set(db, pool);
}

/**
 * The private transaction instance for `db` when `createDatabase` built exactly this instance, else
 * `undefined` (a Kysely the caller made, or one derived with `withPlugin`, `withSchema` …: its plugins and
 * configuration are the caller's, so the store uses it as it is).
 */
export function guardTransactionDatabase<DB>(db: Kysely<DB>): Kysely<DB> | undefined {
  const pool = storePools.get(db);
  if (pool === undefined) return undefined;
  let guardDb = guardDatabases.get(pool);
  if (guardDb === undefined) {
    guardDb = new Kysely<unknown>({ dialect: new GuardDialect(pool) });
    guardDatabases.set(pool, guardDb);
  }
  return guardDb as Kysely<DB>;
}

class GuardDialect implements Dialect {
  constructor(private readonly pool: pg.Pool) {}
  createAdapter(): DialectAdapter {
    return new PostgresAdapter();
  }
  createDriver(): Driver {
    return new GuardDriver(this.pool);
  }
  createQueryCompiler(): QueryCompiler {
    return new PostgresQueryCompiler();
  }
  createIntrospector(db: Kysely<unknown>): DatabaseIntrospector {
    return new PostgresIntrospector(db);
  }
}

type CompileQuery = QueryCompiler['compileQuery'];

class GuardDriver implements Driver {
  readonly #connections = new WeakMap<pg.PoolClient, GuardConnection>();
  constructor(private readonly pool: pg.Pool) {}

  async init(): Promise<void> {}

  async acquireConnection(): Promise<DatabaseConnection> {
    const client = await this.pool.connect();
    let connection = this.#connections.get(client);
    if (connection === undefined) {
      connection = new GuardConnection(client);
      this.#connections.set(client, connection);
    }
    return connection;
  }

  beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    let begin = 'start transaction';
    if (settings.isolationLevel !== undefined) begin += ` isolation level ${settings.isolationLevel}`;
    if (settings.accessMode !== undefined) begin += ` ${settings.accessMode}`;
    (connection as GuardConnection).deferBegin(begin, settings.accessMode === 'read only');
    return Promise.resolve();
  }

  commitTransaction(connection: DatabaseConnection): Promise<void> {
    return (connection as GuardConnection).commit();
  }

  rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    return (connection as GuardConnection).rollback();
  }

  async savepoint(connection: DatabaseConnection, name: string, compileQuery: CompileQuery): Promise<void> {
    await connection.executeQuery(compileQuery(savepointCommand('savepoint', name), { queryId: name }));
  }

  async rollbackToSavepoint(
    connection: DatabaseConnection,
    name: string,
    compileQuery: CompileQuery,
  ): Promise<void> {
    await connection.executeQuery(compileQuery(savepointCommand('rollback to', name), { queryId: name }));
  }

  async releaseSavepoint(
    connection: DatabaseConnection,
    name: string,
    compileQuery: CompileQuery,
  ): Promise<void> {
    await connection.executeQuery(compileQuery(savepointCommand('release', name), { queryId: name }));
  }

  releaseConnection(connection: DatabaseConnection): Promise<void> {
    (connection as GuardConnection).release();
    return Promise.resolve();
  }

  /** The pool belongs to the instance `createDatabase` returned; its `destroy()` ends it. */
  async destroy(): Promise<void> {}
}

/** As Kysely's savepoint parser: the name goes through the compiler as an identifier. */
function savepointCommand(command: string, name: string): RawNode {
  return RawNode.createWithChildren([RawNode.createWithSql(`${command} `), IdentifierNode.create(name)]);
}

type PgResult = pg.QueryResult<Record<string, unknown>>;

class GuardConnection implements DatabaseConnection {
  readonly #client: pg.PoolClient;
  /** BEGIN not sent yet: it goes out with the next statement. */
  #pendingBegin: string | undefined;
  /** BEGIN went out and no COMMIT or ROLLBACK has come back. */
  #inTransaction = false;
  /** The first statement that failed in the current transaction (the cause of an aborted COMMIT). */
  #failure: unknown;
  /** A read-only transaction: an aborted one lost nothing, so its COMMIT answering ROLLBACK is no error. */
  #readOnly = false;
  /** Names of the store's statements prepared on this connection's session. */
  readonly #prepared = new Set<string>();

  constructor(client: pg.PoolClient) {
    this.#client = client;
  }

  deferBegin(begin: string, readOnly: boolean): void {
    this.#pendingBegin = begin;
    this.#readOnly = readOnly;
    this.#inTransaction = false;
    this.#failure = undefined;
  }

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    try {
      const statement = storeStatements.get(compiledQuery);
      if (statement !== undefined) return storeResult<R>(await this.#runStoreStatement(statement));
      const begin = this.#takeBegin();
      if (begin !== undefined) await this.#client.query(begin);
      const result = (await this.#client.query(compiledQuery.sql, [...compiledQuery.parameters])) as
        PgResult | PgResult[];
      return toQueryResult<R>(result);
    } catch (error) {
      if (this.#inTransaction) this.#failure ??= error;
      throw extendStackTrace(error, new Error());
    }
  }

  /** The pending BEGIN, if any, now counted as sent. */
  #takeBegin(): string | undefined {
    const begin = this.#pendingBegin;
    if (begin !== undefined) {
      this.#pendingBegin = undefined;
      this.#inTransaction = true;
    }
    return begin;
  }

  async #runStoreStatement(statement: StoreStatement): Promise<PgResult | PgResult[]> {
    const { prepared } = statement;
    for (const one of prepared?.statements ?? []) if (!this.#prepared.has(one.name)) await this.#prepare(one);
    const begin = this.#takeBegin();
    const message = (body: string) => (begin === undefined ? body : `${begin};\n${body}`);
    if (prepared === undefined) return await this.#client.query(message(statement.text));
    try {
      return await this.#client.query(message(prepared.execute));
    } catch (error) {
      // 26000: no prepared statement of that name. The session lost it (DEALLOCATE, DISCARD ALL), so BEGIN
      // and the settings ran and the transaction is aborted; nothing else happened in it yet. Start over once
      // with the literal form, and prepare again next time.
      if (begin === undefined || sqlstateOf(error) !== SqlState.INVALID_SQL_STATEMENT_NAME) throw error;
      for (const one of prepared.statements) this.#prepared.delete(one.name);
      await this.#client.query('rollback');
      return await this.#client.query(message(statement.text));
    }
  }

  /** PREPARE, in its own round trip, once per connection (prepared statements outlive transactions). */
  async #prepare(prepared: PreparedStatement): Promise<void> {
    try {
      await this.#client.query(prepared.prepare);
    } catch (error) {
      // 42P05: the session already has a statement of that name, which we did not prepare: replace it.
      if (sqlstateOf(error) !== SqlState.DUPLICATE_PREPARED_STATEMENT) throw error;
      await this.#client.query(`deallocate ${prepared.name};\n${prepared.prepare}`);
    }
    this.#prepared.add(prepared.name);
  }

  // eslint-disable-next-line require-yield -- as Kysely's PostgresConnection without a cursor
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    await Promise.resolve();
    throw new Error(
      "'cursor' is not present in your postgres dialect config. It's required to make streaming work in postgres.",
    );
  }

  async commit(): Promise<void> {
    if (this.#pendingBegin !== undefined) {
      // Nothing was sent: there is no transaction to commit.
      this.#pendingBegin = undefined;
      return;
    }
    let result: PgResult;
    try {
      result = await this.#client.query('commit');
    } catch (error) {
      throw extendStackTrace(error, new Error());
    }
    this.#inTransaction = false;
    if (result.command === 'ROLLBACK' && !this.#readOnly) {
      // A statement failed, the callback carried on, and Postgres rolled everything back at COMMIT.
      throw new TransactionAbortedError({ cause: this.#failure });
    }
  }

  async rollback(): Promise<void> {
    if (this.#pendingBegin !== undefined) {
      this.#pendingBegin = undefined;
      return;
    }
    if (!this.#inTransaction) return;
    try {
      await this.#client.query('rollback');
    } catch (error) {
      throw extendStackTrace(error, new Error());
    } finally {
      this.#inTransaction = false;
    }
  }

  release(): void {
    this.#pendingBegin = undefined;
    this.#inTransaction = false;
    this.#failure = undefined;
    this.#client.release();
  }
}

/** As Kysely's PostgresConnection (several results, as pg returns for several statements, carry no rows). */
function toQueryResult<R>(result: PgResult | PgResult[]): QueryResult<R> {
  const { command, rowCount, rows } = result as Partial<PgResult>;
  const affects = command === 'INSERT' || command === 'UPDATE' || command === 'DELETE' || command === 'MERGE';
  return {
    numAffectedRows: affects ? BigInt(rowCount ?? 0) : undefined,
    rows: (rows ?? []) as R[],
  };
}

/** A store statement's result: the rows of every statement of its message, the command tag of the last. */
function storeResult<R>(result: PgResult | PgResult[]): QueryResult<R> {
  const results = Array.isArray(result) ? result : [result];
  return {
    ...toQueryResult<R>(results[results.length - 1]!),
    rows: results.flatMap((one) => (one.rows ?? []) as R[]),
  };
}

/** As Kysely's: the caller's stack below the driver's, so an error points at the query that failed. */
function extendStackTrace(error: unknown, stackError: Error): unknown {
  if (typeof error === 'object' && error !== null && typeof (error as Error).stack === 'string') {
    const extension = stackError.stack?.split('\n').slice(1).join('\n');
    if (extension !== undefined) (error as Error).stack += `\n${extension}`;
  }
  return error;
}
