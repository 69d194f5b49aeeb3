// The fence as one SQL statement over the guard's SQL functions (migrations/0005_create_fence_function.sql; its
// step fence_raise as replaced by 0006_fence_equal_token_locks.sql), for transactions the store does not run: a
// Kysely the store did not create, node-postgres, Drizzle, Prisma. The rules live in the SQL function; this file
// only builds the call (validated arguments, proofs checked first, the transaction's settings) and turns its
// errors back into the library's (`StaleTokenError`, `StorageError` subclasses). No driver is imported here:
// every adapter hands over its own way to run one statement.
import { FencedError, StaleTokenError, formatToken } from '@fenced/shared';
import { classifyPostgresError } from './db/postgres-errors.js';
import { normalizeFences, validateOpId, type FenceTarget, type NormalizedFence } from './fence.js';
import type { JsonValue } from './json.js';
import { resolveGuardedStoreOptions, type GuardIsolationLevel, type GuardedStoreOptions } from './options.js';
import { ProofVerifier } from './proof-verifier.js';

/** The SQLSTATE the guard's `fence(…)` raises for a stale token (class FN: fenced). */
export const STALE_TOKEN_SQLSTATE = 'FN001';

/**
 * Options of the SQL-function fence (the adapters' options): the store's. `isolationLevel` applies to the
 * transactions an adapter's `run` begins; a transaction you begin yourself keeps its own.
 */
export type SqlFenceOptions = GuardedStoreOptions;

/** One statement with positional parameters (`$1` …), as node-postgres and Prisma's `$queryRawUnsafe` take it. */
export interface FenceQuery {
  readonly text: string;
  readonly values: readonly (string | null)[];
}

/** What the fence statement answered: with an operation id, whether it committed before, and its result. */
export interface FenceOutcome {
  /** An operation with this id already committed on the resource: write nothing, return `result`. */
  readonly replayed: boolean;
  /** The replayed operation's result (parsed JSON), `undefined` when it recorded none or nothing was replayed. */
  readonly result: JsonValue | undefined;
}

/** The row the fence statement returns. */
export interface FenceRow {
  /** Whether an operation with the statement's id had committed (false without an operation id). */
  replayed: boolean | null;
  /** Its recorded result, JSON text (null when none). */
  result: string | null;
}

/** What the error mapping reads of a fence: whether it named a lease. */
interface FenceLike {
  readonly resource: string;
  readonly leaseIdHash: unknown;
}

/**
 * Builds the guard's fence call for one transaction and maps its errors. One per process and configuration
 * (it holds the proof cache), shared by every transaction.
 */
export class SqlFence {
  readonly schema: string;
  /** The isolation level of the transactions an adapter begins itself (`run`). */
  readonly isolationLevel: GuardIsolationLevel;
  readonly #settings: readonly [lockTimeout: string, idleTimeout: string];
  readonly #verifier: ProofVerifier | undefined;
  readonly #function: string;
  readonly #record: string;

  constructor(options: SqlFenceOptions = {}) {
    const resolved = resolveGuardedStoreOptions(options);
    this.schema = resolved.schema;
    this.#settings = [String(resolved.lockTimeoutMs), String(resolved.idleInTransactionTimeoutMs)];
    const keys = resolved.verifyKeys;
    this.#verifier = keys === undefined ? undefined : new ProofVerifier(keys, resolved.proofCacheSize);
    // The schema is a lower-case identifier (validated): it needs no quoting, and is quoted anyway.
    this.#function = `"${resolved.schema}".fence_each`;
    this.#record = `"${resolved.schema}".record_operation_all`;
    this.isolationLevel = resolved.isolationLevel;
  }

  /** Whether proofs are checked before the call (`verifyKeys` set). */
  get verifiesProofs(): boolean {
    return this.#verifier !== undefined;
  }

