import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { own, waitForExit } from '@fenced/test-utils/owned-processes';
import type { History } from '@fenced/test-utils/history';
import type { WriteMode } from './counter-ops.js';
import type { WorkerCommand, WorkerMessage, WorkerResult, WorkerSetup } from './worker-protocol.js';

const SCRIPT = fileURLToPath(new URL('./counter-worker.ts', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Codes that prove an operation did nothing. */
const FAILED = new Set(['STALE_TOKEN', 'LOCKED', 'QUORUM_UNAVAILABLE', 'INVALID_REQUEST', 'LEASE_LOST']);

/** A lease a worker holds, as the test sees it. */
export interface WorkerLease {
  readonly resource: string;
  readonly token: bigint;
  readonly leaseRef: string;
}

/**
 * A counter worker in its own process (`node --conditions=@fenced/source --import tsx counter-worker.ts`),
 * with SIGSTOP/SIGCONT for real pauses. Every call is recorded in the test's history from the test's side:
 * invoked when sent, completed when the reply arrives — a conservative window around what the worker did.
 */
export class WorkerProcess {
  private nextId = 1;
  private readonly waiting = new Map<number, (result: WorkerResult) => void>();
  private readonly insides = new Map<number, () => void>();
  private lease: WorkerLease | undefined;

  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
    /** Where calls are recorded; switch it per run with `record()`. */
    private history: History,
  ) {
    child.on('message', (message: WorkerMessage) => {
      if (message.kind === 'reply') {
        this.waiting.get(message.id)?.(message.result);
        this.waiting.delete(message.id);
      } else if (message.kind === 'inside') {
        this.insides.get(message.id)?.();
      }
    });
    child.once('exit', () => {
      for (const resolve of this.waiting.values())
        resolve({ ok: false, code: 'WORKER_EXITED', message: `${name} exited` });
      this.waiting.clear();
    });
  }

  /** Starts the process (optionally with extra environment, e.g. the clock shim's) and sets it up. */
  static async start(
    name: string,
    history: History,
    setup: WorkerSetup,
    env: NodeJS.ProcessEnv = {},
  ): Promise<WorkerProcess> {
    const child = fork(SCRIPT, [name], {
      cwd: REPO_ROOT,
      execArgv: ['--conditions=@fenced/source', '--import', 'tsx'],
      env: { ...process.env, ...env },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    own(child);
    await new Promise<void>((resolve, reject) => {
      const onExit = (code: number | null): void => reject(new Error(`${name} exited (${code}) at start-up`));
      child.once('exit', onExit);
      child.once('message', (message: WorkerMessage) => {
        child.off('exit', onExit);
        if (message.kind === 'ready') resolve();
        else reject(new Error(`${name} said ${message.kind} before ready`));
      });
    });
    const worker = new WorkerProcess(name, child, history);
    const result = await worker.send({ cmd: 'setup', setup });
    if (!result.ok) {
      await worker.stop();
      throw new Error(`${name} setup failed: ${result.code}: ${result.message}`);
    }
    return worker;
  }

  /** Records the following calls in `history` (one worker process can serve several runs). */
  record(history: History): void {
    this.history = history;
    this.lease = undefined;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get heldLease(): WorkerLease | undefined {
    return this.lease;
  }

  private send(command: WorkerCommand, onInside?: () => void): Promise<WorkerResult> {
    const id = this.nextId++;
    if (onInside) this.insides.set(id, onInside);
    return new Promise((resolve) => {
      this.waiting.set(id, (result) => {
        this.insides.delete(id);
        resolve(result);
      });
      this.child.send({ ...command, id });
    });
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
    const result = await this.send({
      cmd: 'acquire',
      resource,
      ttlMs: options.ttlMs,
      waitMs: options.waitMs ?? 0,
      keepAlive: options.keepAlive ?? false,
    });
    if (result.ok && result.token !== undefined && result.leaseRef !== undefined) {
      const token = (options.asRead ?? ((t: bigint) => t))(BigInt(result.token));
      const lease = { resource, token, leaseRef: result.leaseRef };
      pending.ok({ token: lease.token, leaseId: lease.leaseRef, validityMs: result.validityMs ?? 0 });
      this.lease = lease;
      return lease;
    }
    this.complete(pending, result);
    return null;
  }

  /** Reads the counter outside any guard (not a recorded operation: it commits nothing). */
  async read(resource: string): Promise<bigint> {
    const result = await this.send({ cmd: 'read', resource });
    if (!result.ok || result.value === undefined)
      throw new Error(`${this.name} read failed: ${result.message}`);
    return BigInt(result.value);
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
    const command: WorkerCommand = {
      cmd: 'increment',
      resource,
      mode: options.mode,
      opId: options.opId,
      ...(options.readBefore === undefined ? {} : { readBefore: options.readBefore.toString() }),
      ...(options.onInside ? { pauseInside: true } : {}),
    };
    const id = this.nextId; // the id send() is about to use
    this.lastIncrementId = id;
    const result = await this.send(command, options.onInside);
    if (result.ok) pending.ok({ value: Number(result.value) });
    else this.complete(pending, result);
    return result;
  }

  private lastIncrementId = 0;

  /** The worker's own wall clock. */
  async now(): Promise<number> {
    const result = await this.send({ cmd: 'now' });
    return Number(result.value);
  }

  /** Lets an increment started with `onInside` go on to its write. */
  proceed(): void {
    this.child.send({ cmd: 'proceed', of: this.lastIncrementId, id: this.nextId++ });
  }

  async release(): Promise<void> {
    const lease = this.lease;
    this.lease = undefined;
    if (!lease) return;
    const pending = this.history.invoke(this.name, 'release', lease.resource, {
      leaseId: lease.leaseRef,
    });
    const result = await this.send({ cmd: 'release' });
    this.complete(pending, result);
  }

  /** SIGSTOP: the whole process freezes, its sockets stay open. */
  pause(): void {
    if (this.child.pid !== undefined && this.child.exitCode === null) process.kill(this.child.pid, 'SIGSTOP');
  }

  resume(): void {
    if (this.child.pid !== undefined && this.child.exitCode === null) process.kill(this.child.pid, 'SIGCONT');
  }

  /** Tears down (releases, closes) and ends the process; kills it if it does not go in time. */
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.resume();
    const done = waitForExit(this.child);
    try {
      this.child.send({ cmd: 'teardown', id: this.nextId++ });
      this.child.disconnect();
    } catch {
      // channel already closed
    }
    const timer = setTimeout(() => {
      if (this.child.pid !== undefined && this.child.exitCode === null) this.child.kill('SIGKILL');
    }, 5_000);
    await done;
    clearTimeout(timer);
  }

  private complete(pending: ReturnType<History['invoke']>, result: WorkerResult): void {
    const fields = { error: `${result.code ?? 'ERROR'}: ${result.message ?? ''}` };
    if (result.ok) pending.ok();
    else if (result.code !== undefined && FAILED.has(result.code)) pending.fail(fields);
    else pending.unknown(fields);
  }
}
