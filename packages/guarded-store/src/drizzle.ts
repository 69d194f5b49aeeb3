// `@fenced/guarded-store/drizzle`: the guard for Drizzle over Postgres (node-postgres, postgres.js, …). One
// statement fences a `db.transaction` (the guard's SQL function, migrations/0005_create_fence_function.sql).
import { sql, type SQL } from 'drizzle-orm';
import type { FenceTarget } from './fence.js';
import type { JsonCompatible } from './json.js';
import {
  SqlFence,
  type FenceOutcome,
  type FenceQuery,
  type FenceRow,
  type SqlFenceOptions,
} from './sql-fence.js';

export { STALE_TOKEN_SQLSTATE } from './sql-fence.js';
export type { FenceOutcome, SqlFenceOptions } from './sql-fence.js';

/** Options of one fenced transaction. */
export interface DrizzleFenceOptions {
  /** Operation id (G5), as `GuardedStore.run`'s: a committed operation with this id is replayed, not run again. */
  opId?: string;
}

/**
 * A Drizzle Postgres database or transaction: what runs one statement (`execute(sql…)`). Typed without drizzle's
 * own types (`never`: any `execute` fits), so that these declarations load none of drizzle-orm's, whose
 * declarations do not compile with `skipLibCheck: false`.
 */
export interface DrizzleExecutor {
  /** Runs one SQL statement. */
  execute(query: never): PromiseLike<unknown>;
}

/** A Drizzle Postgres database: what begins a transaction. */
export interface DrizzleTransactional<TX extends DrizzleExecutor> {
  /** Runs `fn` in a transaction: COMMIT when it resolves, ROLLBACK when it throws. */
  transaction<R>(
    fn: (tx: TX) => Promise<R>,
    config?: { isolationLevel?: 'read committed' | 'repeatable read' | 'serializable' },
  ): Promise<R>;
}

/** Carries a replayed result out of `db.transaction`, which then rolls back. */
class Replayed extends Error {
  constructor(readonly result: unknown) {
    super('replayed: the operation already committed');
  }
}

/**
 * The guard for Drizzle transactions (DESIGN §4). One per process and configuration. The guard's migrations must
 * have run in `schema` (`migrate()` of the main entry, once).
 *
 * @example
 * ```ts
 * const guard = new DrizzleGuard({ schema: 'public' });
 * await guard.run(db, lease, async (tx) => {
 *   await tx.update(account).set({ balance: sql`${account.balance} + 10` }).where(eq(account.id, '42'));
 * });
 * ```
 */
export class DrizzleGuard {
  readonly #fence: SqlFence;

  /** @throws InvalidRequestError naming the first bad option. */
  constructor(options: SqlFenceOptions = {}) {
    this.#fence = new SqlFence(options);
  }

  /**
   * Fences the transaction `tx` (first, before the reads and writes the lease protects). The fence rows stay
   * locked until it ends.
   * @throws StaleTokenError fenced off; the transaction is aborted (throw on, and Drizzle rolls it back).
   * @throws InvalidProofError (with `verifyKeys`) a missing or invalid proof; nothing was sent.
   * @throws InvalidRequestError a bad resource, token, lease id or op id; nothing was sent.
   */
  async fence(
    tx: DrizzleExecutor,
    target: FenceTarget | readonly FenceTarget[],
    options: DrizzleFenceOptions = {},
  ): Promise<FenceOutcome> {
    const { query, fences } = this.#fence.query(target, options.opId);
    try {
      return this.#fence.outcome(rowsOf(await execute(tx, drizzleSql(query))), options.opId);
    } catch (error) {
      throw this.#fence.mapError(error, fences);
    }
  }

  /**
   * `db.transaction` fenced first: the fence, `fn(tx)`, with `opId` the result recorded, COMMIT (Drizzle rolls
   * back when anything throws).
   * @returns what `fn` returned, or with `opId` the result of the operation that already committed.
   * @throws StaleTokenError fenced off; `fn` did not run, nothing was written.
   */
  run<TX extends DrizzleExecutor, T>(
    db: DrizzleTransactional<TX>,
    target: FenceTarget | readonly FenceTarget[],
    fn: (tx: TX) => Promise<T>,
  ): Promise<T>;
  run<TX extends DrizzleExecutor, T>(
    db: DrizzleTransactional<TX>,
    target: FenceTarget | readonly FenceTarget[],
    fn: (tx: TX) => Promise<T & JsonCompatible<T>>,
    options: DrizzleFenceOptions,
  ): Promise<T>;
  async run<TX extends DrizzleExecutor, T>(
    db: DrizzleTransactional<TX>,
    target: FenceTarget | readonly FenceTarget[],
    fn: (tx: TX) => Promise<T>,
    options: DrizzleFenceOptions = {},
  ): Promise<T> {
    const { fences } = this.#fence.query(target, options.opId);
    const { opId } = options;
    try {
      return await db.transaction(
        async (tx) => {
          const outcome = await this.fence(tx, target, options);
          if (outcome.replayed) throw new Replayed(outcome.result);
          const value = await fn(tx);
          if (opId !== undefined) await execute(tx, drizzleSql(this.#fence.recordQuery(fences, opId, value)));
          return value;
        },
        { isolationLevel: this.#fence.isolationLevel },
      );
    } catch (error) {
      if (error instanceof Replayed) return error.result as T;
      throw this.#fence.mapError(error, fences);
    }
  }
}

/** `tx.execute(query)`, for an executor typed without drizzle's types. */
function execute(tx: DrizzleExecutor, query: SQL): PromiseLike<unknown> {
  return (tx.execute as (this: DrizzleExecutor, q: SQL) => PromiseLike<unknown>).call(tx, query);
}

/** The statement as Drizzle SQL: its text with each `$n` a bound parameter. */
function drizzleSql(query: FenceQuery): SQL {
  const parts = query.text.split(/\$(\d+)/);
  const chunks: SQL[] = [];
  parts.forEach((part, i) => {
    chunks.push(i % 2 === 0 ? sql.raw(part) : sql`${query.values[Number(part) - 1]}`);
  });
  return sql.join(chunks);
}

/** node-postgres answers `{ rows }`, postgres.js an array of rows. */
function rowsOf(result: unknown): FenceRow[] {
  if (Array.isArray(result)) return result as FenceRow[];
  const rows = (result as { rows?: unknown } | null)?.rows;
  return Array.isArray(rows) ? (rows as FenceRow[]) : [];
}
