// The fence statements of a guarded transaction (DESIGN §4), and why they keep G1.
//
// One fence over the store's own pool is two statements, the second one only when the first raised nothing:
//
// 1. `update fence set token = t … where resource = r and (token < t or (token = t and lease_id_hash = h))`,
//    prepared once per connection and sent with BEGIN and the settings. Under READ COMMITTED an UPDATE that
//    finds the row locked by a concurrent guarded transaction waits for it and then re-checks its condition on
//    the version that transaction committed (EvalPlanQual), so it raises the row (command tag `UPDATE 1`)
//    exactly when the latest committed fence was lower (or equal and from the same lease), and the row stays
//    locked until COMMIT: the guarded transactions of a resource commit one at a time, in token order (G1).
// 2. Only when (1) raised no row (`UPDATE 0`): `insert … on conflict (resource) do update … where <the same
//    condition> returning resource`. (1) raised nothing either because its snapshot had no row (a resource never
//    fenced, a concurrent first write not yet visible) or because the latest version refused the token. The upsert
//    takes a new snapshot and decides on the latest version: it inserts the row, or locks the existing one (waiting
//    for a concurrent inserter or holder) and raises it only under the same condition. Zero rows back: stale, and
//    the transaction rolls back before the caller's callback runs. Nothing ran between (1) and (2) in the
//    transaction, the settings of the first message apply to both, and (2) never runs after (1) modified the row.
//
// Before this split both ran as one statement (a CTE whose insert-or-update half ran when the UPDATE half raised
// nothing). The decision is the same; Postgres no longer starts the insert's executor, arbiter index and the
// union in every transaction (about 45 000 fewer instructions per guarded transaction on the server, measured
// with callgrind; docs/benchmark-experiments.md). The price is one more round trip on the first write of a resource and
// before a StaleTokenError.
//
// Several fences: one `insert … select … from (values …) order by` upsert (rows locked in the sorted order, no
// deadlock), decided as (2). Over a Kysely the store did not create, and for every other client: the guard's SQL
// function `fence(…)` (migrations/0005_create_fence_function.sql, called through sql-fence.ts), which runs these
// same two steps per resource, in the same order; test/integration/guarded-store/fence-paths.test.ts runs one
// table of cases through every path.
import { createHash } from 'node:crypto';
import { formatToken } from '@fenced/shared';
import pg from 'pg';
import type { StoreStatement } from './db/guard-driver.js';
import type { NormalizedFence } from './fence.js';

/** The settings every guarded transaction runs with (G1 and the stall bounds of DESIGN §4). */
export interface GuardSettings {
  readonly lockTimeoutMs: number;
  readonly idleInTransactionTimeoutMs: number;
}

/**
 * Raise the row to the presented token only if the stored token is lower, or equal and from the same lease;
 * return the resources whose row was raised. Zero rows for a resource: stale.
 */
const UPSERT = `on conflict (resource) do update
   set token = excluded.token, lease_id_hash = excluded.lease_id_hash, updated_at = now()
 where f.token < excluded.token
    or (f.token = excluded.token and f.lease_id_hash = excluded.lease_id_hash)
returning f.resource`;

/**
 * Statement (1) of the file comment: raise an existing row, `resource`, `token` and `leaseIdHash` being SQL
 * expressions of type text, bigint and bytea. A plain UPDATE: Postgres neither probes the index for an insert
 * nor writes a separate row-lock record to the WAL before the update, as ON CONFLICT DO UPDATE does. No
 * RETURNING: its command tag (`UPDATE 1` or `UPDATE 0`) says whether the one row was raised, without a
 * projection to set up, a row description and a row to send.
 */
function raiseExisting(table: string, resource: string, token: string, leaseIdHash: string): string {
  return `update ${table} as f set token = ${token}, lease_id_hash = ${leaseIdHash}, updated_at = now()
 where f.resource = ${resource}
   and (f.token < ${token} or (f.token = ${token} and f.lease_id_hash = ${leaseIdHash}))`;
}

