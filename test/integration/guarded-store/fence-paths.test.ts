// One table of fence cases, run through every path a transaction can be fenced by, on a real Postgres and one
// fence table: the store over its own pool (the prepared fence statements), the store over a Kysely it did not
// create, the SQL function called by hand from node-postgres, and the node-postgres, Drizzle and Prisma adapters
// (each ORM's current release, Prisma through @prisma/adapter-pg). Same rules everywhere: a lower token refused,
// an equal one only from the same lease, several resources in one order, the row locked until COMMIT, operation
// ids replayed, and the same StaleTokenError.
import { randomUUID } from 'node:crypto';
import { LeaseLostError, StaleTokenError } from '@fenced/shared';
import { drizzle } from 'drizzle-orm/node-postgres';
import { pgTable, serial, text } from 'drizzle-orm/pg-core';
import { Kysely, PostgresDialect, type Generated } from 'kysely';
import pg from 'pg';
import { PrismaPg } from '@prisma/adapter-pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DeadlockDetectedError,
  GuardedStore,
  leaseIdHash,
  staleTokenErrorOf,
  type Fence,
} from '@fenced/guarded-store';
import { DrizzleGuard } from '@fenced/guarded-store/drizzle';
import { PgGuard } from '@fenced/guarded-store/pg';
import { PrismaGuard } from '@fenced/guarded-store/prisma';
import {
  createStoreFixture,
  eventually,
  unique,
  type StoreFixture,
} from '../../fixtures/guarded-store-fixture.js';
import { generatePrismaClient } from '../../fixtures/prisma-client.js';

interface Db {
  note: { id: Generated<number>; resource: string; body: string };
}

/** One way to fence a transaction and write a note in it; returns the note's body (or a replayed one). */
interface FencePath {
  readonly name: string;
  write(fences: Fence | readonly Fence[], body: string, opId?: string): Promise<string>;
}

const note = pgTable('note', {
  id: serial('id').primaryKey(),
  resource: text('resource').notNull(),
  body: text('body').notNull(),
});

interface PrismaNoteTx {
  note: { create(args: { data: { resource: string; body: string } }): Promise<unknown> };
  $queryRawUnsafe<R = unknown>(query: string, ...values: unknown[]): Promise<R>;
}
interface PrismaLike {
  $transaction<R>(fn: (tx: PrismaNoteTx) => Promise<R>, options?: object): Promise<R>;
  $disconnect(): Promise<void>;
}

let f: StoreFixture<Db>;
let pool: pg.Pool;
let byoKysely: Kysely<Db>;
let prisma: PrismaLike;
const paths: FencePath[] = [];

const firstResource = (fences: Fence | readonly Fence[]): string =>
  (Array.isArray(fences) ? (fences as readonly Fence[])[0]! : (fences as Fence)).resource;
const list = (fences: Fence | readonly Fence[]): readonly Fence[] =>
  Array.isArray(fences) ? (fences as readonly Fence[]) : [fences as Fence];

