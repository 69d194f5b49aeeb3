import type { KeyObject } from 'node:crypto';
import {
  assertInteger,
  assertMatches,
  assertOneOf,
  ed25519PublicKey,
  InvalidRequestError,
  mergeOptions,
  validateKeyId,
} from '@fenced/shared';

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
   * it fails with {@link @fenced/guarded-store!index.LockTimeoutError | LockTimeoutError}. Trade-off: a successor waits behind a stalled holder for at most
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
   * {@link @fenced/guarded-store!index.SerializationFailureError | SerializationFailureError} instead of a re-check.
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

/** Defaults of {@link GuardedStoreOptions}. */
export const DEFAULT_GUARDED_STORE_OPTIONS = Object.freeze({
  schema: 'public',
  lockTimeoutMs: 10_000,
  idleInTransactionTimeoutMs: 5_000,
  isolationLevel: 'read committed',
  proofCacheSize: 10_000,
} as const satisfies Required<Omit<GuardedStoreOptions, 'verifyKeys'>>);

/** The options a store runs with: every option, defaults filled in, validated and frozen; `verifyKeys` as a map. */
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

/** What {@link SCHEMA_NAME} allows, in words. */
export const SCHEMA_NAME_RULE = 'a lower-case SQL identifier ([a-z_][a-z0-9_]*, at most 63 bytes)';

const ISOLATION_LEVELS = ['read committed', 'repeatable read', 'serializable'] as const;

/**
 * Merges `options` over {@link DEFAULT_GUARDED_STORE_OPTIONS}, validates and freezes the result.
 * @throws InvalidRequestError naming the first bad option, what it allows and the value given.
 */
export function resolveGuardedStoreOptions(options: GuardedStoreOptions = {}): ResolvedGuardedStoreOptions {
  const merged = mergeOptions('guarded store', DEFAULT_GUARDED_STORE_OPTIONS, options, ['verifyKeys']);
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
    proofCacheSize: assertInteger('proofCacheSize', merged.proofCacheSize, { min: 0, max: 10_000_000 }),
    verifyKeys: verifyKeysOf(merged.verifyKeys),
  });
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
