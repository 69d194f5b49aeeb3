import { createHash } from 'node:crypto';
import { formatToken } from '@fenced/shared';
import { sql, type RawBuilder } from 'kysely';
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
 * The one-fence statement of the store's own pools (prepared, or with literals), `resource`, `token` and
 * `leaseIdHash` being SQL expressions of type text, bigint and bytea. The usual case is a row that exists and
 * that the presented token raises: a plain UPDATE does it, with the same condition as {@link UPSERT}, so
 * Postgres neither probes the index for an insert nor writes a separate row-lock record to the WAL before the
 * update (ON CONFLICT DO UPDATE does both). Only when the UPDATE raised nothing (no row yet, or the token is
 * stale) does the upsert run, in the same statement:
 *
 * - under READ COMMITTED an UPDATE that waits for a concurrent holder's row lock re-checks its condition on
 *   the row that holder committed (EvalPlanQual), as ON CONFLICT DO UPDATE checks its WHERE on the latest row
 *   it locked: a row comes back exactly when the fence was raised (G1);
 * - when the UPDATE raised nothing, its snapshot may predate the row (a concurrent first write) or a reset:
 *   the upsert then decides on the latest version, exactly as the upsert alone always did;
 * - the upsert gets no input row when the UPDATE raised the fence, so the statement never modifies a row twice.
 */
function oneFence(table: string, resource: string, token: string, leaseIdHash: string): string {
  return `with raised as (
  update ${table} as f set token = ${token}, lease_id_hash = ${leaseIdHash}, updated_at = now()
   where f.resource = ${resource}
     and (f.token < ${token} or (f.token = ${token} and f.lease_id_hash = ${leaseIdHash}))
  returning f.resource
), inserted as (
  insert into ${table} as f (resource, token, lease_id_hash)
  select ${resource}, ${token}, ${leaseIdHash} where not exists (select from raised)
  ${UPSERT.replaceAll('\n', '\n  ')}
)
select resource from raised union all select resource from inserted`;
}

/**
 * The fence statement of the store's own pools, where the driver sends it in the same message as BEGIN: all
 * literals (a simple-protocol message carries no bound parameters), and for one fence also as a prepared
 * statement, so Postgres does not parse and plan the upsert in every transaction:
 *
 *     set local lock_timeout = …; set local idle_in_transaction_session_timeout = …;
 *     set local synchronous_commit = on; execute fenced_fence_…('resource', token, '\x…')
 *
 * (the prepared statement: an UPDATE that raises the row, the upsert only when it did not, see `oneFence`).
 * The settings are utility statements run before the upsert (so `lock_timeout` bounds its wait), local to the
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
    const upsert = oneFence(this.#table, '$1', '$2', '$3');
    // Named by a digest of its text (one name per schema and per version of the statement), then the schema
    // for whoever reads pg_prepared_statements or pg_stat_activity, cut to Postgres' 63-byte identifiers.
    const digest = createHash('sha256').update(upsert).digest('hex').slice(0, 16);
    const name = `fenced_fence_${digest}_${schema}`.slice(0, 63);
    this.#prepared = { name, prepare: `prepare ${name} (text, bigint, bytea) as\n${upsert}` };
  }

  /** What the driver needs for `fences` (sorted, validated). */
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
        return `${settings};\n${oneFence(table, resource, token, leaseIdHash)}`;
      },
      prepared: { name, prepare, execute: `${settings};\nexecute ${name}(${values})` },
    };
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

/**
 * The fence statement with bound parameters, for a Kysely instance the store did not create (BEGIN went out
 * on its own already). The settings come first, in the same statement: a materialized CTE of `set_config`
 * calls that the insert reads its rows from, so they apply before the first row is inserted.
 */
export function parameterizedFenceStatement(
  schema: string,
  fences: readonly NormalizedFence[],
  settings: GuardSettings,
): RawBuilder<{ resource: string }> {
  const table = sql.id(schema, 'fence');
  const guardSettings = sql`with guard_settings as materialized (
    select set_config('lock_timeout', ${String(settings.lockTimeoutMs)}, true),
           set_config('idle_in_transaction_session_timeout', ${String(settings.idleInTransactionTimeoutMs)}, true),
           set_config('synchronous_commit', 'on', true)
  )`;
  const upsert = sql.raw(UPSERT);
  if (fences.length === 1) {
    const f = fences[0]!;
    return sql<{ resource: string }>`${guardSettings}
      insert into ${table} as f (resource, token, lease_id_hash)
      select ${f.resource}::text, ${formatToken(f.token)}::bigint, ${f.leaseIdHash}::bytea from guard_settings
      ${upsert}`;
  }
  const rows = fences.map(
    (f, i) => sql`(${f.resource}::text, ${formatToken(f.token)}::bigint, ${f.leaseIdHash}::bytea, ${i}::int)`,
  );
  return sql<{ resource: string }>`${guardSettings}
    insert into ${table} as f (resource, token, lease_id_hash)
    select v.resource, v.token, v.lease_id_hash
      from guard_settings cross join (values ${sql.join(rows)}) as v (resource, token, lease_id_hash, ord)
     order by v.ord
    ${upsert}`;
}

const DIGITS = /^[0-9]{1,19}$/;

function digits(text: string): string {
  if (!DIGITS.test(text)) throw new TypeError(`not a whole number: ${text}`);
  return text;
}

function byteaLiteral(bytes: Buffer | null): string {
  return bytes === null ? 'null' : pg.escapeLiteral(`\\x${bytes.toString('hex')}`);
}
