import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { InvalidRequestError } from '@fenced/shared';
import { Migrator, sql, type Kysely, type Migration, type MigrationProvider } from 'kysely';
import { MigrationError } from './db/postgres-errors.js';
import { DEFAULT_GUARDED_STORE_OPTIONS, SCHEMA_NAME } from './options.js';

/** Folder of the store's append-only migrations: `migrations/NNNN_description.sql` in the package. */
export const STORE_MIGRATIONS_FOLDER = fileURLToPath(new URL('../migrations/', import.meta.url));

const MIGRATION_FILE = /^(\d{4}_[a-z0-9_]+)\.sql$/;

/**
 * Reads `NNNN_description.sql` files from one folder (not its subfolders). Each file runs with `search_path`
 * set to the target schema, inside the migrator's transaction, so the files use unqualified names and the
 * caller chooses the schema.
 */
export class SqlFileMigrationProvider implements MigrationProvider {
  constructor(
    private readonly folder: string,
    private readonly schema: string,
  ) {}

  async getMigrations(): Promise<Record<string, Migration>> {
    const migrations: Record<string, Migration> = {};
    const names = (await readdir(this.folder, { withFileTypes: true }))
      .filter((entry) => entry.isFile())
      .map((entry) => entry.name);
    for (const file of names.sort()) {
      const match = MIGRATION_FILE.exec(file);
      if (!match) {
        if (file.endsWith('.sql')) {
          throw new InvalidRequestError(`migration file ${file} must be named NNNN_description.sql`);
        }
        continue;
      }
      const text = await readFile(`${this.folder}/${file}`, 'utf8');
      const schema = this.schema;
      migrations[match[1]!] = {
        up: async (db) => {
          // Local to the migrator's transaction: it ends with it.
          await sql`select set_config('search_path', quote_ident(${schema}), true)`.execute(db);
          // No parameters: pg sends this as a simple query, so a file may hold several statements.
          await sql.raw(text).execute(db);
        },
      };
    }
    return migrations;
  }
}

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
  readonly folder: string;
  readonly schema: string;
  /** Kysely's migration table; distinct per set so sets evolve independently. */
  readonly migrationTableName: string;
  readonly migrationLockTableName: string;
}

/**
 * Brings the store's tables (`fence`, `fence_operation`) in `schema` up to date. Safe to call from several
 * processes at once, and a no-op when nothing is pending.
 * @throws MigrationError with the migrator's error as `cause`.
 */
export async function migrate<DB>(db: Kysely<DB>, options: MigrateOptions = {}): Promise<MigrationReport> {
  const schema = options.schema ?? DEFAULT_GUARDED_STORE_OPTIONS.schema;
  return runSqlMigrations(db, {
    folder: STORE_MIGRATIONS_FOLDER,
    schema,
    migrationTableName: 'fenced_migration',
    migrationLockTableName: 'fenced_migration_lock',
  });
}

/**
 * Runs one {@link SqlMigrationSet} with Kysely's Migrator, on one connection holding a session advisory lock
 * keyed by the schema for the whole run.
 *
 * Why our own lock when Kysely's Migrator locks too: Kysely's Postgres lock (one fixed advisory key) covers only
 * the "run pending migrations" step; before it, every migrator creates the schema, the migration tables and the
 * lock row unlocked, relying on catching "already exists" errors and looking again. Holding our lock from
 * before the first of those steps makes concurrent migrators simply queue: the first applies, the others find
 * nothing pending.
 */
export async function runSqlMigrations<DB>(db: Kysely<DB>, set: SqlMigrationSet): Promise<MigrationReport> {
  if (!SCHEMA_NAME.test(set.schema)) {
    throw new InvalidRequestError(
      'schema must be a lower-case SQL identifier ([a-z_][a-z0-9_]*, ≤ 63 bytes)',
    );
  }
  // Per schema, not per set: every set starts with `create schema if not exists`, which is not safe to run
  // concurrently either (it can fail on pg_namespace's unique index).
  const lockKey = `fenced/migrate/${set.schema}`;
  return db.connection().execute(async (connection) => {
    await sql`select pg_advisory_lock(hashtextextended(${lockKey}, 0))`.execute(connection);
    try {
      await sql`create schema if not exists ${sql.id(set.schema)}`.execute(connection);
      const migrator = new Migrator({
        db: connection,
        provider: new SqlFileMigrationProvider(set.folder, set.schema),
        migrationTableSchema: set.schema,
        migrationTableName: set.migrationTableName,
        migrationLockTableName: set.migrationLockTableName,
      });
      const { error, results = [] } = await migrator.migrateToLatest();
      if (error !== undefined) {
        const failed = results.find((result) => result.status === 'Error')?.migrationName;
        throw new MigrationError(
          failed === undefined
            ? `migrations in schema ${set.schema} failed`
            : `migration ${failed} failed in schema ${set.schema}; nothing of this run was applied`,
          { cause: error },
        );
      }
      return Object.freeze({
        applied: Object.freeze(results.filter((r) => r.status === 'Success').map((r) => r.migrationName)),
      });
    } finally {
      // A failed unlock (dead connection) needs no handling: the session's locks die with it.
      await sql`select pg_advisory_unlock(hashtextextended(${lockKey}, 0))`
        .execute(connection)
        .catch(() => undefined);
    }
  });
}
