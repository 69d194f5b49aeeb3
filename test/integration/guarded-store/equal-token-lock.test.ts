// The equal-token fence (fence-statement.ts, migrations/0006_fence_equal_token_locks.sql), on a real Postgres:
// a lease that writes again with its token takes the fence row's lock and writes no new row version (the row's
// ctid and xmin stay as they were), and that lock still holds every other writer of the resource until COMMIT:
// a second transaction of the same lease, and a higher token of another lease. Through the store's own pool
// (one fence: the SELECT … FOR UPDATE of step 1, or step 2 for a store that never fenced the resource; several
// fences) and through the SQL function (a Kysely the store did not create, and by hand).
import { randomUUID } from 'node:crypto';
import { StaleTokenError } from '@fenced/shared';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GuardedStore, leaseIdHash, staleTokenErrorOf, type Fence } from '@fenced/guarded-store';
import {
  createStoreFixture,
  eventually,
  unique,
  type StoreFixture,
} from '../../fixtures/guarded-store-fixture.js';

/** Long enough for a parked holder on a loaded machine; the test ends every transaction itself. */
const PATIENT = { lockTimeoutMs: 600_000, idleInTransactionTimeoutMs: 600_000 };

/** One way to run a fenced transaction whose body is `inside`. */
interface FencePath {
  readonly name: string;
  run(fences: readonly Fence[], inside: () => Promise<void>): Promise<void>;
}

let f: StoreFixture<Record<string, never>>;
let pool: pg.Pool;
let byoKysely: Kysely<Record<string, never>>;
const paths: FencePath[] = [];

beforeAll(async () => {
  f = await createStoreFixture<Record<string, never>>(PATIENT);
  const schema = f.schema.schema;
  pool = new pg.Pool({ connectionString: f.server.url, max: 6, options: `-c search_path=${schema}` });
  byoKysely = new Kysely({ dialect: new PostgresDialect({ pool }) });
  const functionStore = new GuardedStore(byoKysely, { ...PATIENT, schema });
  paths.push(
    { name: 'own pool, one fence', run: (fences, inside) => f.store.run(fences[0]!, inside) },
    { name: 'own pool, several fences', run: (fences, inside) => f.store.run(fences, inside) },
    {
      // A store that never fenced the resource sends the UPDATE first; step 2 (upsert and SELECT) then decides.
      name: 'own pool, one fence, a new store each time',
      run: (fences, inside) => f.anotherStore({ ...PATIENT, maxConnections: 1 }).run(fences[0]!, inside),
    },
    {
      name: 'SQL function, Kysely the store did not create',
      run: (fences, inside) => functionStore.run(fences, inside),
    },
    {
      name: 'SQL function by hand (fence_each)',
      run: async (fences, inside) => {
        const client = await pool.connect();
        try {
          await client.query('begin');
          await client.query(
            `set local lock_timeout = '10min'; set local idle_in_transaction_session_timeout = '10min'`,
          );
          await client.query(`select ${schema}.fence_each($1, $2, $3)`, [
            fences.map((x) => x.resource),
            fences.map((x) => String(x.token)),
            fences.map((x) => (x.leaseId === undefined ? null : leaseIdHash(x.leaseId))),
          ]);
          await inside();
          await client.query('commit');
        } catch (error) {
          await client.query('rollback');
          throw staleTokenErrorOf(error) ?? error;
        } finally {
          client.release();
        }
      },
    },
  );
}, 180_000);

afterAll(async () => {
  await byoKysely?.destroy();
  await f?.close();
});

/** Where the row's current version lives and which transaction wrote it: both change with every UPDATE. */
async function rowVersion(resource: string): Promise<{ ctid: string; xmin: string; token: string }> {
  const [row] = await f.sql<{ ctid: string; xmin: string; token: string }>(
    'select ctid::text, xmin::text, token::text from fence where resource = $1',
    [resource],
  );
  return row!;
}

/** Whether a backend of this database waits for a lock in a statement of the fence. */
async function waitingOnAFence(): Promise<boolean> {
  const [row] = await f.sql<{ n: number }>(
    `select count(*)::int as n from pg_locks l join pg_stat_activity a using (pid)
      where not l.granted and a.datname = current_database() and a.query ilike '%fence%'`,
  );
  return (row?.n ?? 0) > 0;
}

/** Runs `path` with its body parked until `release()`; `inside` resolves once the body runs. */
function parked(path: FencePath, fences: readonly Fence[]) {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let entered!: () => void;
  const inside = new Promise<void>((resolve) => (entered = resolve));
  const done = path.run(fences, async () => {
    entered();
    await gate;
  });
  return { inside, release, done };
}

