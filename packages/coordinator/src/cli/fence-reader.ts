/** A fence found in a schema other than the one asked (`inspect` without `--schema`). */
export interface FenceElsewhere {
  readonly schema: string;
  readonly token: bigint;
  readonly updatedAt: Date;
}

/** The guard's fence of a resource (DESIGN §4), as `inspect --database-url` reports it. */
export type FenceReading =
  | {
      readonly checked: true;
      readonly schema: string;
      /** `null`: no fence in `schema` (or `schema` has no fence table: `migrated` false). */
      readonly fence: { token: bigint; updatedAt: Date } | null;
      /** False when `schema` has no store's tables. @defaultValue true */
      readonly migrated?: boolean;
      /** When no schema was named and `schema` has no fence: the fences of the resource in other schemas. */
      readonly elsewhere?: readonly FenceElsewhere[];
    }
  | { readonly checked: false; readonly reason: string };

/** The slice of Kysely that lists the schemas holding a table named `fence`. */
interface SchemaLister {
  selectFrom(table: 'information_schema.tables'): {
    select(column: 'table_schema'): {
      where(
        column: 'table_name',
        op: '=',
        value: string,
      ): { execute(): Promise<Array<{ table_schema: string }>> };
    };
  };
}

/** The slice of `@fenced/guarded-store` the fence read needs; the package is imported only when asked for. */
export interface GuardedStoreModule {
  createDatabase(options: {
    connectionString: string;
    maxConnections?: number;
    applicationName?: string;
  }): SchemaLister & { destroy(): Promise<void> };
  GuardedStore: new (
    db: unknown,
    options: { schema: string },
  ) => { fenceOf(resource: string): Promise<{ token: bigint; updatedAt: Date } | undefined> };
}

/** The package name, in a variable so that TypeScript does not make the coordinator depend on it. */
const GUARDED_STORE = '@fenced/guarded-store';

/**
 * Loads `@fenced/guarded-store` (or `specifier`) when it is installed; `undefined` when it is not.
 * @throws Error when it is installed but lacks `createDatabase`/`GuardedStore`, or fails to load
 */
export async function importGuardedStore(
  specifier: string = GUARDED_STORE,
): Promise<GuardedStoreModule | undefined> {
  let loaded: unknown;
  try {
    loaded = await import(specifier);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') return undefined;
    throw error;
  }
  const module = loaded as Partial<GuardedStoreModule>;
  if (typeof module.createDatabase !== 'function' || typeof module.GuardedStore !== 'function') {
    throw new Error(`${specifier} is installed but has no createDatabase/GuardedStore: a version too old`);
  }
  return module as GuardedStoreModule;
}

/**
 * The fence of `resource` in the store's `schema`, read through `@fenced/guarded-store` (`fenceOf`: the highest
 * committed token and when it was raised). The coordinator does not depend on that package (nor on pg): when it
 * is not installed, the result says so and nothing is read.
 *
 * With `searchOtherSchemas` (no `--schema` given), a schema without a fence for the resource is not the last
 * word: every other schema holding a `fence` table is read too, and what they hold is reported beside it.
 * @throws the store's typed errors (e.g. MigrationMissingError when the named schema has no fence table) or pg's
 */
export async function readFence(
  databaseUrl: string,
  schema: string,
  resource: string,
  load: () => Promise<GuardedStoreModule | undefined> = importGuardedStore,
  searchOtherSchemas = false,
): Promise<FenceReading> {
  const store = await load();
  if (store === undefined) {
    return {
      checked: false,
      reason: `${GUARDED_STORE} is not installed next to @fenced/coordinator (npm install ${GUARDED_STORE}), so the fence was not checked`,
    };
  }
  const db = store.createDatabase({
    connectionString: databaseUrl,
    maxConnections: 1,
    applicationName: 'fenced-coordinator inspect',
  });
  try {
    const read = (name: string) => new store.GuardedStore(db, { schema: name }).fenceOf(resource);
    let fence: Awaited<ReturnType<typeof read>>;
    let migrated = true;
    try {
      fence = await read(schema);
    } catch (error) {
      // The default schema without the store's tables: the fence may live in another one.
      if (!searchOtherSchemas || (error as { code?: unknown }).code !== 'MIGRATION_MISSING') throw error;
      fence = undefined;
      migrated = false;
    }
    if (fence !== undefined || !searchOtherSchemas) {
      return {
        checked: true,
        schema,
        fence: fence === undefined ? null : { token: fence.token, updatedAt: fence.updatedAt },
      };
    }
    const schemas = await db
      .selectFrom('information_schema.tables')
      .select('table_schema')
      .where('table_name', '=', 'fence')
      .execute();
    const elsewhere: FenceElsewhere[] = [];
    for (const { table_schema: other } of schemas) {
      if (other === schema) continue;
      const found = await read(other).catch(() => undefined); // a table named fence that is not the store's
      if (found !== undefined)
        elsewhere.push({ schema: other, token: found.token, updatedAt: found.updatedAt });
    }
    return { checked: true, schema, fence: null, migrated, elsewhere };
  } finally {
    await db.destroy();
  }
}
