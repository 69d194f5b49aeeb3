import { createHash } from 'node:crypto';
import type { GuardPath, WriteMode } from './counter-store.js';

/**
 * The IPC contract between a parent (a fault test, the demo's orchestrator) and its counter workers
 * (worker.ts, driven through handle.ts): real child processes, so the parent can stop one with SIGSTOP —
 * timers, sockets, keep-alives and open transactions frozen, as in a GC pause — rather than just not calling it.
 * Plain JSON: tokens travel as decimal strings, times as absolute milliseconds (`nowMs()`), which all processes
 * of one machine share closely enough for a timeline.
 */

/** Everything a worker needs to talk to the lock service and the database. */
export interface WorkerSetup {
  /**
   * `fenced`: a @fenced/coordinator lease with its fencing token; `redlock`: plain Redlock (the `redlock`
   * package), a lock without a token — what the demo's unprotected runs use. @defaultValue 'fenced'
   */
  readonly lock?: 'fenced' | 'redlock';
  /** Redis node URLs as this worker sees them (possibly through its fault proxies). */
  readonly redisUrls: readonly string[];
  /** The coordinator's key prefix. @defaultValue the coordinator's default */
  readonly keyPrefix?: string;
  readonly nodeTimeoutMs: number;
  readonly maxTtlMs: number;
  /**
   * Acquire and release a throw-away resource at set-up (so every node has the scripts cached, and a later
   * acquire is one round trip). Off for a scenario that needs the nodes free of resource keys (a fresh
   * cluster). @defaultValue true
   */
  readonly warmUp?: boolean;
  readonly databaseUrl: string;
  /** The schema of the counter tables (counter-tables.ts) and of the guard's own. */
  readonly schema: string;
  readonly lockTimeoutMs?: number;
  readonly idleInTransactionTimeoutMs?: number;
  /** The client the worker writes through (guard-paths.ts). @defaultValue 'kysely' */
  readonly path?: GuardPath;
  /** For the `prisma` path: the generated client of counter.prisma. */
  readonly prismaClient?: string;
  /**
   * Signed tokens (F20): the coordinator signs every lease with this Ed25519 key and the worker's store
   * verifies proofs with its public half (`kysely` path). Absent: no signing, the store believes any token.
   */
  readonly signing?: {
    readonly keyId: string;
    readonly privateKeyPem: string;
    readonly publicKeyPem: string;
  };
}

export type WorkerCommand =
  | { readonly cmd: 'setup'; readonly setup: WorkerSetup }
  /** Acquires a lease; with `keepAlive` the worker extends it every third of its ttl, as `using()` does. */
  | {
      readonly cmd: 'acquire';
      readonly resource: string;
      readonly ttlMs: number;
      readonly waitMs: number;
      readonly keepAlive?: boolean;
    }
  /** Reads the counter: in a guarded transaction of the held lease (`guarded`), or outside any guard. */
  | { readonly cmd: 'read'; readonly resource: string; readonly guarded?: boolean }
  /**
   * Writes `value` under the held lease: in a guarded transaction (`guarded`) or a plain one, straight to
   * Postgres, or as a PUT of `{ value, worker, leaseRef }` to `httpUrl` with the lease's fencing headers.
   */
  | {
      readonly cmd: 'write';
      readonly resource: string;
      readonly value: number;
      readonly guarded: boolean;
      readonly httpUrl?: string;
      /**
       * A misbehaving client (F20): present this token instead of the lease's, with the lease's own id and
       * proof. Guarded, straight to Postgres only.
       */
      readonly forgeToken?: string;
    }
  /**
   * Read-modify-write in one go under the held lease. `pauseInside`: after the read, the worker reports
   * `inside` and waits for `proceed` before writing (the parent stops it in between).
   */
  | {
      readonly cmd: 'increment';
      readonly resource: string;
      readonly mode: WriteMode;
      readonly opId: string;
      readonly readBefore?: string;
      readonly pauseInside?: boolean;
    }
  | { readonly cmd: 'proceed'; readonly of: number }
  /** The worker's wall clock (`Date.now()`), which a clock shim may have moved. */
  | { readonly cmd: 'now' }
  | { readonly cmd: 'release' }
  | { readonly cmd: 'teardown' };

export type WorkerRequest = WorkerCommand & { readonly id: number };

/** The lease a worker holds, as the parent may see it (never the lease id itself). */
export interface LeaseInfo {
  readonly resource: string;
  /** Fencing token; absent for a plain Redlock lock, which has none. */
  readonly token?: string;
  /** `leaseRef()` of the lease id / lock value: names the grant without revealing the capability. */
  readonly leaseRef: string;
  readonly validityMs: number;
  /** Absolute ms (`nowMs()`) at which the holder's own validity ends. */
  readonly validUntil: number;
}

/** The outcome of one command, timed by the worker. */
export interface WorkerOutcome {
  readonly ok: boolean;
  /** Absolute ms (`nowMs()`): command started / finished in the worker. */
  readonly startedAt: number;
  readonly endedAt: number;
  /** acquire: the lease. */
  readonly lease?: LeaseInfo;
  /** read: the value; write, increment: the value written; now: the worker's `Date.now()`. */
  readonly value?: number;
  /** Failure: a stable code (STALE_TOKEN, LOCKED, QUORUM_UNAVAILABLE, HTTP_409, ...) and a message for people. */
  readonly code?: string;
  readonly message?: string;
  /** Failure: the guard's view of a stale token (presented, current fence). */
  readonly presented?: string;
  readonly current?: string;
  /** HTTP writes: the status the service answered. */
  readonly status?: number;
}

export type WorkerMessage =
  /** Sent once, when the worker has loaded its modules and listens for commands. */
  | { readonly kind: 'ready'; readonly pid: number }
  | { readonly kind: 'reply'; readonly id: number; readonly outcome: WorkerOutcome }
  /** An `increment` with `pauseInside` has read and waits for `proceed`. */
  | { readonly kind: 'inside'; readonly id: number };

export function isWorkerMessage(message: unknown): message is WorkerMessage {
  return typeof message === 'object' && message !== null && 'kind' in message;
}

/** The clock every process stamps outcomes with. */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

/** Names a grant in histories and the commit log without writing down the lease id (a capability). */
export function leaseRef(leaseId: string): string {
  return createHash('sha256').update(leaseId).digest('hex').slice(0, 12);
}
