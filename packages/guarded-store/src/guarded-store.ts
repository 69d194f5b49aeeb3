// The guard's public API: `GuardedStore` with run (the fence transaction of DESIGN §4, for one fence, a lease, or
// several), fenceIn, read, fenceOf, the audited resetFence, and the loudly named unguarded path. Just over 400
// lines because the order of statements in the fence transaction is the safety argument and reads best in one
// place; the statements themselves (fence-statement.ts), proofs (proof-verifier.ts) and the driver (db/) are apart.
import {
  InvalidRequestError,
  StaleTokenError,
  assertToken,
  formatToken,
  validateResourceName,
} from '@fenced/shared';
import { CompiledQuery, sql, type ControlledTransaction, type Kysely, type Transaction } from 'kysely';
import { guardTransactionDatabase, storeStatement } from './db/guard-driver.js';
import { classifyPostgresError, MigrationMissingError, SqlState, sqlstateOf } from './db/postgres-errors.js';
import { normalizeFences, validateOpId, type FenceTarget, type NormalizedFence } from './fence.js';
import { LiteralFenceStatements } from './fence-statement.js';
import type { JsonCompatible, JsonValue } from './json.js';
import { migrate, type MigrationReport } from './migrate.js';
import { ProofVerifier } from './proof-verifier.js';
import { SqlFence, type FenceOutcome, type FenceRow } from './sql-fence.js';
import {
  resolveGuardedStoreOptions,
  type GuardedStoreOptions,
  type ResolvedGuardedStoreOptions,
} from './options.js';

/** Options of one guarded transaction. */
export interface RunOptions {
  /**
   * Operation id (G5): when a transaction with this id already committed on the fenced resource, `run` returns
   * that transaction's result and does not call the callback again. The result must therefore be JSON
   * (`JsonCompatible`); a replay returns the parsed JSON. 1–255 visible ASCII characters.
   */
  opId?: string;
}

/** The current fence of a resource, as `fenceOf` reports it. Never carries the lease. */
export interface FenceState {
  readonly resource: string;
  readonly token: bigint;
  readonly updatedAt: Date;
}

/** What `resetFence` needs: the token to lower the fence to, and who does it, and why, for the audit log. */
export interface ResetFenceOptions {
  /**
   * The token the fence goes down to: below the current fence, and at least the highest token the coordinator
   * has granted for the resource (its register, e.g. `GET /v1/locks/{resource}` or the last grant you trust),
   * or stale holders of older grants could write again.
   */
  readonly toToken: bigint;
  /** Why (an incident, a ticket): 1–1000 characters. */
  readonly reason: string;
  /** Who (a person or a runbook's automation): 1–200 characters. */
  readonly actor: string;
}

/** One row of the `fence_reset` audit log, as `resetFence` wrote it. */
export interface FenceReset {
  readonly resource: string;
  readonly fromToken: bigint;
  readonly toToken: bigint;
  readonly reason: string;
  readonly actor: string;
  readonly resetAt: Date;
}

/** A guarded callback: its reads and writes run in the guarded transaction `trx` (G4). */
export type GuardedCallback<DB, T> = (trx: Transaction<DB>) => Promise<T>;

type Phase = 'begin' | 'work' | 'commit';

