import { sql, type Kysely, type Transaction } from 'kysely';

/**
 * The counter the workers increment: one row per resource, incremented by read-modify-write, and a commit log
 * appended in the same transaction, after the counter's UPDATE. The UPDATE takes the counter row's lock first,
 * so the log rows of one resource are inserted in the order their transactions commit — guarded or not — and
 * `seq` is the database's own commit order for the checkers. The fault suite and the demo both use these
 * tables; counter.prisma describes them for the `prisma` guard path, guard-paths.ts for the `drizzle` one.
 */
export interface CounterDb {
  counter: { resource: string; value: bigint };
  commit_log: {
    seq: bigint;
    resource: string;
    /** The fencing token the write ran under; null for a write under plain Redlock (no token). */
    token: bigint | null;
    lease_ref: string | null;
    process: string | null;
    op_id: string | null;
    value: bigint;
    /** How the write reached Postgres: `db` (the worker's own connection) or `http` (through a service). */
    via: string | null;
  };
}

/** Creates the counter tables in the connection's search path (the schema of one test file or demo run). */
export const COUNTER_TABLES_DDL = `
  create table counter (resource text primary key, value bigint not null);
  create table commit_log (
    seq       bigserial primary key,
    resource  text   not null,
    token     bigint,
    lease_ref text,
    process   text,
    op_id     text,
    value     bigint not null,
    via       text
  );
  create index commit_log_resource on commit_log (resource, seq);`;

/** One write of the counter, as its commit log row names it. */
export interface CounterWrite {
  readonly resource: string;
  /** The token the write presented; null for a write under plain Redlock. */
  readonly token: bigint | null;
  /** Digest of the lease id (`leaseRef()`): names the grant without writing down the capability. */
  readonly leaseRef: string;
  /** Who wrote (a worker's name). */
  readonly process: string;
  /** Operation id (G5); absent for a write that has none. */
  readonly opId?: string | undefined;
  readonly via?: 'db' | 'http' | undefined;
}

type Executor = Kysely<CounterDb> | Transaction<CounterDb>;

/** The counter of `resource`; 0 when it has no row. */
export async function readCounter(db: Executor, resource: string): Promise<bigint> {
  const row = await db
    .selectFrom('counter')
    .select('value')
    .where('resource', '=', resource)
    .executeTakeFirst();
  return BigInt(row?.value ?? 0n);
}

/** Writes `value`, then appends the commit log row (after the UPDATE: the row lock orders the log). */
export async function writeCounter(db: Executor, write: CounterWrite, value: bigint): Promise<void> {
  await sql`update counter set value = ${value.toString()}::bigint where resource = ${write.resource}`.execute(
    db,
  );
  await sql`
    insert into commit_log (resource, token, lease_ref, process, op_id, value, via)
    values (${write.resource}, ${write.token?.toString() ?? null}::bigint, ${write.leaseRef}, ${write.process},
            ${write.opId ?? null}, ${value.toString()}::bigint, ${write.via ?? null})`.execute(db);
}
