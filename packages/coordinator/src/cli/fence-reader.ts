/** The guard's fence of a resource (DESIGN §4), as `inspect --database-url` reports it. */
export type FenceReading =
  | {
      readonly checked: true;
      readonly schema: string;
      readonly fence: { token: bigint; updatedAt: Date } | null;
    }
  | { readonly checked: false; readonly reason: string };

/** The slice of `@fenced/guarded-store` the fence read needs; the package is imported only when asked for. */
export interface GuardedStoreModule {
  createDatabase(options: { connectionString: string; maxConnections?: number; applicationName?: string }): {
    destroy(): Promise<void>;
  };
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
 * @throws the store's typed errors (e.g. MigrationMissingError when the schema has no fence table) or pg's
 */
export async function readFence(
  databaseUrl: string,
  schema: string,
  resource: string,
  load: () => Promise<GuardedStoreModule | undefined> = importGuardedStore,
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
    const fence = await new store.GuardedStore(db, { schema }).fenceOf(resource);
    return {
      checked: true,
      schema,
      fence: fence === undefined ? null : { token: fence.token, updatedAt: fence.updatedAt },
    };
  } finally {
    await db.destroy();
  }
}
