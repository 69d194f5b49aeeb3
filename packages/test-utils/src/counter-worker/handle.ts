import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { own, waitForExit } from '../owned-processes.js';
import { isWorkerMessage, type WorkerCommand, type WorkerOutcome, type WorkerRequest } from './protocol.js';

const WORKER_SCRIPT = fileURLToPath(new URL('./worker.ts', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const OUTPUT_KEPT = 8_000;

/**
 * The parent's side of one counter worker (worker.ts): spawns it with tsx and the source condition, sends it
 * commands over IPC (protocol.ts), and pauses and resumes it with real signals.
 */
export class CounterWorker {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (o: WorkerOutcome) => void; reject: (e: Error) => void; inside?: () => void }
  >();
  private output = '';
  private exited = false;
  private paused = false;

  private constructor(
    readonly name: string,
    private readonly child: ChildProcess,
  ) {
    const keep = (chunk: Buffer): void => {
      this.output = (this.output + chunk.toString()).slice(-OUTPUT_KEPT);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    child.on('message', (message) => {
      if (!isWorkerMessage(message)) return;
      if (message.kind === 'reply') {
        const waiter = this.pending.get(message.id);
        this.pending.delete(message.id);
        waiter?.resolve(message.outcome);
      } else if (message.kind === 'inside') {
        this.pending.get(message.id)?.inside?.();
      }
    });
    child.once('exit', (code, signal) => {
      this.exited = true;
      const error = new Error(
        `worker ${name} exited (${code ?? signal})${this.output ? `; its output:\n${this.output.trim()}` : ''}`,
      );
      for (const waiter of this.pending.values()) waiter.reject(error);
      this.pending.clear();
    });
  }

  /**
   * Starts a worker (with `env` added to this process' environment, e.g. a clock shim's) and waits until it
   * has loaded its modules and listens. It has no session until it is sent `setup`.
   */
  static async spawn(
    name: string,
    options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
  ): Promise<CounterWorker> {
    const timeoutMs = options.timeoutMs ?? 60_000;
    const child = fork(WORKER_SCRIPT, [name], {
      cwd: REPO_ROOT,
      execArgv: ['--conditions=@fenced/source', '--import', 'tsx'],
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      // Its own process group: Ctrl-C reaches the parent only, which then stops the worker in order.
      detached: true,
    });
    own(child);
    const handle = new CounterWorker(name, child);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`worker ${name} did not start within ${timeoutMs} ms:\n${handle.output}`));
      }, timeoutMs);
      const onMessage = (message: unknown): void => {
        if (!isWorkerMessage(message) || message.kind !== 'ready') return;
        clearTimeout(timer);
        child.off('message', onMessage);
        resolve();
      };
      child.on('message', onMessage);
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`worker ${name} exited during start-up (${code ?? signal}):\n${handle.output}`));
      });
    });
    return handle;
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  /**
   * Sends one command; resolves with the worker's outcome (failures included), rejects if the worker dies.
   * `onInside` runs when an `increment` with `pauseInside` has read and waits (see `proceed`).
   */
  send(command: WorkerCommand, onInside?: () => void): Promise<WorkerOutcome> {
    if (this.exited) return Promise.reject(new Error(`worker ${this.name} is not running`));
    const id = this.nextId++;
    if (command.cmd === 'increment' && command.pauseInside) this.lastPausedIncrement = id;
    const request: WorkerRequest = { ...command, id };
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, ...(onInside ? { inside: onInside } : {}) });
      this.child.send(request, (error) => {
        if (error) {
          this.pending.delete(id);
          reject(error);
        }
      });
    });
  }

  private lastPausedIncrement = 0;

  /** Lets the last increment sent with `pauseInside` go on to its write (after `resume()`). */
  proceed(): void {
    void this.send({ cmd: 'proceed', of: this.lastPausedIncrement }).catch(() => undefined);
  }

  /** SIGSTOP: the process stops where it is, sockets open, timers frozen — a very long GC pause. */
  pause(): void {
    if (this.exited) throw new Error(`worker ${this.name} is not running`);
    process.kill(this.pid, 'SIGSTOP');
    this.paused = true;
  }

  resume(): void {
    if (this.exited || !this.paused) return;
    process.kill(this.pid, 'SIGCONT');
    this.paused = false;
  }

  /** Resolves once the kernel reports the process stopped (state T), so the pause is real before going on. */
  async waitUntilStopped(timeoutMs = 5_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      const stat = await fs.readFile(`/proc/${this.pid}/stat`, 'utf8').catch(() => null);
      if (stat === null) return; // no procfs: SIGSTOP is synchronous enough
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (state === 'T' || state === 't') return;
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    throw new Error(`worker ${this.name} did not stop within ${timeoutMs} ms`);
  }

  /** Asks the worker to close its connections, then ends it (SIGCONT first: a stopped process cannot exit). */
  async stop(): Promise<void> {
    if (this.exited) return;
    this.resume();
    await Promise.race([
      this.send({ cmd: 'teardown' }).catch(() => undefined),
      new Promise((resolve) => setTimeout(resolve, 2_000)),
    ]);
    if (!this.exited && this.child.connected) this.child.disconnect();
    const gone = waitForExit(this.child);
    const timer = setTimeout(() => {
      if (!this.exited) {
        process.kill(this.pid, 'SIGCONT');
        process.kill(this.pid, 'SIGKILL');
      }
    }, 2_000);
    await gone;
    clearTimeout(timer);
  }
}
