import { InvalidRequestError } from '@fenced/shared';
import { z } from 'zod';

/** Isolation level of guarded transactions. The guard itself is correct under each of them (see run()). */
export type GuardIsolationLevel = 'read committed' | 'repeatable read' | 'serializable';

/** Options of {@link GuardedStore}. */
export interface GuardedStoreOptions {
  /**
   * Schema of the store's own tables: `fence`, `fence_operation` and the migration bookkeeping
   * (`fenced_migration`, `fenced_migration_lock`). A lower-case SQL identifier.
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

export const GUARDED_STORE_DEFAULTS = Object.freeze({
  schema: 'public',
  lockTimeoutMs: 10_000,
  idleInTransactionTimeoutMs: 5_000,
  isolationLevel: 'read committed',
} as const satisfies Required<GuardedStoreOptions>);

export type ResolvedGuardedStoreOptions = Readonly<Required<GuardedStoreOptions>>;

/** Lower-case unquoted SQL identifier: safe in a libpq `options` string and never needs quoting to match. */
export const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** Postgres keeps timeouts in a signed 32-bit count of milliseconds. */
const MAX_TIMEOUT_MS = 2_147_483_647;

const timeoutMs = (name: string) =>
  z
    .number({ error: `${name} must be a number of milliseconds` })
    .int({ error: `${name} must be a whole number of milliseconds` })
    .min(0, { error: `${name} must be 0 (off) or more` })
    .max(MAX_TIMEOUT_MS, { error: `${name} must be at most ${MAX_TIMEOUT_MS}` });

const optionsSchema = z.strictObject(
  {
    schema: z.string({ error: 'schema must be a string' }).regex(SCHEMA_NAME, {
      error: 'schema must be a lower-case SQL identifier ([a-z_][a-z0-9_]*, ≤ 63 bytes)',
    }),
    lockTimeoutMs: timeoutMs('lockTimeoutMs'),
    idleInTransactionTimeoutMs: timeoutMs('idleInTransactionTimeoutMs'),
    isolationLevel: z.enum(['read committed', 'repeatable read', 'serializable'], {
      error: "isolationLevel must be 'read committed', 'repeatable read' or 'serializable'",
    }),
  },
  {
    error: (issue) =>
      issue.code === 'unrecognized_keys' ? `unknown option ${issue.keys.join(', ')}` : undefined,
  },
);

/**
 * Merges `options` over {@link GUARDED_STORE_DEFAULTS}, validates and freezes the result.
 * @throws InvalidRequestError naming the first bad option.
 */
export function resolveGuardedStoreOptions(options: GuardedStoreOptions = {}): ResolvedGuardedStoreOptions {
  const defined = Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
  const parsed = optionsSchema.safeParse({ ...GUARDED_STORE_DEFAULTS, ...defined });
  if (!parsed.success) {
    throw new InvalidRequestError(parsed.error.issues[0]?.message ?? 'invalid guarded store options');
  }
  return Object.freeze(parsed.data);
}
