import { assertInteger, assertMatches, assertOneOf, mergeOptions } from '@fenced/shared';

/** Isolation level of guarded transactions. The guard itself is correct under each of them (see run()). */
export type GuardIsolationLevel = 'read committed' | 'repeatable read' | 'serializable';

/** Options of {@link GuardedStore}. */
export interface GuardedStoreOptions {
  /**
   * Schema of the store's own tables: `fence`, `fence_operation` and the migration bookkeeping
   * (`fenced_migration`). A lower-case SQL identifier.
   * @defaultValue 'public'
   */
  schema?: string;
  /**
   * `lock_timeout` of a guarded transaction: how long any lock wait in it, the fence row first, may last before
   * it fails with {@link LockTimeoutError}. Trade-off: a successor waits behind a stalled holder for at most
   * this long; keep it above `idleInTransactionTimeoutMs` so the stalled holder is cut off first. 0 waits forever.
   * @defaultValue 10_000
   */
  lockTimeoutMs?: number;
  /**
   * `idle_in_transaction_session_timeout` of a guarded transaction: Postgres ends the session of a transaction
   * that sits idle (a paused process, a slow call to another service inside the callback) for this long, which
   * rolls it back and frees the fence row for the next holder. Trade-off: a callback must not wait this long
   * between two statements. 0 never ends it.
   * @defaultValue 5_000
   */
  idleInTransactionTimeoutMs?: number;
  /**
   * Isolation level of guarded transactions. READ COMMITTED is enough for G1–G4: the fence row lock orders
   * the guarded transactions of a resource. Stricter levels turn a fence race into a retryable
   * {@link SerializationFailureError} instead of a re-check.
   * @defaultValue 'read committed'
   */
  isolationLevel?: GuardIsolationLevel;
}

/** Defaults of {@link GuardedStoreOptions}. */
export const DEFAULT_GUARDED_STORE_OPTIONS = Object.freeze({
  schema: 'public',
  lockTimeoutMs: 10_000,
  idleInTransactionTimeoutMs: 5_000,
  isolationLevel: 'read committed',
} as const satisfies Required<GuardedStoreOptions>);

/** The options a store runs with: every option, defaults filled in, validated and frozen. */
export type ResolvedGuardedStoreOptions = Readonly<Required<GuardedStoreOptions>>;

/** Lower-case unquoted SQL identifier: safe in a libpq `options` string and never needs quoting to match. */
export const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** Postgres keeps timeouts in a signed 32-bit count of milliseconds. */
const MAX_TIMEOUT_MS = 2_147_483_647;

/** What {@link SCHEMA_NAME} allows, in words. */
export const SCHEMA_NAME_RULE = 'a lower-case SQL identifier ([a-z_][a-z0-9_]*, at most 63 bytes)';

const ISOLATION_LEVELS = ['read committed', 'repeatable read', 'serializable'] as const;

/**
 * Merges `options` over {@link DEFAULT_GUARDED_STORE_OPTIONS}, validates and freezes the result.
 * @throws InvalidRequestError naming the first bad option, what it allows and the value given.
 */
export function resolveGuardedStoreOptions(options: GuardedStoreOptions = {}): ResolvedGuardedStoreOptions {
  const merged = mergeOptions('guarded store', DEFAULT_GUARDED_STORE_OPTIONS, options);
  const timeout = { min: 0, max: MAX_TIMEOUT_MS };
  return Object.freeze({
    schema: assertMatches('schema', merged.schema, SCHEMA_NAME, SCHEMA_NAME_RULE),
    lockTimeoutMs: assertInteger('lockTimeoutMs', merged.lockTimeoutMs, timeout),
    idleInTransactionTimeoutMs: assertInteger(
      'idleInTransactionTimeoutMs',
      merged.idleInTransactionTimeoutMs,
      timeout,
    ),
    isolationLevel: assertOneOf('isolationLevel', merged.isolationLevel, ISOLATION_LEVELS),
  });
}
