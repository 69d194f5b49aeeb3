import type { History } from '@fenced/test-utils/history';
import type { WriteMode } from '@fenced/test-utils/counter-worker/counter-store';
import { CounterWorker } from '@fenced/test-utils/counter-worker/handle';
import type { WorkerCommand, WorkerOutcome, WorkerSetup } from '@fenced/test-utils/counter-worker/protocol';

/** Codes that prove an operation did nothing. */
const FAILED = new Set(['STALE_TOKEN', 'LOCKED', 'QUORUM_UNAVAILABLE', 'INVALID_REQUEST', 'LEASE_LOST']);

/** A lease a worker holds, as the test sees it. */
export interface WorkerLease {
  readonly resource: string;
  readonly token: bigint;
  readonly leaseRef: string;
}

/** A command's outcome as a fault test reads it. */
export interface WorkerResult {
  readonly ok: boolean;
  readonly value?: number;
  readonly code?: string;
  readonly message?: string;
}

/**
 * A counter worker (`@fenced/test-utils/counter-worker`: a real process to SIGSTOP) whose calls are recorded
 * in the test's history from the test's side: invoked when sent, completed when the reply arrives — a
 * conservative window around what the worker did.
 */
export class WorkerProcess {
  private lease: WorkerLease | undefined;

  private constructor(
    private readonly worker: CounterWorker,
    /** Where calls are recorded; switch it per run with `record()`. */
    private history: History,
  ) {}

  get name(): string {
    return this.worker.name;
  }

  /** Starts the process (optionally with extra environment, e.g. the clock shim's) and sets it up. */
  static async start(
    name: string,
    history: History,
    setup: WorkerSetup,
    env: NodeJS.ProcessEnv = {},
  ): Promise<WorkerProcess> {
    const worker = await CounterWorker.spawn(name, { env });
    const outcome = await worker.send({ cmd: 'setup', setup }).catch(exited);
    if (!outcome.ok) {
      await worker.stop();
      throw new Error(`${name} setup failed: ${outcome.code}: ${outcome.message}`);
    }
    return new WorkerProcess(worker, history);
  }

  /** Records the following calls in `history` (one worker process can serve several runs). */
  record(history: History): void {
    this.history = history;
    this.lease = undefined;
  }

  get pid(): number | undefined {
    return this.worker.pid;
  }

  get heldLease(): WorkerLease | undefined {
    return this.lease;
  }

  /** Sends a command; a worker that died answers WORKER_EXITED. */
  private send(command: WorkerCommand, onInside?: () => void): Promise<WorkerOutcome> {
    return this.worker.send(command, onInside).catch(exited);
  }

  /** Acquires (recorded as `acquire`); resolves with the lease, or `null` when not granted. */
  async acquire(
    resource: string,
    options: {
      ttlMs: number;
      waitMs?: number;
      keepAlive?: boolean;
      /** How the client reads the token it was granted (a negative control may mangle it). */
      asRead?: (token: bigint) => bigint;
    },
  ): Promise<WorkerLease | null> {
    const pending = this.history.invoke(this.name, 'acquire', resource);
    const outcome = await this.send({
      cmd: 'acquire',
      resource,
      ttlMs: options.ttlMs,
      waitMs: options.waitMs ?? 0,
      keepAlive: options.keepAlive ?? false,
    });
    const granted = outcome.lease;
    if (outcome.ok && granted?.token !== undefined) {
      const token = (options.asRead ?? ((t: bigint) => t))(BigInt(granted.token));
      const lease = { resource, token, leaseRef: granted.leaseRef };
      pending.ok({ token: lease.token, leaseId: lease.leaseRef, validityMs: granted.validityMs });
      this.lease = lease;
      return lease;
    }
    this.complete(pending, outcome);
    return null;
  }

  /** Reads the counter outside any guard (not a recorded operation: it commits nothing). */
  async read(resource: string): Promise<bigint> {
    const outcome = await this.send({ cmd: 'read', resource });
    if (!outcome.ok || outcome.value === undefined)
      throw new Error(`${this.name} read failed: ${outcome.message}`);
    return BigInt(outcome.value);
  }

  /**
   * One increment under the held lease, recorded as `increment` with its token, lease and op id. With
   * `onInside`, the worker stops between its read and its write and `onInside` runs (e.g. to SIGSTOP it);
   * call `proceed()` after resuming it.
   */
  async increment(
    resource: string,
    options: { mode: WriteMode; opId: string; readBefore?: bigint; onInside?: () => void },
  ): Promise<WorkerResult> {
    const lease = this.lease;
    if (!lease) throw new Error(`${this.name} holds no lease`);
    const pending = this.history.invoke(this.name, 'increment', resource, {
      token: lease.token,
      leaseId: lease.leaseRef,
      opId: options.opId,
    });
    const outcome = await this.send(
      {
        cmd: 'increment',
        resource,
        mode: options.mode,
        opId: options.opId,
        ...(options.readBefore === undefined ? {} : { readBefore: options.readBefore.toString() }),
        ...(options.onInside ? { pauseInside: true } : {}),
      },
      options.onInside,
    );
    if (outcome.ok) pending.ok({ value: outcome.value });
    else this.complete(pending, outcome);
    return outcome;
  }

  /** The worker's own wall clock. */
  async now(): Promise<number> {
    const outcome = await this.send({ cmd: 'now' });
    return Number(outcome.value);
  }

  /** Lets an increment started with `onInside` go on to its write. */
  proceed(): void {
    this.worker.proceed();
  }

  async release(): Promise<void> {
    const lease = this.lease;
    this.lease = undefined;
    if (!lease) return;
    const pending = this.history.invoke(this.name, 'release', lease.resource, {
      leaseId: lease.leaseRef,
    });
    this.complete(pending, await this.send({ cmd: 'release' }));
  }

  /** SIGSTOP: the whole process freezes, its sockets stay open. */
  pause(): void {
    this.worker.pause();
  }

  resume(): void {
    this.worker.resume();
  }

  /** Tears down (releases, closes) and ends the process; kills it if it does not go in time. */
  stop(): Promise<void> {
    return this.worker.stop();
  }

  private complete(pending: ReturnType<History['invoke']>, outcome: WorkerOutcome): void {
    const fields = { error: `${outcome.code ?? 'ERROR'}: ${outcome.message ?? ''}` };
    if (outcome.ok) pending.ok();
    else if (outcome.code !== undefined && FAILED.has(outcome.code)) pending.fail(fields);
    else pending.unknown(fields);
  }
}

function exited(error: unknown): WorkerOutcome {
  const message = error instanceof Error ? error.message : String(error);
  return { ok: false, startedAt: 0, endedAt: 0, code: 'WORKER_EXITED', message };
}
