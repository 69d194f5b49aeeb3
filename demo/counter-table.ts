import { sql, type Kysely } from 'kysely';
import type { CounterDb } from '@fenced/test-utils/counter-worker/counter-tables';

/**
 * The demo's view of its data: the counter worker's tables (@fenced/test-utils/counter-worker/counter-tables),
 * one counter row per run, incremented by read-modify-write, and the commit log appended in the same
 * transaction as every write, so the checkers read the commit order from the database itself.
 */

/** The lock resource (and fence resource, and counter row) of a run's counter. */
export function counterResource(counter: string): string {
  return `demo-counter:${counter}`;
}

export async function insertCounter(db: Kysely<CounterDb>, resource: string): Promise<void> {
  await sql`insert into counter (resource, value) values (${resource}, 0)`.execute(db);
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
export async function writeLog(db: Kysely<CounterDb>, resource: string): Promise<LoggedWrite[]> {
  const { rows } = await sql<{
    seq: string;
    process: string | null;
    lease_ref: string | null;
    token: string | null;
    value: string;
    via: string | null;
  }>`
    select seq::text as seq, process, lease_ref, token::text as token, value::text as value, via
      from commit_log where resource = ${resource} order by seq`.execute(db);
  return rows.map((r) => ({
    seq: Number(r.seq),
    worker: r.process ?? '?',
    leaseRef: r.lease_ref ?? 'none',
    token: r.token === null ? null : BigInt(r.token),
    value: Number(r.value),
    via: r.via ?? 'db',
  }));
}

/** The counter at the end of a run, and who wrote it last (the last row of its commit log). */
export async function finalCounter(
  db: Kysely<CounterDb>,
  resource: string,
): Promise<{ value: number; writer: string | null }> {
  const { rows } = await sql<{ value: string; writer: string | null }>`
    select c.value::text as value,
           (select l.process from commit_log l where l.resource = c.resource order by l.seq desc limit 1) as writer
      from counter c where c.resource = ${resource}`.execute(db);
  const row = rows[0];
  return { value: Number(row?.value ?? NaN), writer: row?.writer ?? null };
}
