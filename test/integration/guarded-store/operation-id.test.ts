import { StaleTokenError } from '@fenced/shared';
import type { Transaction } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GuardedStore } from '@fenced/guarded-store';
import { createStoreFixture, unique, type StoreFixture } from '../../fixtures/guarded-store-fixture.js';

interface Db {
  ledger: { resource: string; total: string };
}

let f: StoreFixture<Db>;
let store: GuardedStore<Db>;

beforeAll(async () => {
  f = await createStoreFixture<Db>();
  store = f.store;
  await f.sql('create table ledger (resource text primary key, total bigint not null)');
});
afterAll(async () => {
  await f?.close();
});

interface Receipt {
  total: string;
  by: string;
}

/** Adds `amount` to the resource's total; counts its own executions. */
function deposit(resource: string, amount: bigint, calls: { n: number }) {
  return async (trx: Transaction<Db>): Promise<Receipt> => {
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
    return { total, by: `deposit ${amount}` };
  };
}

async function total(resource: string): Promise<bigint> {
  const [row] = await f.sql<{ total: string }>('select total::text from ledger where resource = $1', [
    resource,
  ]);
  return BigInt(row?.total ?? 0);
}

describe('operation ids (G5)', () => {
  it('applies a write retried after a lost reply once, and returns the first result', async () => {
    const resource = unique('r');
    const lease = { resource, id: 'lease-1', token: 3n };
    const calls = { n: 0 };
    const first = await store.run(lease, deposit(resource, 10n, calls), { opId: 'op-lost-reply' });
    // The reply is lost: the client knows nothing and retries with the same op id.
    const retry = await store.run(lease, deposit(resource, 10n, calls), { opId: 'op-lost-reply' });
    expect(retry).toEqual(first);
    expect(retry).toEqual({ total: '10', by: 'deposit 10' });
    expect(calls.n).toBe(1);
    expect(await total(resource)).toBe(10n);
  });

  it('applies concurrent retries of one operation once', async () => {
    const resource = unique('r');
    const lease = { resource, id: 'lease-1', token: 3n };
    const calls = { n: 0 };
    const results = await Promise.all(
      Array.from({ length: 8 }, () => store.run(lease, deposit(resource, 5n, calls), { opId: 'op-burst' })),
    );
    expect(calls.n).toBe(1);
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(await total(resource)).toBe(5n);
  });

  /**
   * The fence row is locked by another transaction (a holder inside its critical section); `count` retries of one
   * write are fired at once and every one of them is seen waiting behind that lock (pg_blocking_pids, directly or behind another retry) before the
   * holder commits. Returns how often the write ran and the total it left.
   */
  async function retriesQueuedOnTheFenceRow(
    opId: string | undefined,
  ): Promise<{ runs: number; total: bigint }> {
    const count = 6;
    const resource = unique('r');
    const lease = { resource, id: 'lease-1', token: 3n };
    await store.fenceIn(lease); // the fence row exists; the holder below locks it
    const holder = new pg.Client({
      connectionString: f.server.url,
      options: `-c search_path=${f.schema.schema}`,
    });
    await holder.connect();
    const calls = { n: 0 };
    try {
      const [{ pid }] = (await holder.query<{ pid: number }>('select pg_backend_pid() as pid')).rows as [
        { pid: number },
      ];
      await holder.query('begin');
      await holder.query('select token from fence where resource = $1 for update', [resource]);
      const retries = Array.from({ length: count }, () =>
        opId === undefined
          ? store.run(lease, deposit(resource, 5n, calls))
          : store.run(lease, deposit(resource, 5n, calls), { opId }),
      );
      const deadline = performance.now() + 10_000;
      for (;;) {
        const [row] = await f.sql<{ waiting: number }>(
          // Waiters queue behind each other: the first waits on the holder, the next ones on the first.
          `with recursive blocked(pid) as (
             select pid from pg_stat_activity where $1 = any(pg_blocking_pids(pid))
             union
             select a.pid from pg_stat_activity a join blocked b on b.pid = any(pg_blocking_pids(a.pid)))
           select count(*)::int as waiting from blocked`,
          [pid],
        );
        if ((row?.waiting ?? 0) >= count) break;
        if (performance.now() > deadline)
          throw new Error(`only ${row?.waiting} retries waiting on the fence row`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(calls.n).toBe(0); // none got past the fence statement while the row was locked
      await holder.query('commit');
      const settled = await Promise.allSettled(retries);
      expect(settled.filter((r) => r.status === 'rejected')).toEqual([]);
    } finally {
      await holder.end();
    }
    return { runs: calls.n, total: await total(resource) };
  }

  it('applies retries of one operation once when they all wait on the fence row lock together', async () => {
    expect(await retriesQueuedOnTheFenceRow('op-queued')).toEqual({ runs: 1, total: 5n });
  });

  it('negative control: the same queued retries without an operation id apply once each', async () => {
    expect(await retriesQueuedOnTheFenceRow(undefined)).toEqual({ runs: 6, total: 30n });
  });

  it('still answers a retry whose first attempt committed before a successor fenced in', async () => {
    const resource = unique('r');
    const calls = { n: 0 };
    const old = { resource, id: 'old', token: 3n };
    const first = await store.run(old, deposit(resource, 7n, calls), { opId: 'op-before-successor' });
    await store.fenceIn({ resource, id: 'new', token: 4n });
    await expect(
      store.run(old, deposit(resource, 7n, calls), { opId: 'op-before-successor' }),
    ).resolves.toEqual(first);
    // A new operation of the old holder is fenced off as usual.
    await expect(
      store.run(old, deposit(resource, 7n, calls), { opId: 'op-after-successor' }),
    ).rejects.toBeInstanceOf(StaleTokenError);
    expect(calls.n).toBe(1);
    expect(await total(resource)).toBe(7n);
  });

  it('runs again when the first attempt rolled back', async () => {
    const resource = unique('r');
    const lease = { resource, id: 'lease', token: 1n };
    await expect(
      store.run(lease, () => Promise.reject(new Error('first attempt failed')), {
        opId: 'op-retry-after-failure',
      }),
    ).rejects.toThrow('first attempt failed');
    const calls = { n: 0 };
    await store.run(lease, deposit(resource, 2n, calls), { opId: 'op-retry-after-failure' });
    expect(calls.n).toBe(1);
    expect(await total(resource)).toBe(2n);
  });

  it('keeps distinct operations distinct, and scopes op ids per resource', async () => {
    const a = unique('r');
    const b = unique('r');
    const calls = { n: 0 };
    await store.run({ resource: a, token: 1n, leaseId: 'l' }, deposit(a, 1n, calls), { opId: 'op-1' });
    await store.run({ resource: a, token: 1n, leaseId: 'l' }, deposit(a, 1n, calls), { opId: 'op-2' });
    await store.run({ resource: b, token: 1n, leaseId: 'l' }, deposit(b, 1n, calls), { opId: 'op-1' });
    expect(calls.n).toBe(3);
    expect(await total(a)).toBe(2n);
    expect(await total(b)).toBe(1n);
  });

  it('replays "no result" as undefined and null as null', async () => {
    const resource = unique('r');
    const lease = { resource, id: 'l', token: 1n };
    await store.run(lease, () => Promise.resolve(undefined), { opId: 'op-undefined' });
    await expect(
      store.run(lease, () => Promise.resolve('other'), { opId: 'op-undefined' }),
    ).resolves.toBeUndefined();
    await store.run(lease, () => Promise.resolve(null), { opId: 'op-null' });
    await expect(store.run(lease, () => Promise.resolve('other'), { opId: 'op-null' })).resolves.toBeNull();
  });

  it('records the operation on every resource of a multi-resource write', async () => {
    const a = unique('r');
    const b = unique('r');
    const calls = { n: 0 };
    const fences = [
      { resource: a, token: 1n, leaseId: 'l' },
      { resource: b, token: 1n, leaseId: 'l' },
    ];
    await store.run(fences, deposit(a, 4n, calls), { opId: 'op-multi' });
    await store.run(fences, deposit(a, 4n, calls), { opId: 'op-multi' });
    expect(calls.n).toBe(1);
    const rows = await f.sql<{ resource: string }>(
      "select resource from fence_operation where op_id = 'op-multi' order by resource",
    );
    expect(rows.map((r) => r.resource)).toEqual([a, b].sort());
  });
});
