import type { Kysely } from 'kysely';
import pg from 'pg';
import {
  GuardedStore,
  createDatabase,
  type GuardedStoreOptions,
} from '../../../packages/guarded-store/src/index.js';
import {
  createTestSchema,
  findOrStartPostgres,
  type PostgresServer,
  type TestSchema,
} from '@fenced/test-utils/postgres';

/** A migrated store in a fresh schema of a real Postgres, one per test file. */
export interface StoreFixture<DB> {
  readonly server: PostgresServer;
  readonly schema: TestSchema;
  readonly db: Kysely<DB>;
  readonly store: GuardedStore<DB>;
  /** Plain SQL in the test schema, outside any guard (set-up and checks). */
  sql<R extends pg.QueryResultRow = Record<string, unknown>>(text: string, values?: unknown[]): Promise<R[]>;
  /** Another store over its own pool, sharing the schema (for other connections and other options). */
  anotherStore(options?: GuardedStoreOptions & { maxConnections?: number }): GuardedStore<DB>;
  close(): Promise<void>;
}

export async function createStoreFixture<DB>(
  options: GuardedStoreOptions & { maxConnections?: number } = {},
): Promise<StoreFixture<DB>> {
  const server = await findOrStartPostgres();
  const schema = await createTestSchema(server, 'fenced_gs');
  const databases: Kysely<DB>[] = [];
  const open = (maxConnections = 10) => {
    const db = createDatabase<DB>({
      connectionString: server.url,
      searchPath: schema.schema,
      maxConnections,
    });
    databases.push(db);
    return db;
  };
  const { maxConnections, ...storeOptions } = options;
  const db = open(maxConnections);
  const store = new GuardedStore(db, { ...storeOptions, schema: schema.schema });
  await store.migrate();
  const admin = new pg.Pool({
    connectionString: server.url,
    max: 2,
    options: `-c search_path=${schema.schema}`,
  });
  return {
    server,
    schema,
    db,
    store,
    sql: async <R extends pg.QueryResultRow>(text: string, values: unknown[] = []) =>
      (await admin.query<R>(text, values)).rows,
    anotherStore: (more = {}) => {
      const { maxConnections: max, ...rest } = more;
      return new GuardedStore(open(max), { ...storeOptions, ...rest, schema: schema.schema });
    },
    close: async () => {
      await Promise.all(databases.map((d) => d.destroy()));
      await admin.end();
      await schema.drop();
      await server.stop();
    },
  };
}

/** A fresh resource name per test: isolation without wipes. */
let counter = 0;
export function uniqueResource(prefix = 'r'): string {
  counter += 1;
  return `${prefix}:${counter}:${Math.random().toString(36).slice(2, 8)}`;
}