beforeAll(async () => {
  f = await createStoreFixture<Db>();
  await f.sql('create table note (id serial primary key, resource text not null, body text not null)');
  const schema = f.schema.schema;
  pool = new pg.Pool({ connectionString: f.server.url, max: 6, options: `-c search_path=${schema}` });
  byoKysely = new Kysely<Db>({ dialect: new PostgresDialect({ pool }) });
  const functionStore = new GuardedStore(byoKysely, { schema });
  const pgGuard = new PgGuard({ schema });
  const drizzleGuard = new DrizzleGuard({ schema });
  const drizzleDb = drizzle(pool);
  const prismaGuard = new PrismaGuard({ schema, transactionTimeoutMs: 30_000 });
  const { PrismaClient } = (await generatePrismaClient()) as {
    PrismaClient: new (options: { adapter: PrismaPg }) => PrismaLike;
  };
  prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: f.server.url }, { schema }) });

  const viaStore =
    (store: GuardedStore<Db>) => (fences: Fence | readonly Fence[], body: string, opId?: string) => {
      const fn = async (trx: Parameters<Parameters<GuardedStore<Db>['run']>[1]>[0]) => {
        await trx
          .insertInto('note')
          .values({ resource: firstResource(fences), body })
          .execute();
        return body;
      };
      return opId === undefined ? store.run(fences, fn) : store.run(fences, fn, { opId });
    };
  paths.push(
    { name: 'GuardedStore over its own pool', write: viaStore(f.store) },
    { name: 'GuardedStore over a Kysely it did not create (SQL function)', write: viaStore(functionStore) },
    {
      name: 'the SQL function by hand (node-postgres, BEGIN … COMMIT)',
      write: async (fences, body, opId) => {
        const all = list(fences);
        const client = await pool.connect();
        try {
          await client.query('begin');
          const hashes = all.map((x) => (x.leaseId === undefined ? null : leaseIdHash(x.leaseId)));
          const args = [all.map((x) => x.resource), all.map((x) => String(x.token)), hashes];
          if (opId === undefined) {
            await client.query(`select ${schema}.fence_each($1, $2, $3)`, args);
          } else {
            const { rows } = await client.query<{ replayed: boolean; result: string }>(
              `select * from ${schema}.fence_each($1, $2, $3, $4)`,
              [...args, opId],
            );
            if (rows[0]!.replayed) {
              await client.query('rollback');
              return rows[0]!.result;
            }
          }
          await client.query('insert into note (resource, body) values ($1, $2)', [
            firstResource(fences),
            body,
          ]);
          if (opId !== undefined) {
            await client.query(`select ${schema}.record_operation_all($1, $2, $3, $4)`, [
              args[0],
              args[1],
              opId,
              JSON.stringify(body),
            ]);
          }
          await client.query('commit');
          return body;
        } catch (error) {
          await client.query('rollback');
          throw staleTokenErrorOf(error) ?? error;
        } finally {
          client.release();
        }
      },
    },
    {
      name: '@fenced/guarded-store/pg (PgGuard.run)',
      write: (fences, body, opId) => {
        const fn = async (client: pg.PoolClient) => {
          await client.query('insert into note (resource, body) values ($1, $2)', [
            firstResource(fences),
            body,
          ]);
          return body;
        };
        return opId === undefined ? pgGuard.run(pool, fences, fn) : pgGuard.run(pool, fences, fn, { opId });
      },
    },
    {
      name: `@fenced/guarded-store/drizzle (DrizzleGuard.run, drizzle-orm)`,
      write: (fences, body, opId) => {
        const fn = async (tx: Parameters<Parameters<typeof drizzleDb.transaction>[0]>[0]) => {
          await tx.insert(note).values({ resource: firstResource(fences), body });
          return body;
        };
        return opId === undefined
          ? drizzleGuard.run(drizzleDb, fences, fn)
          : drizzleGuard.run(drizzleDb, fences, fn, { opId });
      },
    },
    {
      name: '@fenced/guarded-store/prisma (PrismaGuard.run, Prisma 7 with @prisma/adapter-pg)',
      write: (fences, body, opId) => {
        const fn = async (tx: PrismaNoteTx) => {
          await tx.note.create({ data: { resource: firstResource(fences), body } });
          return body;
        };
        return opId === undefined
          ? prismaGuard.run(prisma, fences, fn)
          : prismaGuard.run(prisma, fences, fn, { opId });
      },
    },
  );
}, 180_000);

afterAll(async () => {
  await prisma?.$disconnect();
  await byoKysely?.destroy();
  await f?.close();
});

async function notes(resource: string): Promise<string[]> {
  const rows = await f.sql<{ body: string }>('select body from note where resource = $1 order by id', [
    resource,
  ]);
  return rows.map((r) => r.body);
}

async function fenceOf(resource: string): Promise<bigint | undefined> {
  return (await f.store.fenceOf(resource))?.token;
}

