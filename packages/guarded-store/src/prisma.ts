// `@fenced/guarded-store/prisma`: the guard for Prisma (interactive transactions, a Postgres driver adapter
// such as @prisma/adapter-pg). One raw statement fences a `$transaction` (the guard's SQL function,
// migrations/0005_create_fence_function.sql). Nothing of Prisma is imported: the client's own types are used.
import type { FenceTarget } from './fence.js';
import type { JsonCompatible } from './json.js';
import { SqlFence, type FenceOutcome, type FenceRow, type SqlFenceOptions } from './sql-fence.js';

export { STALE_TOKEN_SQLSTATE } from './sql-fence.js';
export type { FenceOutcome, SqlFenceOptions } from './sql-fence.js';

/** Options of one fenced transaction. */
export interface PrismaFenceOptions {
  /** Operation id (G5), as `GuardedStore.run`'s: a committed operation with this id is replayed, not run again. */
  opId?: string;
}

/** A Prisma interactive-transaction client (or a client): what runs one raw statement. */
export interface PrismaRawExecutor {
  /** Runs one raw statement with positional parameters and returns its rows. */
  $queryRawUnsafe<R = unknown>(query: string, ...values: unknown[]): PromiseLike<R>;
}

/** A Prisma client: what begins an interactive transaction. */
export interface PrismaTransactional<TX extends PrismaRawExecutor> {
  /** An interactive transaction: COMMIT when `fn` resolves, ROLLBACK when it throws. */
  $transaction<R>(
    fn: (tx: TX) => Promise<R>,
    options?: { isolationLevel?: 'ReadCommitted' | 'RepeatableRead' | 'Serializable'; timeout?: number },
  ): Promise<R>;
}

/** Options of {@link PrismaGuard}: the guard's, and Prisma's interactive-transaction timeout. */
export interface PrismaGuardOptions extends SqlFenceOptions {
  /**
   * Prisma's `timeout` of the transactions `run` begins: how long the callback may take before Prisma rolls the
   * transaction back. Prisma's own default is 5 s.
   * @defaultValue 5_000
   */
  transactionTimeoutMs?: number;
}

const PRISMA_ISOLATION = {
  'read committed': 'ReadCommitted',
  'repeatable read': 'RepeatableRead',
  serializable: 'Serializable',
} as const;

class Replayed extends Error {
  constructor(readonly result: unknown) {
    super('replayed: the operation already committed');
  }
}

/**
 * The guard for Prisma interactive transactions (DESIGN §4). One per process and configuration. The guard's
 * migrations must have run in `schema` (`migrate()` of the main entry, once).
 *
 * @example
 * ```ts
 * const guard = new PrismaGuard({ schema: 'public' });
 * await guard.run(prisma, lease, (tx) =>
 *   tx.account.update({ where: { id: '42' }, data: { balance: { increment: 10 } } }),
 * );
 * ```
 */
export class PrismaGuard {
  readonly #fence: SqlFence;
  readonly #timeout: number;

  /** @throws InvalidRequestError naming the first bad option. */
  constructor(options: PrismaGuardOptions = {}) {
    const { transactionTimeoutMs = 5_000, ...fenceOptions } = options;
    this.#fence = new SqlFence(fenceOptions);
    this.#timeout = transactionTimeoutMs;
  }

  /**
   * Fences the interactive transaction `tx` (first, before the reads and writes the lease protects). The fence
   * rows stay locked until it ends.
   * @throws StaleTokenError fenced off; the transaction is aborted (throw on, and Prisma rolls it back).
   * @throws InvalidProofError (with `verifyKeys`) a missing or invalid proof; nothing was sent.
   * @throws InvalidRequestError a bad resource, token, lease id or op id; nothing was sent.
   */
  async fence(
    tx: PrismaRawExecutor,
    target: FenceTarget | readonly FenceTarget[],
    options: PrismaFenceOptions = {},
  ): Promise<FenceOutcome> {
    const { query, fences } = this.#fence.query(target, options.opId);
    try {
      const rows = await tx.$queryRawUnsafe<FenceRow[]>(query.text, ...query.values);
      return this.#fence.outcome(rows, options.opId);
    } catch (error) {
      throw this.#fence.mapError(error, fences);
    }
  }

  /**
   * `prisma.$transaction(async (tx) => …)` fenced first: the fence, `fn(tx)`, with `opId` the result recorded,
   * COMMIT (Prisma rolls back when anything throws).
   * @returns what `fn` returned, or with `opId` the result of the operation that already committed.
   * @throws StaleTokenError fenced off; `fn` did not run, nothing was written.
   */
  run<TX extends PrismaRawExecutor, T>(
    prisma: PrismaTransactional<TX>,
    target: FenceTarget | readonly FenceTarget[],
    fn: (tx: TX) => Promise<T>,
  ): Promise<T>;
  run<TX extends PrismaRawExecutor, T>(
    prisma: PrismaTransactional<TX>,
    target: FenceTarget | readonly FenceTarget[],
    fn: (tx: TX) => Promise<T & JsonCompatible<T>>,
    options: PrismaFenceOptions,
  ): Promise<T>;
  async run<TX extends PrismaRawExecutor, T>(
    prisma: PrismaTransactional<TX>,
    target: FenceTarget | readonly FenceTarget[],
    fn: (tx: TX) => Promise<T>,
    options: PrismaFenceOptions = {},
  ): Promise<T> {
    const { fences } = this.#fence.query(target, options.opId);
    const { opId } = options;
    try {
      return await prisma.$transaction(
        async (tx) => {
          const outcome = await this.fence(tx, target, options);
          if (outcome.replayed) throw new Replayed(outcome.result);
          const value = await fn(tx);
          if (opId !== undefined) {
            const record = this.#fence.recordQuery(fences, opId, value);
            await tx.$queryRawUnsafe(record.text, ...record.values);
          }
          return value;
        },
        { isolationLevel: PRISMA_ISOLATION[this.#fence.isolationLevel], timeout: this.#timeout },
      );
    } catch (error) {
      if (error instanceof Replayed) return error.result as T;
      throw this.#fence.mapError(error, fences);
    }
  }
}