  /**
   * Validates `target`, checks its proofs (with `verifyKeys`), and returns the statement that fences the
   * transaction it runs in, and the fences (sorted, as the function locks them).
   * @throws InvalidRequestError for a bad resource, token, lease id or op id (nothing to send).
   * @throws InvalidProofError (verification on) for a missing or invalid proof (nothing to send).
   */
  query(
    target: FenceTarget | readonly FenceTarget[],
    opId?: string,
  ): { query: FenceQuery; fences: NormalizedFence[] } {
    const fences = normalizeFences(target);
    const op = opId === undefined ? undefined : validateOpId(opId);
    if (this.#verifier !== undefined) for (const f of fences) this.#verifier.verify(f);
    return { query: this.queryOf(fences, op), fences };
  }

  /** The statement for fences already validated and verified (the store's own path). */
  queryOf(fences: readonly NormalizedFence[], opId: string | undefined): FenceQuery {
    // Arrays travel as JSON text: every driver sends a string, whatever it makes of arrays.
    const values: (string | null)[] = [
      this.#settings[0],
      this.#settings[1],
      JSON.stringify(fences.map((f) => f.resource)),
      JSON.stringify(fences.map((f) => formatToken(f.token))),
      JSON.stringify(fences.map((f) => (f.leaseIdHash === null ? null : f.leaseIdHash.toString('hex')))),
    ];
    // The settings first, in a materialized CTE whose columns the call reads, so they apply before the fence
    // waits for any lock; lock_timeout then bounds that wait.
    const settings = `with s as materialized (
  select set_config('lock_timeout', $1::text, true) as lock_timeout,
         set_config('idle_in_transaction_session_timeout', $2::text, true) as idle_timeout,
         set_config('synchronous_commit', 'on', true) as synchronous_commit,
         array(select json_array_elements_text($3::json)) as resources,
         array(select json_array_elements_text($4::json))::bigint[] as tokens,
         array(select json_array_elements_text($5::json)) as lease_hashes
)`;
    values.push(opId ?? null);
    return {
      text: `${settings}
select f.replayed, f.result::text as result
  from s cross join lateral ${this.#function}(s.resources, s.tokens, s.lease_hashes, $6::text) as f`,
      values,
    };
  }

  /**
   * The statement recording an operation's result (G5) for every fence, in the fenced transaction before its
   * COMMIT: the guard's `record_operation_all(…)`. `value` must be JSON (`undefined`: no result).
   */
  recordQuery(fences: readonly NormalizedFence[], opId: string, value: unknown): FenceQuery {
    return {
      text: `select ${this.#record}(array(select json_array_elements_text($1::json)),
  array(select json_array_elements_text($2::json))::bigint[], $3::text, $4::json)::text as recorded`,
      values: [
        JSON.stringify(fences.map((f) => f.resource)),
        JSON.stringify(fences.map((f) => formatToken(f.token))),
        opId,
        value === undefined ? null : JSON.stringify(value),
      ],
    };
  }

  /** The outcome of the fence statement from its rows. */
  outcome(rows: readonly FenceRow[], opId: string | undefined): FenceOutcome {
    const row = rows[0];
    if (opId === undefined || row === undefined || row.replayed !== true) {
      return { replayed: false, result: undefined };
    }
    return {
      replayed: true,
      result: row.result === null ? undefined : (JSON.parse(row.result) as JsonValue),
    };
  }

  /**
   * The library's error for a driver error of the fence statement (or of the transaction around it):
   * `StaleTokenError` for the function's FN001, a `StorageError` subclass for classified Postgres failures
   * (lock timeout, lost connection …), else `error` itself. Looks through `cause` chains (ORMs wrap driver
   * errors).
   */
  mapError(error: unknown, fences?: readonly NormalizedFence[], duringCommit = false): unknown {
    const stale = staleTokenErrorFor(error, fences);
    if (stale !== undefined) return stale;
    for (const e of causes(error)) {
      if (e instanceof FencedError) return e;
      const classified = classifyPostgresError(e, duringCommit);
      if (classified !== undefined) return classified;
    }
    return error;
  }
}

/** What FN001's DETAIL carries. */
interface StaleDetail {
  resource: string;
  presented: string;
  current: string;
  named_lease: boolean;
}

/**
 * `StaleTokenError` for an FN001 from the guard's fence function, found in `error` or its `cause` chain
 * (ORMs wrap driver errors), from its DETAIL (JSON) or, where a driver drops the DETAIL, its message; else
 * `undefined`.
 */
export function staleTokenErrorOf(error: unknown): StaleTokenError | undefined {
  return staleTokenErrorFor(error, undefined);
}

/** {@link staleTokenErrorOf}, knowing the fences sent (whether they named a lease, where only the message says). */
function staleTokenErrorFor(
  error: unknown,
  fences: readonly FenceLike[] | undefined,
): StaleTokenError | undefined {
  for (const e of causes(error)) {
    if (e instanceof StaleTokenError) return e;
    const { code, detail, message } = e as { code?: unknown; detail?: unknown; message?: unknown };
    const text = typeof message === 'string' ? message : '';
    if (code === STALE_TOKEN_SQLSTATE && typeof detail === 'string') {
      const parsed = parseDetail(detail);
      if (parsed !== undefined) return parsed;
    }
    if (code === STALE_TOKEN_SQLSTATE || text.includes(STALE_TOKEN_SQLSTATE)) {
      const parsed = parseMessage(text, fences);
      if (parsed !== undefined) return parsed;
    }
  }
  return undefined;
}

/**
 * `error` and what it wraps, breadth first, at most 16: `cause` (Drizzle's DrizzleQueryError, the store's own
 * errors) and Prisma's `meta.driverAdapterError` (whose `cause` holds the Postgres code, message and detail).
 */
function causes(error: unknown): object[] {
  const found: object[] = [];
  const queue: unknown[] = [error];
  while (queue.length > 0 && found.length < 16) {
    const e = queue.shift();
    if (typeof e !== 'object' || e === null || found.includes(e)) continue;
    found.push(e);
    const { cause, meta } = e as { cause?: unknown; meta?: { driverAdapterError?: unknown } };
    queue.push(cause);
    if (typeof meta === 'object' && meta !== null) queue.push(meta.driverAdapterError);
  }
  return found;
}

function parseDetail(detail: string): StaleTokenError | undefined {
  try {
    const d = JSON.parse(detail) as StaleDetail;
    return new StaleTokenError(d.resource, BigInt(d.presented), BigInt(d.current), {
      namedLease: d.named_lease,
    });
  } catch {
    return undefined;
  }
}

const STALE_MESSAGE = /stale fencing token for resource ("(?:[^"\\]|\\.)*"): presented (\d+), current (\d+)/;
const EQUAL_MESSAGE = /fencing token (\d+) for resource ("(?:[^"\\]|\\.)*") equals the fence/;

function parseMessage(message: string, fences?: readonly FenceLike[]): StaleTokenError | undefined {
  const named = (resource: string) => {
    const fence = fences?.find((f) => f.resource === resource);
    return fence === undefined ? {} : { namedLease: fence.leaseIdHash !== null };
  };
  const stale = STALE_MESSAGE.exec(message);
  if (stale !== null) {
    const resource = JSON.parse(stale[1]!) as string;
    return new StaleTokenError(resource, BigInt(stale[2]!), BigInt(stale[3]!), named(resource));
  }
  const equal = EQUAL_MESSAGE.exec(message);
  if (equal !== null) {
    const resource = JSON.parse(equal[2]!) as string;
    const token = BigInt(equal[1]!);
    return new StaleTokenError(resource, token, token, named(resource));
  }
  return undefined;
}
