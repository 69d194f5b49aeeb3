// The fence statements of a guarded transaction (DESIGN §4), and why they keep G1.
//
// One fence over the store's own pool is one statement (sent with BEGIN and the settings), then a second message
// only when it fenced nothing. Which statement goes first is a guess from what this store last fenced the resource
// with (the same token from the same lease: the lease writes again), never part of the decision: either one
// fences only when it holds the row lock on the latest version that admits the token, and otherwise step 2
// decides every case on its own.
//
// 1a. Guessed equal: `select f.resource from fence f where resource = r and token = t and lease_id_hash = h for
//     update`. It locks the row and writes no new row version: a row lock orders the guarded transactions of a
//     resource as well as an UPDATE does, and the row has nothing to change (G1 asks for non-decreasing token
//     order; an equal token from the same lease is already the fence). Under READ COMMITTED a SELECT … FOR UPDATE
//     that finds the row locked waits for the holder and re-checks its condition on the version the holder
//     committed (EvalPlanQual): it returns the row, locked until COMMIT, exactly when the latest committed fence
//     is this token from this lease. Two transactions of the same lease at once: the second waits for the first's
//     COMMIT, then locks. A higher token arriving while it holds the lock waits for that COMMIT (its own statement
//     waits for the row), then raises: the equal token's transaction commits first, in token order.
// 1b. Otherwise: `update fence f set token = t … where resource = r and token < t`: a higher token raises the row
//     (command tag `UPDATE 1`), re-checked on the latest version after any wait as above, the row locked until
//     COMMIT. Strictly lower only, so an equal token never rewrites the row here either.
// 2.  Only when step 1 fenced nothing: `insert … on conflict (resource) do update set … where f.token <
//     excluded.token returning f.resource`, then `select … where resource = r and token = t and lease_id_hash =
//     h`, in one message. Step 1 fenced nothing because its snapshot had no row (a resource never fenced, a
//     concurrent first write not yet visible), because the latest version refused the token, or because it was
//     the other statement's case (a wrong guess; or a row at t − 1 that a concurrent transaction of the same
//     lease was raising to t: (1a) saw t − 1, or (1b) waited, re-checked, found t and raised nothing). The upsert
//     takes a new snapshot and decides on the latest version: it inserts the row, or locks the existing one
//     (waiting for a concurrent inserter or holder; ON CONFLICT DO UPDATE locks the conflicting row even when its
//     WHERE is false) and raises it only when lower, returning the row when it inserted or raised it. Every
//     outcome leaves the row locked by this transaction, so the SELECT after it reads the fence as it stands
//     until COMMIT: a row back from either (inserted, raised, or this token from this lease) means fenced; none
//     means stale, and the transaction rolls back before the caller's callback runs. Nothing ran between (1) and
//     (2) in the transaction, the settings of the first message apply to both, and (2) never runs after (1)
//     locked or modified the row.

// An equal token from the same lease therefore writes no row version on any path (no WAL for a new tuple, no
// dead version to prune), only the row lock; guessed right, that costs one statement, as the raise does. A wrong
// guess costs the round trip of step 2, as the first write of a resource does. A token below the fence, or equal from another lease (or naming no
// lease: a null digest equals nothing), is still refused; a higher one still raises.
//
// Before the split of (1) and (2) all ran as one statement (a CTE whose insert-or-update half ran when the UPDATE
// half raised nothing). The decision is the same; Postgres no longer starts the insert's executor, arbiter index
// and the union in every transaction (about 45 000 fewer instructions per guarded transaction on the server,
// measured with callgrind; docs/benchmark-experiments.md). The price is one more round trip on the first write of
// a resource and before a StaleTokenError. Sending (1a) and (1b) together in every transaction, rather than one
// by the guess, cost more CPU than the row version it saved (docs/benchmark-experiments.md).
//
// Several fences: one `insert … select … from (values …) order by` upsert (rows locked in the sorted order, no
// deadlock) and the SELECT after it, decided as (2). Over a Kysely the store did not create, and for every other
// client: the guard's SQL function `fence(…)` (migrations/0005_create_fence_function.sql, its step
// `fence_raise` replaced by migrations/0006_fence_equal_token_locks.sql, called through sql-fence.ts), which
// runs these same steps per resource, in the same order; test/integration/guarded-store/fence-paths.test.ts
// runs one table of cases through every path.
import { createHash } from 'node:crypto';
import { formatToken } from '@fenced/shared';
import pg from 'pg';
import type { PreparedStatement, StoreStatement } from './db/guard-driver.js';
import type { NormalizedFence } from './fence.js';

/** The settings every guarded transaction runs with (G1 and the stall bounds of DESIGN §4). */
export interface GuardSettings {
  readonly lockTimeoutMs: number;
  readonly idleInTransactionTimeoutMs: number;
}