/**
 * Data access behind fencing tokens (DESIGN §4). The only way to write is {@link GuardedStore.run}: one
 * transaction that first raises the fences of its resources (or fails with `StaleTokenError` before anything
 * else happens) and then runs the caller's reads and writes. {@link GuardedStore.read} is read-only, enforced
 * by Postgres. {@link GuardedStore.dangerouslyRunUnguarded} exists for negative controls and maintenance.
 *
 * The store does not own `db`; destroy it yourself. Build it with `createDatabase` (bigint tokens, search_path,
 * and a guarded transaction starts in one round trip instead of two) or bring your own Kysely over `pg`.
 *
 * @example
 * A read-modify-write under a coordinator lease (the whole program: the package README's example):
 * ```ts
 * import { Coordinator } from '@fenced/coordinator';
 * import { GuardedStore, createDatabase } from '@fenced/guarded-store';
 *
 * interface Database {
 *   account: { id: string; balance: bigint };
 * }
 *
 * const coordinator = new Coordinator({ nodes: process.env.FENCED_REDIS_URLS!.split(',') });
 * const db = createDatabase<Database>({ connectionString: process.env.FENCED_DATABASE_URL! });
 * const store = new GuardedStore(db, { schema: 'public' });
 * await store.migrate(); // the fence tables; safe from several processes at once
 *
 * await coordinator.using('account:42', { ttlMs: 10_000, waitMs: 5_000 }, (lease) =>
 *   // One transaction: the fence is raised first (StaleTokenError if the lease's token is older), then the
 *   // reads and writes of the critical section.
 *   store.run(lease, async (trx) => {
 *     const row = await trx
 *       .selectFrom('account')
 *       .select('balance')
 *       .where('id', '=', '42')
 *       .forUpdate()
 *       .executeTakeFirstOrThrow();
 *     await trx
 *       .updateTable('account')
 *       .set({ balance: row.balance + 10n })
 *       .where('id', '=', '42')
 *       .execute();
 *   }),
 * );
 * await coordinator.close();
 * await db.destroy(); // the store does not own the pool
 * ```
 */
export class GuardedStore<DB> {
  readonly options: ResolvedGuardedStoreOptions;
  readonly #db: Kysely<DB>;
  /**
   * Where the store's transactions run: over a pool from `createDatabase`, a private instance on that pool
   * (BEGIN goes out with the fence statement; an aborted COMMIT is an error); else `db` itself.
   */
  readonly #transactionDb: Kysely<DB>;
  /** The fence statements for `#transactionDb` when it is the private instance (all literals), else undefined. */
  readonly #literalFences: LiteralFenceStatements | undefined;
  /** Otherwise, the guard's SQL function (the one every other client calls). */
  readonly #sqlFence: SqlFence | undefined;
  readonly #fenceTable;
  readonly #operationTable;
  readonly #resetTable;
  /** Checks fencing proofs before any transaction when `verifyKeys` is set (DESIGN §4b). */
  readonly #verifier: ProofVerifier | undefined;

  constructor(db: Kysely<DB>, options: GuardedStoreOptions = {}) {
    this.options = resolveGuardedStoreOptions(options);
    const keys = this.options.verifyKeys;
    this.#verifier = keys === undefined ? undefined : new ProofVerifier(keys, this.options.proofCacheSize);
    this.#db = db;
    const own = guardTransactionDatabase(db);
    this.#transactionDb = own ?? db;
    this.#literalFences =
      own === undefined ? undefined : new LiteralFenceStatements(this.options.schema, this.options);
    const { schema, lockTimeoutMs, idleInTransactionTimeoutMs } = this.options;
    // Proofs are verified by the store itself, before the transaction.
    this.#sqlFence =
      own === undefined ? new SqlFence({ schema, lockTimeoutMs, idleInTransactionTimeoutMs }) : undefined;
    this.#fenceTable = sql.id(this.options.schema, 'fence');
    this.#operationTable = sql.id(this.options.schema, 'fence_operation');
    this.#resetTable = sql.id(this.options.schema, 'fence_reset');
  }

  /** Whether this store verifies fencing proofs (`verifyKeys` is set). */
  get verifiesProofs(): boolean {
    return this.#verifier !== undefined;
  }

  /**
   * Checks the fencing proofs of `fence` as `run` will, without touching the database: for a middleware that
   * wants to refuse a request before its route runs. Memoised like `run`'s check. Does nothing when the store
   * does not verify proofs.
   * @throws InvalidProofError when a proof is missing or not valid for exactly its resource, token and lease.
   * @throws InvalidRequestError for a bad resource, token or lease id.
   */
  checkProofs(fence: FenceTarget | readonly FenceTarget[]): void {
    const verifier = this.#verifier;
    if (verifier === undefined) return;
    for (const f of normalizeFences(fence)) verifier.verify(f);
  }

