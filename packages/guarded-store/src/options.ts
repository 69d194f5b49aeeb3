import type { KeyObject } from 'node:crypto';
import { InvalidRequestError, ed25519PublicKey, validateKeyId } from '@fenced/shared';
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
  /**
   * Verify fencing proofs (DESIGN §4b): the coordinator's Ed25519 public keys by key id (`KeyObject` or PEM
   * `-----BEGIN PUBLIC KEY-----`). With keys set, every fence must carry a proof signed by one of them for exactly
   * its resource, token and lease id, or the write fails with `InvalidProofError` before the fence row is touched
   * — so a client can no longer raise a fence with a token the coordinator never granted. Several keys allow a
   * rotation: add the new key here first, then switch the coordinator, then remove the old one.
   * @defaultValue `undefined` (no verification: any token in range is believed)
   */
  verifyKeys?: Readonly<Record<string, KeyObject | string>>;
  /**
   * How many verified (key id, proof, resource, token, lease) combinations are remembered (least recently used
   * first out), so a holder's repeated writes pay for one signature check. Larger uses more memory (about 0.5 kB
   * each); smaller verifies more often when many leases write at once.
   * @defaultValue `10_000`
   */
  proofCacheSize?: number;
}

export const GUARDED_STORE_DEFAULTS = Object.freeze({
  schema: 'public',
  lockTimeoutMs: 10_000,
  idleInTransactionTimeoutMs: 5_000,
  isolationLevel: 'read committed',
  proofCacheSize: 10_000,
} as const satisfies Required<Omit<GuardedStoreOptions, 'verifyKeys'>>);

export type ResolvedGuardedStoreOptions = Readonly<
  Required<Omit<GuardedStoreOptions, 'verifyKeys'>> & {
    /** The verification keys by id, or `undefined` when the store does not verify proofs. */
    verifyKeys: ReadonlyMap<string, KeyObject> | undefined;
  }
>;

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
    proofCacheSize: z
      .number({ error: 'proofCacheSize must be a number of entries' })
      .int({ error: 'proofCacheSize must be a whole number of entries' })
      .min(0, { error: 'proofCacheSize must be 0 (no cache) or more' })
      .max(10_000_000, { error: 'proofCacheSize must be at most 10000000' }),
    // Checked by verifyKeysOf: zod cannot say what a KeyObject is.
    verifyKeys: z.unknown().optional(),
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
  return Object.freeze({ ...parsed.data, verifyKeys: verifyKeysOf(parsed.data.verifyKeys) });
}

/**
 * The `verifyKeys` option as a frozen map of Ed25519 public keys.
 * @throws InvalidRequestError naming the key id, what was given (its type, never key material) and what is allowed.
 */
function verifyKeysOf(option: unknown): ReadonlyMap<string, KeyObject> | undefined {
  if (option === undefined) return undefined;
  if (typeof option !== 'object' || option === null || Array.isArray(option) || option instanceof Map) {
    throw new InvalidRequestError(
      `verifyKeys must be a plain object { [keyId]: publicKey }, got ${option === null ? 'null' : Array.isArray(option) ? 'an array' : option instanceof Map ? 'a Map' : `a ${typeof option}`}`,
    );
  }
  const entries = Object.entries(option);
  if (entries.length === 0) {
    // An empty set would refuse every write; leaving the option out turns verification off. Neither is what
    // somebody who removed the last key during a rotation meant, so say so.
    throw new InvalidRequestError(
      'verifyKeys must hold at least one key id → public key; leave the option out to turn verification off',
    );
  }
  const keys = new Map<string, KeyObject>();
  for (const [id, key] of entries) {
    validateKeyId(id, 'verifyKeys key id');
    keys.set(id, ed25519PublicKey(key, `verifyKeys.${id}`));
  }
  return keys;
}
