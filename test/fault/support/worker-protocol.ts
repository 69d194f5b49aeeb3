import type { GuardPath, WriteMode } from './counter-ops.js';

/**
 * IPC between a fault test and its counter workers (counter-worker.ts): real child processes, so a test can
 * stop one with SIGSTOP — timers, sockets and keep-alives frozen, as in a GC pause — rather than just not
 * calling it. Tokens travel as decimal strings.
 */
export interface WorkerSetup {
  readonly redisUrls: readonly string[];
  readonly nodeTimeoutMs: number;
  readonly maxTtlMs: number;
  readonly databaseUrl: string;
  readonly schema: string;
  readonly lockTimeoutMs?: number;
  readonly idleInTransactionTimeoutMs?: number;
  /** The coordinator's key prefix. @defaultValue the coordinator's default */
  readonly keyPrefix?: string;
  /**
   * Acquire and release a throw-away resource at set-up (so every node has the scripts cached). Off for a
   * scenario that needs the nodes free of resource keys (a fresh cluster). @defaultValue true
   */
  readonly warmUp?: boolean;
  /** The client the worker writes through (support/guard-paths.ts). @defaultValue 'kysely' */
  readonly path?: GuardPath;
  /** For the `prisma` path: the generated client's module (`FaultWorld.prismaClientFile()`). */
  readonly prismaClient?: string;
}

export type WorkerCommand =
  | { readonly cmd: 'setup'; readonly setup: WorkerSetup }
  /** Acquires a lease; with `keepAlive` the worker extends it every third of its ttl, as `using()` does. */
  | {
      readonly cmd: 'acquire';
      readonly resource: string;
      readonly ttlMs: number;
      readonly waitMs: number;
      readonly keepAlive: boolean;
    }
  /** Reads the counter outside any guard. */
  | { readonly cmd: 'read'; readonly resource: string }
  /**
   * Increments under the lease it holds. `pauseInside`: after the read, the worker reports `inside` and waits
   * for `proceed` before writing (the test stops it in between).
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

export interface WorkerResult {
  readonly ok: boolean;
  readonly token?: string;
  readonly leaseRef?: string;
  readonly validityMs?: number;
  readonly value?: string;
  /** Error code (STALE_TOKEN, LOCKED, QUORUM_UNAVAILABLE, ...) or error name. */
  readonly code?: string;
  readonly message?: string;
}

export type WorkerMessage =
  | { readonly kind: 'ready' }
  | { readonly kind: 'reply'; readonly id: number; readonly result: WorkerResult }
  | { readonly kind: 'inside'; readonly id: number };