/**
 * Step 2 of the file comment, after the insert of the rows: lock every conflicting row (ON CONFLICT DO UPDATE
 * locks it even when its WHERE is false) and raise it only when the stored token is lower. Returns the resources
 * inserted or raised; the SELECT of {@link fencedRows} after it adds those this lease already held at this token.
 */
const UPSERT = `on conflict (resource) do update
   set token = excluded.token, lease_id_hash = excluded.lease_id_hash, updated_at = now()
 where f.token < excluded.token
returning f.resource`;

/**
 * Statement (1a) of the file comment: lock the row when it holds this token from this lease, `resource`, `token`
 * and `leaseIdHash` being SQL expressions of type text, bigint and bytea. Returns the resource when it did; writes
 * no row version. A null digest equals nothing.
 */
function lockEqual(table: string, resource: string, token: string, leaseIdHash: string): string {
  return `select f.resource from ${table} as f
 where f.resource = ${resource} and f.token = ${token} and f.lease_id_hash = ${leaseIdHash}
   for update`;
}

/**
 * Statement (1b) of the file comment: raise an existing row whose token is lower. A plain UPDATE: Postgres neither
 * probes the index for an insert nor writes a separate row-lock record to the WAL before the update, as ON
 * CONFLICT DO UPDATE does. No RETURNING: its command tag (`UPDATE 1` or `UPDATE 0`) says whether the one row was
 * raised, without a projection to set up, a row description and a row to send. Strictly lower: an equal token
 * from the same lease was (1a)'s, and rewriting the row would only add a row version.
 */
function raiseExisting(table: string, resource: string, token: string, leaseIdHash: string): string {
  return `update ${table} as f set token = ${token}, lease_id_hash = ${leaseIdHash}, updated_at = now()
 where f.resource = ${resource} and f.token < ${token}`;
}

/**
 * After the upsert of step 2, every row of `values` (a VALUES list of resource, token, lease_id_hash) is locked by
 * this transaction: the rows that hold the presented token from the presented lease are fenced (with the rows the
 * upsert returned: a row inserted or raised without a lease id equals nothing here).
 */
function fencedRows(table: string, values: string): string {
  return `select f.resource from ${table} as f
  join (values ${values}) as v (resource, token, lease_id_hash)
    on f.resource = v.resource and f.token = v.token and f.lease_id_hash = v.lease_id_hash`;
}

/** Step 2 of the file comment for one fence: insert the row, or lock and raise it; then the deciding SELECT. */
function insertOrRaise(table: string, resource: string, token: string, leaseIdHash: string): string {
  return `insert into ${table} as f (resource, token, lease_id_hash)
values (${resource}, ${token}, ${leaseIdHash})
${UPSERT};
${fencedRows(table, `(${resource}, ${token}, ${leaseIdHash})`)}`;
}

/** A prepared form of one of the fence statements, named by a digest of its text and the schema. */
function prepare(schema: string, text: string): PreparedStatement {
  // One name per schema and per version of the statement, then the schema for whoever reads
  // pg_prepared_statements or pg_stat_activity, cut to Postgres' 63-byte identifiers.
  const digest = createHash('sha256').update(text).digest('hex').slice(0, 16);
  const name = `fenced_fence_${digest}_${schema}`.slice(0, 63);
  return { name, prepare: `prepare ${name} (text, bigint, bytea) as\n${text}` };
}

/** How many resources a store remembers its last fence of (the guess of step 1; oldest forgotten first). */
const REMEMBERED_FENCES = 4096;

/**
 * The fence statements of the store's own pools, where the driver sends them in the same message as BEGIN: all
 * literals (a simple-protocol message carries no bound parameters), and for one fence also as prepared
 * statements (both prepared once per connection), so Postgres does not parse and plan them in every transaction:
 *
 *     set local lock_timeout = …; set local idle_in_transaction_session_timeout = …;
 *     set local synchronous_commit = on; execute fenced_fence_…('resource', token, '\x…')
 *
 * (the prepared statement: the SELECT … FOR UPDATE or the UPDATE of the file comment's step 1, as guessed from
 * {@link fenced}; {@link insertOrRaise} is step 2, for the store to run only when step 1 fenced nothing). The
 * settings are utility statements run before the fence statements (so `lock_timeout` bounds their waits), local
 * to the transaction (the pool's other transactions keep their own), and set again by every guarded transaction
 * (so a `SET synchronous_commit = off` that someone ran on a pooled connection cannot reach a guarded COMMIT).
 * Several fences: one `insert … select … from (values …) order by` statement, so the rows are locked in the
 * sorted order, then the deciding SELECT.
 *
 * Every value is validated before it gets here (resource names by `validateResourceName`, tokens by
 * `assertToken`, settings by the options schema, the lease id is a digest) and is still escaped or checked:
 * strings with pg's `escapeLiteral`, numbers against a digits-only pattern.
 */
