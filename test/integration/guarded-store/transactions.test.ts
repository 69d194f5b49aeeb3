import { StaleTokenError } from '@fenced/shared';
import { Kysely, PostgresDialect, sql, type Transaction } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  GuardedStore,
  LockTimeoutError,
  TransactionAbortedError,
  createDatabase,
  type GuardedStoreOptions,
} from '@fenced/guarded-store';
import { createStoreFixture, unique, type StoreFixture } from '../../fixtures/guarded-store-fixture.js';

/**
 * How a guarded transaction reaches Postgres, over both kinds of Kysely instance the store can be given:
 * `own` — built by `createDatabase` (BEGIN, settings and fence statement in one message, a prepared upsert,
 * aborted COMMITs detected); `user` — a Kysely the caller built over its own pg pool (BEGIN on its own, the
 * settings in the fence statement).
 */

interface Db {
  item: { id: number; resource: string };
}

let f: StoreFixture<Db>;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  f = await createStoreFixture<Db>();
  await f.sql('create table item (id int primary key, resource text not null)');
});
afterAll(async () => {
  for (const close of closers) await close();
  await f?.close();
});

type Kind = 'own' | 'user';

/** A store with a one-connection pool (so session state is observable), and that pool's Kysely. */
function oneConnectionStore(kind: Kind, options: GuardedStoreOptions = {}) {
  let db: Kysely<Db>;
  if (kind === 'own') {
    db = createDatabase<Db>({
      connectionString: f.server.url,
      searchPath: f.schema.schema,
      maxConnections: 1,
    });
  } else {
    const pool = new pg.Pool({
      connectionString: f.server.url,
      max: 1,
      options: `-c search_path=${f.schema.schema}`,
    });
    db = new Kysely<Db>({ dialect: new PostgresDialect({ pool }) });
  }
  closers.push(() => db.destroy());
  return { db, store: new GuardedStore(db, { ...options, schema: f.schema.schema }) };
}

async function show(db: Kysely<Db> | Transaction<Db>, name: string): Promise<string> {
  const { rows } = await sql<{ value: string }>`select current_setting(${name}) as value`.execute(db);
  return rows[0]!.value;
}

/**
 * A guarded write on `resource` at `token` that keeps its transaction, and so the resource's fence row, open until
 * `release()` (which resolves once that write committed).
 */
async function holdFenceRow(resource: string, token: bigint): Promise<{ release: () => Promise<void> }> {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let entered!: () => void;
  const inside = new Promise<void>((resolve) => (entered = resolve));
  const holder = f.store.run({ resource, token, leaseId: 'h' }, async () => {
    entered();
    await gate;
  });
  await inside;
  return {
    release: async () => {
      open();
      await holder;
    },
  };
}

