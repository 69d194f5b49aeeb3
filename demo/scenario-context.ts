import type { CounterWorker } from '@fenced/test-utils/counter-worker/handle';
import {
  nowMs,
  type LeaseInfo,
  type WorkerCommand,
  type WorkerOutcome,
} from '@fenced/test-utils/counter-worker/protocol';
import type { DemoEnvironment } from './demo-environment.js';
import type { ActionKind, ActionRecord, Lane, Mode, OpRecord, RunRecord, WorkerName } from './run-record.js';

/** A step the orchestration needs did not happen: the run proves nothing and is reported as broken. */
export class ScenarioError extends Error {
  override readonly name = 'ScenarioError';
}

/**
 * One worker as a scenario drives it: every command is recorded with the worker's own timing, and the actor
 * remembers the lease the worker holds, so reads and writes can be tied to their grant.
 */
export class Actor {
  private lease: LeaseInfo | undefined;

  constructor(
    readonly name: WorkerName,
    private readonly worker: CounterWorker,
    private readonly ctx: ScenarioContext,
  ) {}

  /** Acquires the run's resource. `waitMs`: how long to keep trying while someone else holds it. */
  acquire(options: { waitMs?: number } = {}): Promise<WorkerOutcome> {
    const waitMs = options.waitMs ?? 0;
    const { resource, ttlMs } = this.ctx;
    return this.run({ cmd: 'acquire', resource, ttlMs, waitMs }, { op: 'acquire', ttlMs, waitMs }).then(
      (outcome) => {
        if (outcome.ok && outcome.lease) this.lease = outcome.lease;
        return outcome;
      },
    );
  }

  read(): Promise<WorkerOutcome> {
    return this.run(
      { cmd: 'read', resource: this.ctx.resource, guarded: this.ctx.guarded },
      { op: 'read', leaseRef: this.lease?.leaseRef },
    );
  }

  /** Writes `value` to the counter, straight to Postgres or through the counter service (`serviceUrl`). */
  write(value: number, through?: { serviceUrl: string }): Promise<WorkerOutcome> {
    const via = through ? 'http' : 'db';
    const { resource, counter, guarded } = this.ctx;
    return this.run(
      {
        cmd: 'write',
        resource,
        value,
        guarded,
        ...(through ? { httpUrl: `${through.serviceUrl}/counters/${counter}` } : {}),
      },
      { op: 'write', value, via, leaseRef: this.lease?.leaseRef },
    );
  }

  /** A misbehaving write (F20): `value` presented with `token` instead of the lease's own token. */
  forgedWrite(value: number, token: bigint): Promise<WorkerOutcome> {
    const forgeToken = token.toString();
    return this.run(
      { cmd: 'write', resource: this.ctx.resource, value, guarded: true, forgeToken },
      { op: 'write', value, via: 'db', leaseRef: this.lease?.leaseRef, forgedToken: forgeToken },
    );
  }

  release(): Promise<WorkerOutcome> {
    const leaseRef = this.lease?.leaseRef;
    this.lease = undefined;
    return this.run({ cmd: 'release' }, { op: 'release', leaseRef });
  }

  /** SIGSTOP, recorded as a pause span on the worker's lane until `resume()`. */
  async pause(reason: string): Promise<void> {
    const span = this.ctx.span(this.name, 'pause', `SIGSTOP ${this.name}: ${reason}`);
    this.worker.pause();
    this.pauseSpan = span;
    await this.worker.waitUntilStopped();
  }

  resume(): void {
    this.worker.resume();
    const span = this.pauseSpan;
    this.pauseSpan = undefined;
    span?.end(`SIGCONT ${this.name}: it carries on where it stopped`);
  }

  private pauseSpan: { end(text?: string): void } | undefined;

  private async run(
    command: WorkerCommand,
    record: Omit<OpRecord, 'worker' | 'outcome'>,
  ): Promise<WorkerOutcome> {
    const outcome = await this.worker.send(command);
    this.ctx.record.ops.push({ ...record, worker: this.name, outcome });
    return outcome;
  }
}