/** Whether a backend of this database waits for a lock in a statement of the fence (the holder's row). */
async function waitingOnAFence(): Promise<boolean> {
  const [row] = await f.sql<{ n: number }>(
    `select count(*)::int as n from pg_locks l join pg_stat_activity a using (pid)
      where not l.granted and a.datname = current_database() and a.query ilike '%fence%'`,
  );
  return (row?.n ?? 0) > 0;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

const PATH_COUNT = 6;

describe.each(Array.from({ length: PATH_COUNT }, (_, i) => i))('fence path %i', (index) => {
  const path = () => paths[index]!;

  it('has a name (for the reader of the results)', () => {
    expect(path().name).toMatch(/\w/);
  });

  it('accepts the first token, then a higher one, and refuses a lower one with StaleTokenError', async () => {
    const resource = unique('paths');
    await expect(path().write({ resource, token: 5n }, 'a')).resolves.toBe('a');
    expect(await fenceOf(resource)).toBe(5n);
    await expect(path().write({ resource, token: 9n }, 'b')).resolves.toBe('b');
    const error = await rejection(path().write({ resource, token: 7n }, 'stale'));
    expect(error, path().name).toBeInstanceOf(StaleTokenError);
    expect(error).toMatchObject({ code: 'STALE_TOKEN', resource, presented: 7n, current: 9n });
    expect(await notes(resource)).toEqual(['a', 'b']);
    expect(await fenceOf(resource)).toBe(9n);
  });

  it('accepts an equal token only from the lease that set the fence', async () => {
    const resource = unique('paths-equal');
    const leaseId = randomUUID();
    await path().write({ resource, token: 4n, leaseId }, 'first');
    await expect(path().write({ resource, token: 4n, leaseId }, 'again')).resolves.toBe('again');
    const other = await rejection(path().write({ resource, token: 4n, leaseId: randomUUID() }, 'other'));
    expect(other).toBeInstanceOf(StaleTokenError);
    expect(other).toMatchObject({ presented: 4n, current: 4n });
    const anonymous = await rejection(path().write({ resource, token: 4n }, 'anonymous'));
    expect(anonymous).toBeInstanceOf(StaleTokenError);
    expect((anonymous as Error).message).toContain('named no lease');
    expect(await notes(resource)).toEqual(['first', 'again']);
  });

  it('fences several resources at once: one stale resource refuses the whole transaction', async () => {
    const a = unique('paths-multi-a');
    const b = unique('paths-multi-b');
    await path().write({ resource: b, token: 5n }, 'b');
    const error = await rejection(
      path().write(
        [
          { resource: a, token: 9n },
          { resource: b, token: 3n },
        ],
        'both',
      ),
    );
    expect(error).toMatchObject({ resource: b, presented: 3n, current: 5n });
    expect(await fenceOf(a)).toBeUndefined();
    expect(await notes(a)).toEqual([]);
    await expect(
      path().write(
        [
          { resource: b, token: 6n },
          { resource: a, token: 6n },
        ],
        'both',
      ),
    ).resolves.toBe('both');
    expect([await fenceOf(a), await fenceOf(b)]).toEqual([6n, 6n]);
  });

  it('replays an operation id: the write runs once, and its retry gets the first answer even after a later lease wrote', async () => {
    const resource = unique('paths-op');
    const opId = unique('op');
    await expect(path().write({ resource, token: 3n }, 'once', opId)).resolves.toBe('once');
    await expect(path().write({ resource, token: 3n }, 'twice', opId)).resolves.toBe('once');
    await path().write({ resource, token: 8n }, 'later');
    await expect(path().write({ resource, token: 3n }, 'thrice', opId)).resolves.toBe('once');
    expect(await notes(resource)).toEqual(['once', 'later']);
  });

  it('holds the fence row until COMMIT: a higher token waits for the holder, a lower one waits and is refused', async () => {
    const resource = unique('paths-lock');
    const holder = await pool.connect();
    try {
      // The holder idles while the test looks at pg_locks: as long as a loaded machine needs.
      await holder.query('begin');
      await holder.query("set local idle_in_transaction_session_timeout = '10min'");
      await holder.query(`select ${f.schema.schema}.fence($1, $2)`, [resource, '10']);
      const higher = path().write({ resource, token: 11n }, 'after the holder');
      let settled = false;
      void higher.then(
        () => (settled = true),
        () => (settled = true),
      );
      // The write waits on the holder's row lock (seen in pg_locks), not on anything else.
      await eventually(waitingOnAFence, { what: 'a write waiting on the fence row lock' });
      expect(settled).toBe(false);
      expect(await notes(resource)).toEqual([]);
      await holder.query('commit');
      await expect(higher).resolves.toBe('after the holder');
      expect(await fenceOf(resource)).toBe(11n);

      await holder.query('begin');
      await holder.query("set local idle_in_transaction_session_timeout = '10min'");
      await holder.query(`select ${f.schema.schema}.fence($1, $2)`, [resource, '20']);
      const lower = rejection(path().write({ resource, token: 15n }, 'stale'));
      await eventually(waitingOnAFence, { what: 'a write waiting on the fence row lock' });
      await holder.query('commit');
      expect(await lower).toMatchObject({ presented: 15n, current: 20n });
      expect(await notes(resource)).toEqual(['after the holder']);
    } finally {
      await holder.query('rollback').catch(() => undefined);
      holder.release();
    }
  });

  it('refuses a lease its holder released, before any statement', async () => {
    const resource = unique('paths-released');
    if (path().name.startsWith('the SQL function by hand')) return; // a lease object is the library's notion
    const released = { resource, id: randomUUID(), token: 3n, released: true } as Fence;
    const error = await rejection(path().write(released, 'after release'));
    expect(error).toBeInstanceOf(LeaseLostError);
    expect(await fenceOf(resource)).toBeUndefined();
  });
});

describe('several paths at once', () => {
  it('lock overlapping resources in one order: opposite orders through every path never deadlock', async () => {
    const a = unique('cross-a');
    const b = unique('cross-b');
    let token = 0n;
    const attempts = paths.flatMap((path, i) =>
      Array.from({ length: 4 }, (_, j) => {
        token += 1n;
        const fences: Fence[] =
          (i + j) % 2 === 0
            ? [
                { resource: a, token },
                { resource: b, token },
              ]
            : [
                { resource: b, token },
                { resource: a, token },
              ];
        return path.write(fences, `${path.name} ${j}`).then(
          () => 'ok',
          (error: unknown) => error,
        );
      }),
    );
    const outcomes = await Promise.all(attempts);
    const unexpected = outcomes.filter((o) => o !== 'ok' && !(o instanceof StaleTokenError));
    expect(unexpected.filter((o) => o instanceof DeadlockDetectedError)).toEqual([]);
    expect(unexpected).toEqual([]);
    expect(outcomes).toContain('ok');
    // The fences end at the highest token that committed, the same on both resources.
    expect(await fenceOf(a)).toBe(await fenceOf(b));
  });
});
