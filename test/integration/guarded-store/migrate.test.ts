import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabase, migrate, GuardedStore } from '@fenced/guarded-store';
import { migrateExample } from '../../../packages/guarded-store/src/example/index.js';
import { findOrStartPostgres, type PostgresServer } from '@fenced/test-utils/postgres';

let server: PostgresServer;
let admin: pg.Pool;
const schemas: string[] = [];
const databases: Kysely<unknown>[] = [];

beforeAll(async () => {
  server = await findOrStartPostgres();
  admin = new pg.Pool({ connectionString: server.url, max: 2 });
});
afterAll(async () => {
  await Promise.all(databases.map((db) => db.destroy()));
  for (const schema of schemas) await admin.query(`drop schema if exists "${schema}" cascade`);
  await admin?.end();
  await server?.stop();
});

/** A schema name that does not exist yet: migrate must create it. */
function freshSchema(): string {
  const schema = `fenced_mig_${randomBytes(5).toString('hex')}`;
  schemas.push(schema);
  return schema;
}

/** Each migrator gets its own pool, as separate processes would. */
function database(): Kysely<unknown> {
  const db = createDatabase<unknown>({ connectionString: server.url, maxConnections: 2 });
  databases.push(db);
  return db;
}

async function tablesIn(schema: string): Promise<string[]> {
  const { rows } = await admin.query<{ table_name: string }>(
    'select table_name from information_schema.tables where table_schema = $1 order by table_name',
    [schema],
  );
  return rows.map((r) => r.table_name);
}

const STORE_MIGRATIONS = [
  '0001_create_fence',
  '0002_create_fence_operation',
  '0003_create_fence_reset',
  '0004_drop_fence_checks',
  '0005_create_fence_function',
  '0006_fence_equal_token_locks',
];

describe('migrate', () => {
  it('creates the schema and every table in it, the migration bookkeeping included', async () => {
    const schema = freshSchema();
    const report = await migrate(database(), { schema });
    expect(report.applied).toEqual(STORE_MIGRATIONS);
    expect(await tablesIn(schema)).toEqual(['fence', 'fence_operation', 'fence_reset', 'fenced_migration']);
  });

  it('is a no-op when run again', async () => {
    const schema = freshSchema();
    const db = database();
    await migrate(db, { schema });
    const { rows: before } = await admin.query(
      `select name, timestamp from "${schema}".fenced_migration order by name`,
    );
    expect((await migrate(db, { schema })).applied).toEqual([]);
    expect((await new GuardedStore(db, { schema }).migrate()).applied).toEqual([]);
    const { rows: after } = await admin.query(
      `select name, timestamp from "${schema}".fenced_migration order by name`,
    );
    expect(after).toEqual(before);
  });

  it('lets several migrators run at once: each migration is applied exactly once', async () => {
    const schema = freshSchema();
    const reports = await Promise.all(
      Array.from({ length: 4 }, () => database()).flatMap((db) => [
        migrate(db, { schema }),
        migrateExample(db, { schema }),
      ]),
    );
    const applied = reports.flatMap((r) => r.applied).sort();
    expect(applied).toEqual([...STORE_MIGRATIONS, '0001_create_documents_and_accounts'].sort());
    expect(await tablesIn(schema)).toEqual([
      'example_account',
      'example_document',
      'fence',
      'fence_operation',
      'fence_reset',
      'fenced_example_migration',
      'fenced_migration',
    ]);
  });

  it('is not disturbed by other schemas being created and dropped meanwhile', async () => {
    // Kysely's Migrator introspected every table of every schema before taking its lock, and failed with
    // `schema "…" does not exist` (3F000) when another schema was dropped during that look: a migration
    // failing because of an unrelated DROP SCHEMA (seen as a flake when test files dropped their schemas).
    let churning = true;
    const churn = (async () => {
      for (let i = 0; churning; i++) {
        const other = `fenced_mig_churn_${randomBytes(4).toString('hex')}_${i}`;
        // Several tables, so that an introspection finds them and is slow enough to race the drop.
        await admin.query(
          `create schema "${other}"; ${Array.from({ length: 8 }, (_, t) => `create table "${other}".t${t} (id int primary key, v text)`).join('; ')}`,
        );
        await admin.query(`drop schema "${other}" cascade`);
      }
    })();
    try {
      for (let round = 0; round < 6; round++) {
        const schema = freshSchema();
        const reports = await Promise.all(
          Array.from({ length: 4 }, () => database()).map((db) => migrate(db, { schema })),
        );
        expect(reports.flatMap((r) => r.applied).sort()).toEqual(STORE_MIGRATIONS);
        expect(await tablesIn(schema)).toEqual(expect.arrayContaining(['fence', 'fence_operation']));
      }
    } finally {
      churning = false;
      await churn;
    }
  });

  it('carries on in a schema migrated by the Kysely Migrator of earlier versions', async () => {
    const schema = freshSchema();
    await admin.query(`create schema "${schema}";
      create table "${schema}".fenced_migration (name varchar(255) not null primary key, timestamp varchar(255) not null);
      create table "${schema}".fenced_migration_lock (id varchar(255) not null primary key, is_locked integer not null default 0);`);
    const db = database();
    expect((await migrate(db, { schema })).applied).toEqual(STORE_MIGRATIONS);
    expect((await migrate(db, { schema })).applied).toEqual([]);
  });

  it('keeps schemas apart', async () => {
    const one = freshSchema();
    const two = freshSchema();
    const db = database();
    await migrate(db, { schema: one });
    await migrate(db, { schema: two });
    await new GuardedStore(db, { schema: one }).run({ resource: 'r', token: 5n }, () => Promise.resolve());
    expect(await new GuardedStore(db, { schema: one }).fenceOf('r')).toMatchObject({ token: 5n });
    expect(await new GuardedStore(db, { schema: two }).fenceOf('r')).toBeUndefined();
  });

  it('refuses a schema that is not a plain lower-case identifier', async () => {
    await expect(migrate(database(), { schema: 'Bad"Schema' })).rejects.toThrow(/lower-case SQL identifier/);
  });
});