/** The statement of a session waiting on a lock whose text contains one of `needles`, once there is one. */
async function lockWaiterQuery(...needles: string[]): Promise<string> {
  for (;;) {
    const rows = await f.sql<{ query: string }>(
      "select query from pg_stat_activity where wait_event_type = 'Lock'",
    );
    const waiting = rows.find((r) => needles.some((needle) => r.query.includes(needle)));
    if (waiting !== undefined) return waiting.query;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function items(resource: string): Promise<number> {
  const rows = await f.sql<{ n: number }>('select count(*)::int as n from item where resource = $1', [
    resource,
  ]);
  return rows[0]!.n;
}

let nextId = 1_000;

describe.each<Kind>(['own', 'user'])('guarded transactions over a %s Kysely', (kind) => {
  it('applies lock_timeout, idle_in_transaction_session_timeout and synchronous_commit = on to each guarded transaction, whatever the session says, and only to it', async () => {
    const { db, store } = oneConnectionStore(kind, { lockTimeoutMs: 1234, idleInTransactionTimeoutMs: 4321 });
    // Someone changed the pooled session's settings outside the store.
    await sql`set synchronous_commit = off`.execute(db);
    await sql`set lock_timeout = 0`.execute(db);
    await sql`set idle_in_transaction_session_timeout = 0`.execute(db);
    const inside = await store.run({ resource: unique('r'), token: 1n }, async (trx) => ({
      synchronousCommit: await show(trx, 'synchronous_commit'),
      lockTimeout: await show(trx, 'lock_timeout'),
      idle: await show(trx, 'idle_in_transaction_session_timeout'),
    }));
    expect(inside).toEqual({ synchronousCommit: 'on', lockTimeout: '1234ms', idle: '4321ms' });
    // Local to the guarded transaction: the session keeps its own values afterwards.
    expect(await show(db, 'synchronous_commit')).toBe('off');
    expect(await show(db, 'lock_timeout')).toBe('0');
    expect(await show(db, 'idle_in_transaction_session_timeout')).toBe('0');
  });

  it('raises, re-enters and refuses fences for resource names that need escaping', async () => {
    const { store } = oneConnectionStore(kind);
    const names = [
      `it's; drop table fence; --${unique('r')}`,
      `back\\slash \\x41 E'\\'${unique('r')}`,
      `"quoted" ünïcödé ☃ 𝄞 $$ $1 ${unique('r')}`,
    ];
    for (const resource of names) {
      await store.run({ resource, token: 7n, leaseId: 'lease-a' }, () => Promise.resolve());
      await store.run({ resource, token: 7n, leaseId: 'lease-a' }, () => Promise.resolve());
      const error = await store
        .run({ resource, token: 6n }, () => Promise.resolve())
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(StaleTokenError);
      expect(error).toMatchObject({ resource, presented: 6n, current: 7n });
      expect((await store.fenceOf(resource))?.token).toBe(7n);
    }
    // Several fences at once (the sorted path) with the same names.
    await store.run(
      names.map((resource) => ({ resource, token: 8n })),
      () => Promise.resolve(),
    );
    for (const resource of names) expect((await store.fenceOf(resource))?.token).toBe(8n);
    const rows = await f.sql<{ resource: string }>('select resource from fence where resource = any($1)', [
      names,
    ]);
    expect(rows.map((r) => r.resource).sort()).toEqual([...names].sort());
  });

  it('still bounds the wait for a held fence row with lock_timeout', async () => {
    const { store: impatient } = oneConnectionStore(kind, { lockTimeoutMs: 50 });
    const resource = unique('r');
    const holder = await holdFenceRow(resource, 1n);
    const error = await impatient
      .run({ resource, token: 2n }, () => Promise.resolve())
      .catch((e: unknown) => e);
    await holder.release();
    expect(error).toBeInstanceOf(LockTimeoutError);
    // The connection is clean again: the next guarded write on it goes through.
    await impatient.run({ resource, token: 2n }, () => Promise.resolve());
    expect((await f.store.fenceOf(resource))?.token).toBe(2n);
  });

  it('turns a failed statement that the callback swallowed into TransactionAbortedError when there is an op id', async () => {
    const { store } = oneConnectionStore(kind);
    const resource = unique('r');
    const id = nextId++;
    const error = await store
      .run(
        { resource, token: 3n },
        async (trx) => {
          await trx.insertInto('item').values({ id, resource }).execute();
          // A duplicate key: the statement fails, the callback swallows it and returns as if all was well.
          await trx
            .insertInto('item')
            .values({ id, resource })
            .execute()
            .catch(() => undefined);
          return 'done';
        },
        { opId: `op-${id}` },
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransactionAbortedError);
    expect(error).toMatchObject({ sqlstate: '25P02', retryable: false, code: 'INTERNAL' });
    expect(await items(resource)).toBe(0);
    expect(await store.fenceOf(resource)).toBeUndefined();
    await store.run({ resource, token: 3n }, () => Promise.resolve());
  });
});

describe('a failed statement the callback swallows, over a createDatabase Kysely', () => {
  it('fails the write with TransactionAbortedError, carrying the statement’s error, instead of a silent rollback', async () => {
    const { store } = oneConnectionStore('own');
    const resource = unique('r');
    const id = nextId++;
    const error = await store
      .run({ resource, token: 3n }, async (trx) => {
        await trx.insertInto('item').values({ id, resource }).execute();
        await trx
          .insertInto('item')
          .values({ id, resource })
          .execute()
          .catch(() => undefined);
        return 'done';
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TransactionAbortedError);
    expect(error).toMatchObject({ retryable: false });
    expect((error as TransactionAbortedError).cause).toMatchObject({ code: '23505' });
    expect(await items(resource)).toBe(0);
    expect(await store.fenceOf(resource)).toBeUndefined();
    // The connection is usable and the resource can still be fenced.
    await expect(store.run({ resource, token: 3n }, () => Promise.resolve('ok'))).resolves.toBe('ok');
    expect((await store.fenceOf(resource))?.token).toBe(3n);
  });

  it('does the same for dangerouslyRunUnguarded, and lets read() return (a read-only transaction lost nothing)', async () => {
    const { store } = oneConnectionStore('own');
    const resource = unique('r');
    const id = nextId++;
    const unguarded = await store
      .dangerouslyRunUnguarded(async (trx) => {
        await trx.insertInto('item').values({ id, resource }).execute();
        await sql`select 1 / 0`.execute(trx).catch(() => undefined);
      })
      .catch((e: unknown) => e);
    expect(unguarded).toBeInstanceOf(TransactionAbortedError);
    expect((unguarded as TransactionAbortedError).cause).toMatchObject({ code: '22012' });
    expect(await items(resource)).toBe(0);
    const read = await store.read(async (trx) => {
      await sql`select 1 / 0`.execute(trx).catch(() => undefined);
      return 'fallback';
    });
    expect(read).toBe('fallback');
  });

  it('is, over a Kysely the store did not create and without an op id, still a silent rollback (documented limitation)', async () => {
    const { store } = oneConnectionStore('user');
    const resource = unique('r');
    const id = nextId++;
    const value = await store.run({ resource, token: 3n }, async (trx) => {
      await trx.insertInto('item').values({ id, resource }).execute();
      await sql`select 1 / 0`.execute(trx).catch(() => undefined);
      return 'done';
    });
    expect(value).toBe('done');
    expect(await items(resource)).toBe(0);
    expect(await store.fenceOf(resource)).toBeUndefined();
  });
});

describe('one round trip to start a guarded transaction over a createDatabase Kysely', () => {
  it('sends BEGIN, the settings and the fence statement in one message', async () => {
    const { store } = oneConnectionStore('own');
    const resource = unique('r');
    // The row exists (committed), so the store's first statement is the UPDATE that raises it (a row that does
    // not exist yet is inserted by a second statement, see the next test).
    await f.store.fenceIn({ resource, token: 1n, leaseId: 'first' });
    // Hold the fence row, and let the store's transaction wait on it: its session's current message is then the
    // one that began the transaction.
    const holder = await holdFenceRow(resource, 2n);
    const waiter = store.run({ resource, token: 3n }, () => Promise.resolve());
    const query = await lockWaiterQuery(resource, f.schema.schema);
    await holder.release();
    await waiter;
    expect(query).toMatch(/^start transaction isolation level read committed read write;/);
    expect(query).toContain('set local lock_timeout = 10000');
    expect(query).toContain('set local synchronous_commit = on');
    expect(query).toMatch(/execute fenced_fence_[0-9a-f]{16}_/);
  });

  it('decides a first write that races another one on the row the other committed (the insert-or-update after an UPDATE that found no row)', async () => {
    const { store } = oneConnectionStore('own');
    for (const [token, outcome] of [
      [3n, 'raised'],
      [1n, 'stale'],
    ] as const) {
      const resource = unique('r');
      // The holder inserts the resource's first fence row and keeps its transaction open: the store's UPDATE
      // finds no row in its snapshot, and its insert-or-update waits for the holder's row.
      const holder = await holdFenceRow(resource, 2n);
      const waiter = store
        .run({ resource, token }, () => Promise.resolve('written'))
        .then(
          (value) => value,
          (error: unknown) => error,
        );
      expect(await lockWaiterQuery(resource)).toMatch(/^insert into .*\.fence as f/);
      await holder.release();
      const result = await waiter;
      if (outcome === 'raised') {
        expect(result).toBe('written');
        expect((await f.store.fenceOf(resource))?.token).toBe(3n);
      } else {
        expect(result).toBeInstanceOf(StaleTokenError);
        expect((result as StaleTokenError).current).toBe(2n);
        expect((await f.store.fenceOf(resource))?.token).toBe(2n);
      }
    }
  });

  it('prepares the fence statements once per connection, and recovers when the session loses them', async () => {
    const { db, store } = oneConnectionStore('own');
    const resource = unique('r');
    const prepared = async () =>
      (
        await sql<{
          name: string;
        }>`select name from pg_prepared_statements where name like 'fenced_fence_%'`.execute(db)
      ).rows
        .map((r) => r.name)
        .sort();
    await store.run({ resource, token: 1n }, () => Promise.resolve());
    const names = await prepared();
    // The SELECT … FOR UPDATE of the equal-token row and the UPDATE of a lower one.
    expect(names).toHaveLength(2);
    for (const name of names) expect(name).toContain(f.schema.schema);
    // Someone resets the pooled session: the next guarded write still goes through, then prepares again.
    await sql`deallocate all`.execute(db);
    await store.run({ resource, token: 2n }, () => Promise.resolve());
    expect((await store.fenceOf(resource))?.token).toBe(2n);
    await store.run({ resource, token: 3n }, () => Promise.resolve());
    expect(await prepared()).toEqual(names);
    await expect(store.run({ resource, token: 2n }, () => Promise.resolve())).rejects.toBeInstanceOf(
      StaleTokenError,
    );
    // A session that already has statements of those names (not ours): the store replaces them.
    const { db: other, store: fresh } = oneConnectionStore('own');
    for (const name of names) {
      await sql.raw(`prepare ${name} as select 'not the fence' as resource`).execute(other);
    }
    await fresh.run({ resource, token: 4n }, () => Promise.resolve());
    expect((await fresh.fenceOf(resource))?.token).toBe(4n);
    await expect(fresh.run({ resource, token: 3n }, () => Promise.resolve())).rejects.toBeInstanceOf(
      StaleTokenError,
    );
  });
});