/** What a scenario script works with during one run. */
export class ScenarioContext {
  readonly A: Actor;
  readonly B: Actor;
  /** An open "worker A cut off from some nodes" span; the run's clean-up heals the network and ends it. */
  cutOff: { end(text?: string): void } | undefined;

  constructor(
    readonly env: DemoEnvironment,
    readonly record: RunRecord,
    /** The coordinator key prefix of this run (fenced mode). */
    readonly keyPrefix: string,
    /** Whether the workers hold coordinator leases and read and write in guarded transactions. */
    readonly guarded: boolean,
  ) {
    this.A = new Actor('A', env.workers.A, this);
    this.B = new Actor('B', env.workers.B, this);
  }

  get mode(): Mode {
    return this.record.mode;
  }

  get counter(): string {
    return this.record.counter;
  }

  get resource(): string {
    return this.record.resource;
  }

  get ttlMs(): number {
    return this.record.ttlMs;
  }

  /** A remark on the timeline. */
  note(lane: Lane, text: string, t = nowMs()): void {
    this.record.actions.push({ lane, kind: 'note', t, text });
  }

  /** An instantaneous fault (a clock jump, a restart). */
  event(lane: Lane, kind: ActionKind, text: string, short?: string): void {
    this.record.actions.push({ lane, kind, t: nowMs(), text, ...(short ? { short } : {}) });
  }

  /** Starts a span (a pause, bytes held in the network, a node cut off); `end()` closes it. */
  span(lane: Lane, kind: ActionKind, text: string, short?: string): { end(text?: string): void } {
    const action: ActionRecord = { lane, kind, t: nowMs(), text, ...(short ? { short } : {}) };
    this.record.actions.push(action);
    return {
      end: (endText?: string) => {
        if (action.until !== undefined) return;
        action.until = nowMs();
        if (endText !== undefined) action.endText = endText;
      },
    };
  }

  /** Throws a ScenarioError unless the outcome is ok: the next steps of the story depend on it. */
  must(outcome: WorkerOutcome, what: string): WorkerOutcome {
    if (!outcome.ok)
      throw new ScenarioError(`${what} failed: ${outcome.code ?? ''} ${outcome.message ?? ''}`);
    return outcome;
  }

  /** The value a successful read returned. */
  valueOf(outcome: WorkerOutcome, what: string): number {
    const value = this.must(outcome, what).value;
    if (value === undefined) throw new ScenarioError(`${what} returned no value`);
    return value;
  }

  /** The Redis key that holds the run's lease on each node: plain Redlock uses the resource name itself. */
  get leaseKey(): string {
    // The coordinator's layout (packages/coordinator/src/keys/key-layout.ts); run resources need no escaping.
    return this.mode === 'fenced' ? `${this.keyPrefix}:{${this.resource}}:lease` : this.resource;
  }

  /** On how many nodes the run's lease key exists right now (read through the orchestrator's own connections). */
  async leaseKeyCount(nodes?: readonly number[]): Promise<number> {
    const indexes = nodes ?? this.env.probes.map((_, i) => i);
    const found = await Promise.all(
      indexes.map((i) =>
        this.env.probes[i]!.exists(this.leaseKey).then(
          (n) => n === 1,
          () => false,
        ),
      ),
    );
    return found.filter(Boolean).length;
  }

  /** Polls `condition` every few ms until it holds; a ScenarioError after `timeoutMs`. */
  async waitFor(
    what: string | (() => string),
    condition: () => Promise<boolean> | boolean,
    timeoutMs = 5_000,
  ): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    for (;;) {
      if (await condition()) return;
      if (performance.now() > deadline)
        throw new ScenarioError(
          `timed out after ${timeoutMs} ms waiting until ${typeof what === 'string' ? what : what()}`,
        );
      await new Promise((resolve) => setTimeout(resolve, 3));
    }
  }
}
