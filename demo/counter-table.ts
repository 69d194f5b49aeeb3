import { sql, type Kysely, type Transaction } from 'kysely';

/**
 * The demo's data: one counter per run, incremented by read-modify-write, and a write log appended in the
 * same transaction as every write, so the checkers read the commit order from the database itself.
 */
export interface CounterDatabase {
  demo_counter: {
    id: string;
    value: bigint;
    last_writer: string | null;
    last_lease_ref: string | null;
    last_token: bigint | null;
  };
  demo_write_log: {
    seq: bigint;
    counter_id: string;
    worker: string;
    lease_ref: string;
    token: bigint | null;
    value: bigint;
    via: string;
  };
}

type Executor = Kysely<CounterDatabase> | Transaction<CounterDatabase>;

/** Creates the demo tables in `schema` (the run's own, dropped at the end). */
export async function createCounterTables(db: Executor, schema: string): Promise<void> {
  await sql`
    create table if not exists ${sql.id(schema, 'demo_counter')} (
      id             text primary key,
      value          bigint not null,
      last_writer    text,
      last_lease_ref text,
      last_token     bigint
    )`.execute(db);
  await sql`
    create table if not exists ${sql.id(schema, 'demo_write_log')} (
      seq        bigserial primary key,
      counter_id text   not null,
      worker     text   not null,
      lease_ref  text   not null,
      token      bigint,
      value      bigint not null,
      via        text   not null
    )`.execute(db);
}

export async function insertCounter(db: Executor, schema: string, id: string): Promise<void> {
  await sql`insert into ${sql.id(schema, 'demo_counter')} (id, value) values (${id}, 0)`.execute(db);
}

export async function readCounter(db: Executor, schema: string, id: string): Promise<number> {
  const { rows } = await sql<{ value: string }>`
    select value::text as value from ${sql.id(schema, 'demo_counter')} where id = ${id}`.execute(db);
  const row = rows[0];
  if (row === undefined) throw new Error(`counter ${id} does not exist`);
  return Number(row.value);
}

export interface CounterWrite {
  readonly counter: string;
  readonly value: number;
  readonly worker: string;
  readonly leaseRef: string;
  /** The fencing token the write ran under; null for an unprotected write. */
  readonly token: bigint | null;
  readonly via: 'db' | 'http';
}

/** The write itself: a plain UPDATE plus its log row. Guarded or not depends on the transaction it runs in. */
export async function writeCounter(db: Executor, schema: string, write: CounterWrite): Promise<void> {
  const token = write.token === null ? null : write.token.toString();
  const { numAffectedRows } = await sql`
    update ${sql.id(schema, 'demo_counter')}
       set value = ${write.value}, last_writer = ${write.worker}, last_lease_ref = ${write.leaseRef},
           last_token = ${token}::bigint
     where id = ${write.counter}`.execute(db);
  if (numAffectedRows !== 1n) throw new Error(`counter ${write.counter} does not exist`);
  await sql`
    insert into ${sql.id(schema, 'demo_write_log')} (counter_id, worker, lease_ref, token, value, via)
    values (${write.counter}, ${write.worker}, ${write.leaseRef}, ${token}::bigint, ${write.value}, ${write.via})`.execute(
    db,
  );
}

export interface LoggedWrite {
  readonly seq: number;
  readonly worker: string;
  readonly leaseRef: string;
  readonly token: bigint | null;
  readonly value: number;
  readonly via: string;
}

/** The committed writes of one counter, in commit order (the log row is written under the write's locks). */
export async function writeLog(db: Executor, schema: string, counter: string): Promise<LoggedWrite[]> {
  const { rows } = await sql<{
    seq: string;
    worker: string;
    lease_ref: string;
    token: string | null;
    value: string;
    via: string;
  }>`
    select seq::text as seq, worker, lease_ref, token::text as token, value::text as value, via
      from ${sql.id(schema, 'demo_write_log')} where counter_id = ${counter} order by seq`.execute(db);
  return rows.map((r) => ({
    seq: Number(r.seq),
    worker: r.worker,
    leaseRef: r.lease_ref,
    token: r.token === null ? null : BigInt(r.token),
    value: Number(r.value),
    via: r.via,
  }));
}

/** The lock resource (and fence resource) that protects a counter. */
export function counterResource(counter: string): string {
  return `demo-counter:${counter}`;
}