  /** Creates or updates the store's tables in its schema (see `migrate`). Safe to run concurrently. */
  migrate(): Promise<MigrationReport> {
    return migrate(this.#db, { schema: this.options.schema });
  }

  /**
   * Runs `fn` in one guarded transaction on the resources of `fence` (one fence, a coordinator lease, or a list
   * for several resources at once). In order:
   *
   * 1. The fence statements lock every fence row, in resource order, and raise it to the token if the stored
   *    token is lower; an equal token from the same lease only locks the row (no new row version). A token
   *    below, or equal from another lease, means the token is stale: the transaction rolls back and `StaleTokenError` (presented and current token) is thrown, before
   *    `fn` runs. Under READ COMMITTED, a statement that waited for a concurrent holder's row lock re-checks the
   *    condition against the row that holder committed, so no SERIALIZABLE is needed. Over a pool from
   *    `createDatabase`, BEGIN, the transaction's settings and the first statement go in one message; for one
   *    fence it is a SELECT … FOR UPDATE of the row at this token from this lease (when this store last fenced
   *    the resource with them) or an UPDATE of a lower row, followed by an insert-or-update only when it fenced
   *    nothing (a new resource, a wrong guess, or stale: see fence-statement.ts).
   * 2. With `opId`: a committed operation with that id returns its stored result; `fn` does not run.
   * 3. `fn(trx)`: do the reads and the writes of the critical section here, on `trx`.
   * 4. With `opId`: the result is recorded, then COMMIT. The fence row locks are held until then, so the
   *    guarded transactions of a resource commit one at a time in token order (G1).
   *
   * An equal token is accepted only from the same lease: a fence without `leaseId` (or lease `id`) cannot pass
   * an equal token, so a lease that writes more than once must name itself.
   *
   * With `verifyKeys`, every fence must first carry a proof (`proof`, a coordinator lease's `lease.proof`) that
   * one of the keys made for exactly its resource, token and lease id; this is checked before the transaction
   * begins (DESIGN §4b).
   *
   * @throws StaleTokenError fenced off; nothing was written.
   * @throws InvalidProofError (verification on) a missing or invalid proof; nothing was sent to Postgres.
   * @throws MigrationMissingError the store's tables do not exist in its schema: call `migrate()` first.
   * @throws InvalidRequestError a bad resource, token, lease id or op id; nothing was sent to Postgres.
   * @throws StorageError subclasses for classified Postgres failures (lock timeout, deadlock, lost connection …);
   *   other errors, the callback's own included, propagate unchanged after the rollback.
   * @throws TransactionAbortedError a statement failed inside `fn` and `fn` caught the error and returned:
   *   Postgres rolled the transaction back (over a Kysely the store did not create, only detected with `opId`).
   */
  run<T>(fence: FenceTarget | readonly FenceTarget[], fn: GuardedCallback<DB, T>): Promise<T>;
  run<T>(
    fence: FenceTarget | readonly FenceTarget[],
    fn: GuardedCallback<DB, T & JsonCompatible<T>>,
    options: RunOptions,
  ): Promise<T>;
  async run<T>(
    fence: FenceTarget | readonly FenceTarget[],
    fn: GuardedCallback<DB, T>,
    options?: RunOptions,
  ): Promise<T> {
    const fences = normalizeFences(fence);
    const opId = options?.opId === undefined ? undefined : validateOpId(options.opId);
    // Before BEGIN: a forged or misplaced token must not even lock the fence row (DESIGN §4b).
    if (this.#verifier !== undefined) for (const f of fences) this.#verifier.verify(f);
    return this.#transaction('read write', async (trx) => {
      if (this.#sqlFence !== undefined) {
        // The SQL function decides, replays included (it looks for the operation after its fence).
        const outcome = await this.#fenceByFunction(this.#sqlFence, trx, fences, opId);
        if (outcome.replayed) return { rollback: true, value: outcome.result as T };
        const value = await fn(trx);
        if (opId !== undefined) await this.#recordOperation(trx, fences, opId, value);
        return { rollback: false, value };
      }
      const raised = await this.#raiseFences(trx, fences);
      if (raised.size < fences.length) {
        // A retry whose first attempt committed before a successor fenced in still gets its answer.
        const replay = opId === undefined ? undefined : await this.#findOperation(trx, fences, opId);
        if (replay !== undefined) return { rollback: true, value: replay.result as T };
        throw await this.#staleTokenError(trx, fences, raised);
      }
      if (opId !== undefined) {
        // A separate statement, after the fence: the fence statement's snapshot predates its lock wait, so it
        // could miss an operation committed by the holder it waited for. This one sees it.
        const replay = await this.#findOperation(trx, fences, opId);
        if (replay !== undefined) return { rollback: true, value: replay.result as T };
      }
      const value = await fn(trx);
      if (opId !== undefined) await this.#recordOperation(trx, fences, opId, value);
      return { rollback: false, value };
    });
  }

