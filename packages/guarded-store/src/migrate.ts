import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { FencedError, InvalidRequestError, assertMatches } from '@fenced/shared';
import { sql, type Kysely } from 'kysely';
import { MigrationError } from './db/postgres-errors.js';
import { DEFAULT_GUARDED_STORE_OPTIONS, SCHEMA_NAME, SCHEMA_NAME_RULE } from './options.js';

/** Folder of the store's append-only migrations: `migrations/NNNN_description.sql` in the package. */
export const STORE_MIGRATIONS_FOLDER = fileURLToPath(new URL('../migrations/', import.meta.url));

const MIGRATION_FILE = /^(\d{4}_[a-z0-9_]+)\.sql$/;

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /**
   * Schema to create the tables in (created if missing), and where the migration bookkeeping lives.
   * @defaultValue 'public'
   */
  schema?: string;
}

/** What a migration run did. */
export interface MigrationReport {
  /** Names of the migrations this call applied, in order; empty when the schema was already up to date. */
  readonly applied: readonly string[];
}

/** Where a set of SQL migrations comes from and where its bookkeeping goes. */
export interface SqlMigrationSet {
  /** Folder of `NNNN_description.sql` files (its subfolders are not read). */
  readonly folder: string;
  /** Schema the files run in (their `search_path`) and where the bookkeeping table lives. */
  readonly schema: string;
  /**
   * Table recording the applied migrations (`name`, `timestamp`: the layout of Kysely's migration table, so a
   * schema migrated by an earlier version carries on). Distinct per set, so sets evolve independently.
   */
  readonly migrationTableName: string;
}

/**
 * Brings the store's tables (`fence`, `fence_operation`) in `schema` up to date. Safe to call from several
 * processes at once, and a no-op when nothing is pending.
 * @throws MigrationError with the failing statement's error as `cause`; nothing of the run was applied.
 */
export async function migrate<DB>(db: Kysely<DB>, options: MigrateOptions = {}): Promise<MigrationReport> {
  return runSqlMigrations(db, {
    folder: STORE_MIGRATIONS_FOLDER,
    schema: options.schema ?? DEFAULT_GUARDED_STORE_OPTIONS.schema,
    migrationTableName: 'fenced_migration',
  });
}

/**
 * Runs one {@link SqlMigrationSet}: on one connection holding a session advisory lock keyed by the schema, it
 * creates the schema and the bookkeeping table if missing, then applies every pending file in one transaction
 * (all of them or none), each with `search_path` set to the schema.
 *
 * Why not Kysely's `Migrator`: before it takes its own lock it looks for its tables by introspecting every
 * table of every schema in the database, and fails (`schema "…" does not exist`, 3F000) when any other schema
 * is dropped during that look — a deploy's migration failing because of an unrelated `DROP SCHEMA`. Every
 * statement here names the target schema and nothing else, and the advisory lock covers the whole run, so
 * concurrent migrators of a schema queue and the later ones find nothing pending.
 */
export async function runSqlMigrations<DB>(db: Kysely<DB>, set: SqlMigrationSet): Promise<MigrationReport> {
  const schema = assertMatches('schema', set.schema, SCHEMA_NAME, SCHEMA_NAME_RULE);
  const tableName = assertMatches(
    'migrationTableName',
    set.migrationTableName,
    SCHEMA_NAME,
    SCHEMA_NAME_RULE,
  );
  const migrations = await readSqlMigrations(set.folder);
  const table = sql.id(schema, tableName);
  // Per schema, not per set: every set starts with `create schema if not exists`, which is not safe to run
  // concurrently either (it can fail on pg_namespace's unique index).
  const lockKey = `fenced/migrate/${schema}`;
  return db.connection().execute(async (connection) => {
    await sql`select pg_advisory_lock(hashtextextended(${lockKey}, 0))`.execute(connection);
    try {
      await sql`create schema if not exists ${sql.id(schema)}`.execute(connection);
      await sql`create table if not exists ${table} (
        name varchar(255) not null primary key,
        timestamp varchar(255) not null
      )`.execute(connection);
      const applied = await connection.transaction().execute(async (trx) => {
        const { rows } = await sql<{ name: string }>`select name from ${table} order by name`.execute(trx);
        const pending = pendingMigrations(
          migrations,
          rows.map((row) => row.name),
          schema,
        );
        for (const migration of pending) {
          // Local to this transaction: it ends with it.
          await sql`select set_config('search_path', quote_ident(${schema}), true)`.execute(trx);
          try {
            // No parameters: pg sends this as a simple query, so a file may hold several statements.
            await sql.raw(migration.text).execute(trx);
          } catch (error) {
            throw new MigrationError(
              `migration ${migration.name} failed in schema ${schema}; nothing of this run was applied`,
              { cause: error },
            );
          }
          await sql`insert into ${table} (name, timestamp) values (${migration.name}, ${new Date().toISOString()})`.execute(
            trx,
          );
        }
        return pending.map((migration) => migration.name);
      });
      return Object.freeze({ applied: Object.freeze(applied) });
    } catch (error) {
      if (error instanceof FencedError) throw error;
      throw new MigrationError(`migrations in schema ${schema} failed`, { cause: error });
    } finally {
      // A failed unlock (dead connection) needs no handling: the session's locks die with it.
      await sql`select pg_advisory_unlock(hashtextextended(${lockKey}, 0))`
        .execute(connection)
        .catch(() => undefined);
    }
  });
}

interface SqlMigration {
  readonly name: string;
  readonly text: string;
}

/** The `NNNN_description.sql` files of `folder`, in name order. Other `.sql` names are refused. */
async function readSqlMigrations(folder: string): Promise<SqlMigration[]> {
  const names = (await readdir(folder, { withFileTypes: true }))
    .filter((entry) => entry.isFile())
    .map((entry) => entry.name)
    .sort();
  const migrations: SqlMigration[] = [];
  for (const file of names) {
    const match = MIGRATION_FILE.exec(file);
    if (!match) {
      if (file.endsWith('.sql')) {
        throw new InvalidRequestError(`migration file ${file} must be named NNNN_description.sql`);
      }
      continue;
    }
    migrations.push({ name: match[1]!, text: await readFile(`${folder}/${file}`, 'utf8') });
  }
  return migrations;
}

/**
 * The migrations not applied yet. Migrations are append-only: an applied one whose file is gone, or a new file
 * sorting before the last applied one, means the folder and the schema disagree, and nothing is run.
 */
function pendingMigrations(
  migrations: readonly SqlMigration[],
  appliedNames: readonly string[],
  schema: string,
): SqlMigration[] {
  const known = new Set(migrations.map((migration) => migration.name));
  const missing = appliedNames.find((name) => !known.has(name));
  if (missing !== undefined) {
    throw new MigrationError(
      `migration ${missing} was applied in schema ${schema} but its file is missing (migrations are append-only)`,
      { cause: undefined },
    );
  }
  const applied = new Set(appliedNames);
  const last = appliedNames[appliedNames.length - 1];
  const pending = migrations.filter((migration) => !applied.has(migration.name));
  const early = pending.find((migration) => last !== undefined && migration.name < last);
  if (early !== undefined) {
    throw new MigrationError(
      `migration ${early.name} sorts before ${last ?? ''}, which schema ${schema} already applied: new migrations must come last`,
      { cause: undefined },
    );
  }
  return pending;
}
