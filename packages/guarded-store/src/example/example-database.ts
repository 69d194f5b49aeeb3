import type { ColumnType, Generated } from 'kysely';
import { fileURLToPath } from 'node:url';
import type { Kysely } from 'kysely';
import { runSqlMigrations, type MigrationReport } from '../migrate.js';

/** int8 columns: `bigint` in JS when read through `createDatabase`; written as bigint or decimal string. */
type Int8 = ColumnType<bigint, bigint | string, bigint | string>;

export interface ExampleDocumentTable {
  id: string;
  content: string;
  version: Int8;
  token: Int8;
  updated_at: Generated<Date>;
}

export interface ExampleAccountTable {
  id: string;
  balance: Int8;
  deposits: Int8;
  token: Int8;
  updated_at: Generated<Date>;
}

/** The example service's tables (migrations/example). */
export interface ExampleDatabase {
  example_document: ExampleDocumentTable;
  example_account: ExampleAccountTable;
}

const EXAMPLE_MIGRATIONS_FOLDER = fileURLToPath(new URL('../../migrations/example/', import.meta.url));

/**
 * Creates the example's tables in `schema`, with their own migration table so they evolve apart from the
 * store's. Safe to run concurrently.
 */
export function migrateExample<DB>(db: Kysely<DB>, options: { schema: string }): Promise<MigrationReport> {
  return runSqlMigrations(db, {
    folder: EXAMPLE_MIGRATIONS_FOLDER,
    schema: options.schema,
    migrationTableName: 'fenced_example_migration',
  });
}
