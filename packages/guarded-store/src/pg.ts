// `@fenced/guarded-store/pg`: the guard for node-postgres. One statement fences the transaction a `pg` client is
// in (the guard's SQL function, migrations/0005_create_fence_function.sql); `run` also begins and ends it.
import { TransactionAbortedError } from './db/postgres-errors.js';
import type { FenceTarget } from './fence.js';
import type { JsonCompatible } from './json.js';
import { SqlFence, type FenceOutcome, type FenceRow, type SqlFenceOptions } from './sql-fence.js';

export { STALE_TOKEN_SQLSTATE } from './sql-fence.js';
export type { FenceOutcome, SqlFenceOptions } from './sql-fence.js';

/** Options of one fenced transaction. */
export interface PgFenceOptions {
  /**
   * Operation id (G5): when a transaction with this id already committed on the resource, `fence` reports it
   * (`replayed`, `result`) and `run` returns that result without calling its callback. 1–255 visible ASCII
   * characters.
   */
  opId?: string;
}

/**
 * What the guard uses of a node-postgres client (a `Client`, a `PoolClient`): structural, so that these
 * declarations need neither pg's nor @types/pg's types.
 */
export interface PgQueryable {
  /** Runs one statement with positional parameters. */
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[]; command: string }>;
}

/** A checked-out client of a pool (`PoolClient`): a client that goes back with `release`. */
export interface PgPoolClientLike extends PgQueryable {
  /** Gives the client back to its pool (with an error: destroys it). */
  release(error?: Error | boolean): void;
}

/** A node-postgres `Pool`: what hands out clients. */
export interface PgPoolLike<C extends PgPoolClientLike> {
  /** Checks a client out. */
  connect(): Promise<C>;
}

/**
 * The guard for node-postgres transactions (DESIGN §4). Create one per process and configuration; it is safe to
 * share. The guard's migrations must have run in `schema` (`migrate()` of the main entry, once).
 *
 * @example
 * ```ts
 * const guard = new PgGuard({ schema: 'public' });
 * const client = await pool.connect();
 * try {
 *   await client.query('begin');
 *   await guard.fence(client, lease); // StaleTokenError if a later lease has written
 *   await client.query('update account set balance = balance + 10 where id = $1', ['42']);
 *   await client.query('commit');
 * } catch (error) {
 *   await client.query('rollback');
 *   throw error;
 * } finally {
 *   client.release();
 * }
 * ```
 */
export class PgGuard {
  readonly #fence: SqlFence;

  /** @throws InvalidRequestError naming the first bad option. */
  constructor(options: SqlFenceOptions = {}) {
    this.#fence = new SqlFence(options);
  }

  /** The schema of the guard's tables and functions. */
  get schema(): string {
    return this.#fence.schema;
  }

  /**
   * Fences the transaction `client` is in (call it right after BEGIN, before any read or write the lease
   * protects): raises the fence of every resource of `target` to its token, or throws. The fence rows stay
   * locked until the transaction ends.
   * @throws StaleTokenError a later lease has written (or an equal token from another lease): the transaction is
   *   aborted; roll it back.
   * @throws InvalidProofError (with `verifyKeys`) a missing or invalid proof; nothing was sent.
   * @throws InvalidRequestError a bad resource, token, lease id or op id; nothing was sent.
   * @throws StorageError subclasses for classified Postgres failures (lock timeout …).
   */
  async fence(
    client: PgQueryable,
    target: FenceTarget | readonly FenceTarget[],
    options: PgFenceOptions = {},
  ): Promise<FenceOutcome> {
    const { query, fences } = this.#fence.query(target, options.opId);
    try {
      const { rows } = await client.query(query.text, [...query.values]);
      return this.#fence.outcome(rows as FenceRow[], options.opId);
    } catch (error) {
      throw this.#fence.mapError(error, fences);
    }
  }

  /**
   * One fenced transaction on a client of `pool`: BEGIN, the fence, `fn(client)`, with `opId` the result recorded,
   * COMMIT; ROLLBACK when anything throws. The client is released (destroyed after a connection failure).
   * @returns what `fn` returned, or with `opId` the result of the operation that already committed.
   * @throws StaleTokenError fenced off; `fn` did not run, nothing was written.
   * @throws TransactionAbortedError a statement in `fn` failed and `fn` carried on: nothing was committed.
   */
  run<C extends PgPoolClientLike, T>(
    pool: PgPoolLike<C>,
    target: FenceTarget | readonly FenceTarget[],
    fn: (client: C) => Promise<T>,
  ): Promise<T>;
  run<C extends PgPoolClientLike, T>(
    pool: PgPoolLike<C>,
    target: FenceTarget | readonly FenceTarget[],
    fn: (client: C) => Promise<T & JsonCompatible<T>>,
    options: PgFenceOptions,
  ): Promise<T>;
  async run<C extends PgPoolClientLike, T>(
    pool: PgPoolLike<C>,
    target: FenceTarget | readonly FenceTarget[],
    fn: (client: C) => Promise<T>,
    options: PgFenceOptions = {},
  ): Promise<T> {
    // Validated and verified before a connection is taken.
    const { fences } = this.#fence.query(target, options.opId);
    const client = await pool.connect().catch((error: unknown) => {
      throw this.#fence.mapError(error);
    });
    let broken: Error | undefined;
    let phase: 'work' | 'commit' = 'work';
    try {
      await client.query(`begin isolation level ${this.#fence.isolationLevel}`);
      const outcome = await this.fence(client, target, options);
      if (outcome.replayed) {
        await client.query('rollback');
        return outcome.result as T;
      }
      const value = await fn(client);
      if (options.opId !== undefined) {
        const record = this.#fence.recordQuery(fences, options.opId, value);
        await client.query(record.text, [...record.values]);
      }
      phase = 'commit';
      const commit = await client.query('commit');
      if (commit.command === 'ROLLBACK') throw new TransactionAbortedError({ cause: undefined });
      return value;
    } catch (error) {
      if (phase === 'work') {
        await client.query('rollback').catch((rollbackError: unknown) => {
          broken = rollbackError instanceof Error ? rollbackError : new Error(String(rollbackError));
        });
      }
      throw this.#fence.mapError(error, fences, phase === 'commit');
    } finally {
      client.release(broken);
    }
  }
}