export class LiteralFenceStatements {
  readonly #table: string;
  readonly #settings: string;
  readonly #prepared: readonly [lock: PreparedStatement, raise: PreparedStatement];
  /** Per resource, the token and lease digest this store last fenced it with: only the guess of step 1. */
  readonly #last = new Map<string, { readonly token: bigint; readonly leaseIdHash: Buffer }>();

  constructor(schema: string, settings: GuardSettings) {
    this.#table = `${pg.escapeIdentifier(schema)}.fence`;
    this.#settings = [
      `set local lock_timeout = ${digits(String(settings.lockTimeoutMs))}`,
      `set local idle_in_transaction_session_timeout = ${digits(String(settings.idleInTransactionTimeoutMs))}`,
      'set local synchronous_commit = on',
    ].join(';\n');
    this.#prepared = [
      prepare(schema, lockEqual(this.#table, '$1', '$2', '$3')),
      prepare(schema, raiseExisting(this.#table, '$1', '$2', '$3')),
    ];
  }

  /**
   * What the driver needs for `fences` (sorted, validated): for several, the upsert and the deciding SELECT; for
   * one, step 1 of the file comment (a row back from the SELECT, or `UPDATE 1`: fenced), after which the store
   * runs {@link insertOrRaise} if it fenced nothing.
   */
  statement(fences: readonly NormalizedFence[]): StoreStatement {
    if (fences.length !== 1) return { text: `${this.#settings};\n${this.#insert(fences)}` };
    const f = fences[0]!;
    const [lock, raise] = this.#prepared;
    const equal = this.#guessEqual(f);
    const chosen = equal ? lock : raise;
    const settings = this.#settings;
    const table = this.#table;
    return {
      // Built only if the prepared statement cannot be used.
      get text() {
        const [resource, token, leaseIdHash] = literalList(f);
        return `${settings};\n${(equal ? lockEqual : raiseExisting)(table, resource, token, leaseIdHash)}`;
      },
      prepared: {
        statements: [lock, raise],
        execute: `${settings};\nexecute ${chosen.name}(${literals(f)})`,
      },
    };
  }

  /**
   * Records that a transaction of this store fenced `fence` (it may still roll back: only a guess for the next
   * {@link statement} on the resource).
   */
  fenced(fence: NormalizedFence): void {
    if (fence.leaseIdHash === null) return;
    this.#last.delete(fence.resource);
    if (this.#last.size >= REMEMBERED_FENCES) this.#last.delete(this.#last.keys().next().value!);
    this.#last.set(fence.resource, { token: fence.token, leaseIdHash: fence.leaseIdHash });
  }

  /** Whether this store last fenced the resource with this token from this lease. */
  #guessEqual(fence: NormalizedFence): boolean {
    const last = this.#last.get(fence.resource);
    return (
      last !== undefined &&
      fence.leaseIdHash !== null &&
      last.token === fence.token &&
      last.leaseIdHash.equals(fence.leaseIdHash)
    );
  }

  /**
   * Step 2 of the file comment for one fence, in the transaction step 1 began (the settings apply already):
   * insert the row or lock and raise the latest version; no row back means stale.
   */
  insertOrRaise(fence: NormalizedFence): StoreStatement {
    const [resource, token, leaseIdHash] = literalList(fence);
    return { text: insertOrRaise(this.#table, resource, token, leaseIdHash) };
  }

  #insert(fences: readonly NormalizedFence[]): string {
    const rows = fences.map((f, i) => `(${literals(f)}, ${i})`).join(', ');
    return `insert into ${this.#table} as f (resource, token, lease_id_hash)
select v.resource, v.token, v.lease_id_hash
  from (values ${rows}) as v (resource, token, lease_id_hash, ord)
 order by v.ord
${UPSERT};
${fencedRows(this.#table, fences.map((f) => `(${literals(f)})`).join(', '))}`;
  }
}

/** `'resource'::text, token::bigint, '\x…'::bytea` */
function literals(f: NormalizedFence): string {
  return literalList(f).join(', ');
}

function literalList(f: NormalizedFence): [resource: string, token: string, leaseIdHash: string] {
  return [
    `${pg.escapeLiteral(f.resource)}::text`,
    `${digits(formatToken(f.token))}::bigint`,
    `${byteaLiteral(f.leaseIdHash)}::bytea`,
  ];
}

const DIGITS = /^[0-9]{1,19}$/;

function digits(text: string): string {
  if (!DIGITS.test(text)) throw new TypeError(`not a whole number: ${text}`);
  return text;
}

function byteaLiteral(bytes: Buffer | null): string {
  return bytes === null ? 'null' : pg.escapeLiteral(`\\x${bytes.toString('hex')}`);
}
