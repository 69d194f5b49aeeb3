// G5 where it is decided: a retry with the same operation id that has to wait on the fence row lock. The lookup of
// the operation must come *after* the fence statement has the row lock (guarded-store.ts): a lookup made before it
// runs on a snapshot taken before the first attempt committed, finds nothing, and the retry then runs the write a
// second time once the lock is free.
//
// The overlap is built, not hoped for: the first attempt holds its transaction open inside the callback until the
// retry is seen waiting on a lock that the first attempt's backend holds (pg_blocking_pids). No timing.
//
// Kills mutant 07 of test/mutants/ (docs/mutation-testing.md).
import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GuardedStore } from '@fenced/guarded-store';
import {
  createStoreFixture,
  eventually,
  unique,
  type StoreFixture,
} from '../../fixtures/guarded-store-fixture.js';

interface Db {
  ledger: { resource: string; total: string };
}

let f: StoreFixture<Db>;
let store: GuardedStore<Db>;
/** A second store over its own pool: the retry runs on another connection, as a client's retry would. */
let retryStore: GuardedStore<Db>;

beforeAll(async () => {
  f = await createStoreFixture<Db>();
  store = f.store;
  retryStore = f.anotherStore();
  await f.sql('create table ledger (resource text primary key, total bigint not null)');
});
afterAll(async () => {
  await f?.close();
});

/** Adds `amount` to the resource's total and counts its executions. */
async function deposit(trx: Transaction<Db>, resource: string, amount: bigint, calls: { n: number }) {
  calls.n += 1;
  const row = await trx
    .selectFrom('ledger')
    .select('total')
    .where('resource', '=', resource)
    .executeTakeFirst();
  const total = (BigInt(row?.total ?? 0) + amount).toString();
  await trx
    .insertInto('ledger')
    .values({ resource, total })
    .onConflict((oc) => oc.column('resource').doUpdateSet({ total }))
    .execute();
  return { total };
}

describe('operation ids and the fence row lock (G5)', () => {
  it('replays the first result to a retry that waited on the fence row lock, and never runs the write twice', async () => {
    const resource = unique('op-lock');
    const lease = { resource, id: 'lease-1', token: 3n };
    const opId = 'op-waits-on-the-row';
    const calls = { n: 0 };
    let firstPid: number | undefined;
    let letFirstCommit!: () => void;
    const firstMayCommit = new Promise<void>((resolve) => (letFirstCommit = resolve));

    const first = store.run(
      lease,
      async (trx) => {
        const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
        firstPid = rows[0]!.pid;
        const result = await deposit(trx, resource, 5n, calls);
        await firstMayCommit; // the fence row stays locked by this transaction meanwhile
        return result;
      },
      { opId },
    );
    await eventually(() => Promise.resolve(firstPid !== undefined));

    const retry = retryStore.run(lease, (trx) => deposit(trx, resource, 5n, calls), { opId });
    // The retry is now blocked by the first attempt's transaction (on the fence row).
    await eventually(async () => {
      const [row] = await f.sql<{ n: number }>(
        'select count(*)::int as n from pg_stat_activity where $1::int = any(pg_blocking_pids(pid))',
        [firstPid],
      );
      return (row?.n ?? 0) > 0;
    });
    letFirstCommit();

    const [firstResult, retryResult] = await Promise.all([first, retry]);
    expect(calls.n).toBe(1);
    expect(retryResult).toEqual(firstResult);
    const [row] = await f.sql<{ total: string }>('select total::text from ledger where resource = $1', [
      resource,
    ]);
    expect(row?.total).toBe('5');
  });
});
