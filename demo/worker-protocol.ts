/**
 * The IPC contract between the demo's orchestrator and its worker processes (demo/worker.ts). Plain JSON:
 * tokens travel as decimal strings, times as absolute milliseconds (`performance.timeOrigin +
 * performance.now()`), which all processes of one machine share closely enough for a timeline.
 */

/** How a run protects its data. */
export type Mode = 'unprotected' | 'fenced';

export const MODES: readonly Mode[] = ['unprotected', 'fenced'];

/** Everything a worker needs to talk to the lock service and the database for one run. */
export interface WorkerSetup {
  readonly mode: Mode;
  /** Redis node URLs as this worker sees them (possibly through its fault proxies). */
  readonly redisUrls: readonly string[];
  /** Key prefix of the coordinator for this run: a fresh one per run keeps runs apart. */
  readonly keyPrefix: string;
  readonly databaseUrl: string;
  readonly schema: string;
  /** Coordinator settings of the demo (fenced mode). */
  readonly nodeTimeoutMs: number;
  readonly maxTtlMs: number;
  /**
   * Signed tokens (F20, fenced mode): the coordinator signs every lease with this Ed25519 key and the worker's
   * store verifies proofs with its public half. Absent: no signing, the store believes any token.
   */
  readonly signing?: {
    readonly keyId: string;
    readonly privateKeyPem: string;
    readonly publicKeyPem: string;
  };
}

export type WorkerCommand =
  | { readonly cmd: 'setup'; readonly setup: WorkerSetup }
  | { readonly cmd: 'acquire'; readonly resource: string; readonly ttlMs: number; readonly waitMs: number }
  | { readonly cmd: 'read'; readonly counter: string }
  | {
      readonly cmd: 'write';
      readonly counter: string;
      readonly value: number;
      /** `db`: straight to Postgres; `http`: through the counter service at `serviceUrl`. */
      readonly via: 'db' | 'http';
      readonly serviceUrl?: string;
      /**
       * A misbehaving client (F20): present this token instead of the lease's, with the lease's own id and
       * proof. Fenced mode, straight to Postgres only.
       */
      readonly forgeToken?: string;
    }
  | { readonly cmd: 'release' }
  | { readonly cmd: 'teardown' };

export type WorkerRequest = WorkerCommand & { readonly id: number };

/** The lease a worker holds, as the orchestrator may see it (never the lease id itself). */
export interface LeaseInfo {
  readonly resource: string;
  /** Fencing token (fenced mode); absent for a plain Redlock lock, which has none. */
  readonly token?: string;
  /** A short digest of the lease id / lock value: names the grant without revealing the capability. */
  readonly leaseRef: string;
  readonly validityMs: number;
  /** Absolute ms at which the holder's own validity ends. */
  readonly validUntil: number;
}

/** The outcome of one command, timed by the worker. */
export interface WorkerOutcome {
  readonly ok: boolean;
  /** Absolute ms: command started / finished in the worker. */
  readonly startedAt: number;
  readonly endedAt: number;
  /** acquire: the lease; read: the value; write: the value written. */
  readonly lease?: LeaseInfo;
  readonly value?: number;
  /** Failure: a stable code (STALE_TOKEN, LOCKED, HTTP_409, ...) and a message for people. */
  readonly code?: string;
  readonly message?: string;
  /** Failure: the guard's view of a stale token (presented, current fence). */
  readonly presented?: string;
  readonly current?: string;
  /** HTTP writes: the status the service answered. */
  readonly status?: number;
}

export type WorkerReply = { readonly id: number; readonly outcome: WorkerOutcome };

/** Sent once, when the worker has loaded its modules and listens for commands. */
export interface WorkerReady {
  readonly ready: true;
  readonly pid: number;
}

export function isWorkerReply(message: unknown): message is WorkerReply {
  return typeof message === 'object' && message !== null && 'id' in message && 'outcome' in message;
}

export function isWorkerReady(message: unknown): message is WorkerReady {
  return typeof message === 'object' && message !== null && 'ready' in message;
}

/** The clock every process of the demo stamps events with. */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}
