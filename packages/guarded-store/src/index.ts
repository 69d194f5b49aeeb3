export { GuardedStore } from './guarded-store.js';
export type {
  RunOptions,
  FenceState,
  GuardedCallback,
  ResetFenceOptions,
  FenceReset,
} from './guarded-store.js';
export type { Fence, FenceLike, FenceTarget } from './fence.js';
export type { JsonValue, JsonCompatible } from './json.js';
export { DEFAULT_GUARDED_STORE_OPTIONS, resolveGuardedStoreOptions } from './options.js';
export type { GuardedStoreOptions, GuardIsolationLevel, ResolvedGuardedStoreOptions } from './options.js';
export { createDatabase, DEFAULT_DATABASE_OPTIONS } from './db/create-database.js';
export type { DatabaseOptions } from './db/create-database.js';
export {
  SqlState,
  StorageError,
  LockTimeoutError,
  SerializationFailureError,
  DeadlockDetectedError,
  QueryCanceledError,
  IdleInTransactionTimeoutError,
  ConnectionLostError,
  ReadOnlyTransactionError,
  TransactionAbortedError,
  MigrationMissingError,
  MigrationError,
  classifyPostgresError,
  isTransientStorageError,
} from './db/postgres-errors.js';
export { migrate, runSqlMigrations, STORE_MIGRATIONS_FOLDER } from './migrate.js';
export type { MigrateOptions, MigrationReport, SqlMigrationSet } from './migrate.js';
export { STALE_TOKEN_SQLSTATE, SqlFence, staleTokenErrorOf } from './sql-fence.js';
export type { SqlFenceOptions, FenceQuery, FenceOutcome, FenceRow } from './sql-fence.js';
export type { NormalizedFence } from './fence.js';
export { leaseIdHash } from './fence.js';
// The express middleware, also at '@fenced/guarded-store/express' (its home). Its types are structural: nothing
// here needs express or @types/express installed.
export { fencedWrites, guardedWrite } from './middleware/fenced-writes.js';
export type { FencedWritesOptions, GuardedWrite } from './middleware/fenced-writes.js';
export { fencedErrorHandler } from './middleware/fenced-error-handler.js';
export type { FencedErrorHandlerOptions } from './middleware/fenced-error-handler.js';