  /**
   * Fence-in (G3): the empty guarded transaction a new holder commits as soon as it has its lease. Once it
   * returns, no guarded transaction of an earlier grant on the resource can commit.
   * @throws StaleTokenError when a later grant already fenced in.
   */
  async fenceIn(lease: FenceTarget): Promise<void> {
    await this.run(lease, () => Promise.resolve(undefined));
  }

  /**
   * A read-only transaction (Postgres refuses writes in it with `ReadOnlyTransactionError`). Reads here are
   * not fenced and may be stale by the time anything acts on them: a read that a guarded write depends on
   * belongs inside that write's `run` (G4).
   */
  read<T>(fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
    return this.#transaction('read only', async (trx) => ({ rollback: false, value: await fn(trx) }));
  }

  /**
   * A read-write transaction with NO fence: stale writers are not refused. For negative controls that must
   * show what the guard prevents, and for maintenance that holds no lease. Never for application writes.
   */
  dangerouslyRunUnguarded<T>(fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
    return this.#transaction('read write', async (trx) => ({ rollback: false, value: await fn(trx) }));
  }

  /**
   * ADMINISTRATIVE: lowers a resource's fence to `toToken` and appends who, why, from and to to the
   * `fence_reset` audit log, in one transaction. For a fence that a forged or misplaced token raised (before the
   * store verified proofs, or with a leaked signing key): every honest holder is refused until it comes down.
   * Never called by `run`, `fenceIn` or the write middleware; call it from an operator's tool only.
   *
   * Lowering a fence re-admits every grant whose token is above `toToken`: choose at least the highest token the
   * coordinator has granted for the resource, so that no stale holder gets back in.
   * @throws InvalidRequestError for a bad argument, a resource without a fence, or a `toToken` not below it.
   */
  async resetFence(resource: string, options: ResetFenceOptions): Promise<FenceReset> {
    validateResourceName(resource);
    if (typeof options !== 'object' || options === null) {
      throw new InvalidRequestError('resetFence needs { toToken, reason, actor }');
    }
    const toToken = assertToken(options.toToken, 'toToken');
    const reason = auditText(options.reason, 'reason', 1_000);
    const actor = auditText(options.actor, 'actor', 200);
    return this.#transaction('read write', async (trx) => {
      // The row lock orders the reset with guarded transactions on the resource, as their own fence statement does.
      const { rows } = await sql<{ token: string }>`
        select token::text as token from ${this.#fenceTable} where resource = ${resource} for update`.execute(
        trx,
      );
      const row = rows[0];
      if (row === undefined) {
        throw new InvalidRequestError('resetFence: the resource has no fence to reset');
      }
      const fromToken = BigInt(row.token);
      if (toToken >= fromToken) {
        throw new InvalidRequestError(
          `resetFence: toToken must be below the current fence ${fromToken}, got ${toToken} (a reset only lowers a fence)`,
        );
      }
      await sql`
        update ${this.#fenceTable} set token = ${formatToken(toToken)}::bigint, lease_id_hash = null, updated_at = now()
         where resource = ${resource}`.execute(trx);
      const { rows: audit } = await sql<{ reset_at: Date }>`
        insert into ${this.#resetTable} (resource, from_token, to_token, reason, actor)
        values (${resource}, ${formatToken(fromToken)}::bigint, ${formatToken(toToken)}::bigint, ${reason}, ${actor})
        returning reset_at`.execute(trx);
      return {
        rollback: false,
        value: { resource, fromToken, toToken, reason, actor, resetAt: audit[0]!.reset_at },
      };
    });
  }

  /** The resource's current fence (highest committed token), or `undefined` if no guarded write reached it. */
  async fenceOf(resource: string): Promise<FenceState | undefined> {
    validateResourceName(resource);
    try {
      const { rows } = await this.#ownStatement(() =>
        sql<{ token: string; updated_at: Date }>`
        select token::text as token, updated_at from ${this.#fenceTable} where resource = ${resource}`.execute(
          this.#db,
        ),
      );
      const row = rows[0];
      return row === undefined
        ? undefined
        : { resource, token: BigInt(row.token), updatedAt: row.updated_at };
    } catch (error) {
      throw classifyPostgresError(error) ?? error;
    }
  }

  /**
   * Begin, `body`, COMMIT (or ROLLBACK when `body` asks or throws); Postgres errors classified. A ControlledTransaction
   * rather than `transaction().execute()` so that a failed ROLLBACK on a dead connection cannot replace the error
   * that caused it, and so that we know whether the COMMIT was in flight when a connection died. Over the
   * store's own pool, BEGIN is sent with the first statement, and a COMMIT answered with ROLLBACK (the callback
   * swallowed a failed statement) throws `TransactionAbortedError` from `commit()`.
   */
  async #transaction<T>(
    accessMode: 'read only' | 'read write',
    body: (trx: Transaction<DB>) => Promise<{ rollback: boolean; value: T }>,
  ): Promise<T> {
    let phase: Phase = 'begin';
    let trx: ControlledTransaction<DB> | undefined;
    try {
      trx = await this.#transactionDb
        .startTransaction()
        .setIsolationLevel(this.options.isolationLevel)
        .setAccessMode(accessMode)
        .execute();
      phase = 'work';
      const { rollback, value } = await body(trx);
      if (rollback) {
        await trx.rollback().execute();
      } else {
        phase = 'commit';
        await trx.commit().execute();
      }
      return value;
    } catch (error) {
      if (trx !== undefined && !trx.isCommitted && !trx.isRolledBack) {
        // Also releases the connection; on a dead connection pg-pool discards it.
        await trx
          .rollback()
          .execute()
          .catch(() => undefined);
      }
      throw classifyPostgresError(error, phase === 'commit') ?? error;
    }
  }

  /**
   * The fence statements (see `fence-statement.ts`). `lock_timeout` must already apply when a fence statement
   * waits for a concurrent holder's row lock, and `synchronous_commit = on` makes the COMMIT durable before it
   * is acknowledged (G1 assumes it, whatever the server, role or session default): both are set by every guarded
   * transaction, before the first fence statement. Over the store's own pool the statements are all literals
   * and the first go in the same message as BEGIN (one fence: a prepared SELECT … FOR UPDATE or a prepared
   * UPDATE, then the upsert only when it fenced nothing; several: the upsert and the SELECT that decides).
   * @returns the resources whose fence was raised (or re-entered by the same lease).
   */
  async #raiseFences(trx: Transaction<DB>, fences: readonly NormalizedFence[]): Promise<Set<string>> {
    const literal = this.#literalFences!;
    const raised = await this.#ownStatement(async () => {
      const result = await trx.executeQuery(storeStatement<{ resource: string }>(literal.statement(fences)));
      if (fences.length !== 1) return result.rows;
      const fence = fences[0]!;
      // One fence: the SELECT … FOR UPDATE returned the row (same token, same lease: locked, nothing written), or
      // the UPDATE raised it (its command tag counts the row).
      if (result.rows.length === 1 || result.numAffectedRows === 1n) {
        literal.fenced(fence);
        return [{ resource: fence.resource }];
      }
      // Neither: no row in its snapshot, a refused token, or the other statement's case. The upsert and its
      // SELECT decide on the latest version (fence-statement.ts, step 2); nothing else ran in this transaction yet.
      const { rows } = await trx.executeQuery(
        storeStatement<{ resource: string }>(literal.insertOrRaise(fence)),
      );
      if (rows.length > 0) literal.fenced(fence);
      return rows;
    });
    return new Set(raised.map((row) => row.resource));
  }

  /**
   * The fence over a Kysely the store did not create: one statement calling the guard's SQL function
   * (migrations/0005_create_fence_function.sql), with the transaction's settings first. A stale token is the
   * function's FN001, turned into `StaleTokenError`; the transaction is aborted and rolled back.
   */
  async #fenceByFunction(
    fence: SqlFence,
    trx: Transaction<DB>,
    fences: readonly NormalizedFence[],
    opId: string | undefined,
  ): Promise<FenceOutcome> {
    const { text, values } = fence.queryOf(fences, opId);
    try {
      const { rows } = await this.#ownStatement(() =>
        trx.executeQuery(CompiledQuery.raw(text, [...values]) as CompiledQuery<FenceRow>),
      );
      return fence.outcome(rows, opId);
    } catch (error) {
      throw fence.mapError(error, fences);
    }
  }

  /**
   * Runs one of the store's own statements (never the caller's): a missing table there means the migrations
   * did not run in this schema, and the error says so instead of `relation "…fence" does not exist`.
   */
  async #ownStatement<R>(statement: () => Promise<R>): Promise<R> {
    try {
      return await statement();
    } catch (error) {
      const sqlstate = sqlstateOf(error);
      if (
        sqlstate === SqlState.UNDEFINED_TABLE ||
        sqlstate === SqlState.UNDEFINED_FUNCTION ||
        sqlstate === SqlState.INVALID_SCHEMA_NAME
      ) {
        throw new MigrationMissingError(this.options.schema, { cause: error });
      }
      throw error;
    }
  }

  /** Reads the current tokens (a new statement: it sees what the holders we waited for committed). */
  async #staleTokenError(
    trx: Transaction<DB>,
    fences: readonly NormalizedFence[],
    raised: ReadonlySet<string>,
  ): Promise<StaleTokenError> {
    const stale = fences.find((f) => !raised.has(f.resource))!;
    const { rows } = await sql<{ token: string }>`
      select token::text as token from ${this.#fenceTable} where resource = ${stale.resource}`.execute(trx);
    const current = rows[0] === undefined ? 0n : BigInt(rows[0].token);
    return new StaleTokenError(stale.resource, stale.token, current, {
      namedLease: stale.leaseIdHash !== null,
    });
  }

  async #findOperation(
    trx: Transaction<DB>,
    fences: readonly NormalizedFence[],
    opId: string,
  ): Promise<{ result: JsonValue | undefined } | undefined> {
    const { rows } = await this.#ownStatement(() =>
      sql<{ result: string | null }>`
      select result::text as result from ${this.#operationTable}
       where op_id = ${opId} and resource = any(${fences.map((f) => f.resource)}::text[])
       limit 1`.execute(trx),
    );
    const row = rows[0];
    if (row === undefined) return undefined;
    return { result: row.result === null ? undefined : (JSON.parse(row.result) as JsonValue) };
  }

  /** One row per fenced resource, written while their fence rows are locked, committed with the write. */
  async #recordOperation(
    trx: Transaction<DB>,
    fences: readonly NormalizedFence[],
    opId: string,
    value: unknown,
  ): Promise<void> {
    const json = value === undefined ? null : JSON.stringify(value);
    await this.#ownStatement(() =>
      sql`
      insert into ${this.#operationTable} (resource, op_id, token, result)
      select r.resource, ${opId}, r.token, ${json}::json
        from unnest(${fences.map((f) => f.resource)}::text[], ${fences.map((f) => formatToken(f.token))}::bigint[])
             as r (resource, token)`.execute(trx),
    );
  }
}

function auditText(value: unknown, name: string, max: number): string {
  if (typeof value !== 'string' || value.trim().length === 0 || value.length > max) {
    throw new InvalidRequestError(
      `resetFence: ${name} must be a non-blank string of at most ${max} characters, got ${typeof value === 'string' ? `${value.length} characters` : typeof value}`,
    );
  }
  return value;
}