/** Statement (2) of the file comment: insert the row, or raise the latest version under the same condition. */
function insertOrRaise(table: string, resource: string, token: string, leaseIdHash: string): string {
  return `insert into ${table} as f (resource, token, lease_id_hash)
values (${resource}, ${token}, ${leaseIdHash})
${UPSERT}`;
}

/**
 * The fence statement of the store's own pools, where the driver sends it in the same message as BEGIN: all
 * literals (a simple-protocol message carries no bound parameters), and for one fence also as a prepared
 * statement, so Postgres does not parse and plan it in every transaction:
 *
 *     set local lock_timeout = …; set local idle_in_transaction_session_timeout = …;
 *     set local synchronous_commit = on; execute fenced_fence_…('resource', token, '\x…')
 *
 * (the prepared statement: the UPDATE of the file comment's step 1; {@link insertOrRaise} is step 2, for the
 * store to run only when step 1 returned no row). The settings are utility statements run before the fence
 * statements (so `lock_timeout` bounds their waits), local to the
 * transaction (the pool's other transactions keep their own), and set again by every guarded transaction (so a
 * `SET synchronous_commit = off` that someone ran on a pooled connection cannot reach a guarded COMMIT).
 * Several fences: one `insert … select … from (values …) order by` statement, so the rows are locked in the
 * sorted order.
 *
 * Every value is validated before it gets here (resource names by `validateResourceName`, tokens by
 * `assertToken`, settings by the options schema, the lease id is a digest) and is still escaped or checked:
 * strings with pg's `escapeLiteral`, numbers against a digits-only pattern.
 */
export class LiteralFenceStatements {
  readonly #table: string;
  readonly #settings: string;
  readonly #prepared: { readonly name: string; readonly prepare: string };

  constructor(schema: string, settings: GuardSettings) {
    this.#table = `${pg.escapeIdentifier(schema)}.fence`;
    this.#settings = [
      `set local lock_timeout = ${digits(String(settings.lockTimeoutMs))}`,
      `set local idle_in_transaction_session_timeout = ${digits(String(settings.idleInTransactionTimeoutMs))}`,
      'set local synchronous_commit = on',
    ].join(';\n');
    const raise = raiseExisting(this.#table, '$1', '$2', '$3');
    // Named by a digest of its text (one name per schema and per version of the statement), then the schema
    // for whoever reads pg_prepared_statements or pg_stat_activity, cut to Postgres' 63-byte identifiers.
    const digest = createHash('sha256').update(raise).digest('hex').slice(0, 16);
    const name = `fenced_fence_${digest}_${schema}`.slice(0, 63);
    this.#prepared = { name, prepare: `prepare ${name} (text, bigint, bytea) as\n${raise}` };
  }

  /**
   * What the driver needs for `fences` (sorted, validated): for several, the one upsert; for one, step 1 of the
   * file comment, after which the store runs {@link insertOrRaise} if no row came back.
   */
  statement(fences: readonly NormalizedFence[]): StoreStatement {
    if (fences.length !== 1) return { text: `${this.#settings};\n${this.#insert(fences)}` };
    const { name, prepare } = this.#prepared;
    const values = literals(fences[0]!);
    const settings = this.#settings;
    const table = this.#table;
    const f = fences[0]!;
    return {
      // Built only if the prepared statement cannot be used.
      get text() {
        const [resource, token, leaseIdHash] = literalList(f);
        return `${settings};\n${raiseExisting(table, resource, token, leaseIdHash)}`;
      },
      prepared: { name, prepare, execute: `${settings};\nexecute ${name}(${values})` },
    };
  }

  /**
   * Step 2 of the file comment for one fence, in the transaction step 1 began (the settings apply already):
   * insert the row or raise the latest version; no row back means stale.
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
${UPSERT}`;
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