/** A promise that records whether it settled, for asserting that a writer is still waiting. */
function watched<T>(promise: Promise<T>) {
  const state = { settled: false };
  promise.then(
    () => (state.settled = true),
    () => (state.settled = true),
  );
  return state;
}

const fencesOf = (pathName: string, resource: string, token: bigint, leaseId: string): Fence[] =>
  pathName.includes('several')
    ? [
        { resource, token, leaseId },
        { resource: `${resource}-b`, token, leaseId },
      ]
    : [{ resource, token, leaseId }];

describe('the check on row versions', () => {
  it('sees a rewrite of the row with the same values (what the equal-token fence did before)', async () => {
    const resource = unique('control');
    await f.store.run({ resource, token: 3n, leaseId: 'l' }, () => Promise.resolve());
    const before = await rowVersion(resource);
    await f.sql('update fence set token = token, lease_id_hash = lease_id_hash where resource = $1', [
      resource,
    ]);
    const after = await rowVersion(resource);
    expect(after.token).toBe(before.token);
    expect(after.ctid === before.ctid && after.xmin === before.xmin).toBe(false);
  });
});

describe.each([0, 1, 2, 3, 4])('equal-token fence, path %i', (index) => {
  const path = () => paths[index]!;

  it('writes no new row version for the same lease with its token; a higher token does', async () => {
    const resource = unique('equal');
    const leaseId = randomUUID();
    await path().run(fencesOf(path().name, resource, 5n, leaseId), () => Promise.resolve());
    const first = await rowVersion(resource);
    expect(first.token).toBe('5');
    for (let i = 0; i < 3; i++) {
      await path().run(fencesOf(path().name, resource, 5n, leaseId), () => Promise.resolve());
      expect(await rowVersion(resource), path().name).toEqual(first);
    }
    // Still refused: an equal token from another lease, or naming none, and a lower one.
    for (const fence of [
      { resource, token: 5n, leaseId: randomUUID() },
      { resource, token: 5n },
      { resource, token: 4n, leaseId },
    ]) {
      await expect(path().run([fence], () => Promise.resolve())).rejects.toBeInstanceOf(StaleTokenError);
    }
    expect(await rowVersion(resource)).toEqual(first);
    await path().run(fencesOf(path().name, resource, 6n, leaseId), () => Promise.resolve());
    const raised = await rowVersion(resource);
    expect(raised.token).toBe('6');
    expect(raised.ctid === first.ctid && raised.xmin === first.xmin).toBe(false);
  });

  it('holds the row until COMMIT: a second transaction of the same lease, then a higher token, wait for it', async () => {
    const resource = unique('equal-lock');
    const leaseId = randomUUID();
    const fences = fencesOf(path().name, resource, 7n, leaseId);
    await path().run(fences, () => Promise.resolve());
    const version = await rowVersion(resource);

    // A holder with the equal token, parked inside its transaction.
    const holder = parked(path(), fences);
    await holder.inside;
    await expect(
      f.sql('select 1 from fence where resource = $1 for update nowait', [resource]),
    ).rejects.toMatchObject({ code: '55P03' });
    // The same lease again, same token: it waits for the holder's COMMIT.
    const sameLease = parked(path(), fences);
    const sameState = watched(sameLease.inside);
    await eventually(waitingOnAFence, { what: 'a writer waiting on the fence row' });
    expect(sameState.settled).toBe(false);
    holder.release();
    await holder.done;
    await sameLease.inside;
    expect(await rowVersion(resource)).toEqual(version);
    await expect(
      f.sql('select 1 from fence where resource = $1 for update nowait', [resource]),
    ).rejects.toMatchObject({ code: '55P03' });

    // A higher token of another lease waits for the equal-token holder (now the second transaction), then raises.
    const higher = f.store.run({ resource, token: 8n, leaseId: randomUUID() }, () => Promise.resolve());
    const higherState = watched(higher);
    await eventually(waitingOnAFence, { what: 'a writer waiting on the fence row' });
    expect(higherState.settled).toBe(false);
    expect((await rowVersion(resource)).token).toBe('7');
    sameLease.release();
    await sameLease.done;
    await higher;
    expect((await rowVersion(resource)).token).toBe('8');
    // Nothing holds the row any more.
    await expect(
      f.sql('select 1 from fence where resource = $1 for update nowait', [resource]),
    ).resolves.toEqual([{ '?column?': 1 }]);
    await expect(path().run(fences, () => Promise.resolve())).rejects.toBeInstanceOf(StaleTokenError);
  });
});
