/**
 * A discrete-event world for the protocol simulation: virtual time, a message transport whose every delay, loss and
 * duplicate is a *choice*, and node adapters that let the coordinator's real protocol code (acquire attempt, token
 * rounds, release, repair) run against in-memory Redis nodes that run the project's own Lua scripts (sim-redis-node.ts).
 *
 * Every nondeterministic decision goes through one `Chooser`: replaying the same choices replays the same run
 * exactly, which is how a failure found by the seeded-random search or the exhaustive search is reproduced.
 * Messages have unbounded delay (a "long" choice can outlast any ttl), so "a promise still in flight after a crash
 * and a repair" is just one choice away; timers (timeouts, sleeps) fire exactly on virtual time.
 */
import { NodeTimeoutError } from '../../../packages/coordinator/src/errors.js';
import type { ProtocolClock, ProtocolNode } from '../../../packages/coordinator/src/nodes/protocol-node.js';
import type { RepairNode } from '../../../packages/coordinator/src/nodes/repair.js';
import type { ResourceKeys } from '../../../packages/coordinator/src/keys/key-layout.js';
import type { SimRedisNode } from './sim-redis-node.js';

/** Picks one of `options` (0 = the default) at a named decision point. */
export type Chooser = (point: string, options: number) => number;

/** What a message may do: arrive after one of the delays, be lost, or arrive twice. */
export interface LinkChoices {
  /** Delays to choose from, in ms; the first is the default. */
  readonly delaysMs: readonly number[];
  /** Whether loss is a choice (the request or the reply never arrives). */
  readonly losses: boolean;
  /** Whether a request may be delivered twice (the second copy's reply is dropped). */
  readonly duplicates: boolean;
}

/**
 * How one process's clock differs from true (virtual) time: its timers run `timerScale` times slow (a sleep or a
 * timeout of `ms` takes `ms × timerScale`, and its `now()` advances `1 / timerScale` as fast), and from `jumpAtMs`
 * on its monotonic `now()` reads `jumpMs` ahead.
 */
export interface ProcessClock {
  readonly timerScale?: number;
  readonly jumpAtMs?: number;
  readonly jumpMs?: number;
}

/**
 * A process as the nemesis sees it (nemesis.ts): crashed (`dead`: none of its timers fire and no reply reaches it, so
 * its code never runs again — what it already sent may still land), paused until `pausedUntil` (its timers and the
 * replies it would read wait until then), and its monotonic clock `offsetMs` off true time.
 */
export interface ProcessGate {
  dead: boolean;
  pausedUntil: number;
  offsetMs: number;
}

interface Timer {
  readonly at: number;
  readonly seq: number;
  readonly label: string;
  readonly fire: () => void;
  cancelled: boolean;
  onCancel?: () => void;
}

function cancel(timer: Timer): void {
  timer.cancelled = true;
  timer.onCancel?.();
}

export class SimWorld {
  time = 0;
  /** Event counter: the real-time order of everything that happens. */
  seq = 0;
  steps = 0;
  private readonly queue: Timer[] = [];
  readonly log: string[] = [];
  /** Called after every script a message applies at a node (coverage counts). */
  onApply?: (label: string) => void;

  constructor(
    readonly choose: Chooser,
    readonly links: LinkChoices,
    private readonly logging = false,
  ) {}

  note(text: string): void {
    if (this.logging) this.log.push(`${this.time}ms #${this.seq}: ${text}`);
  }

  /** Schedules `fire` at virtual time `at`. */
  at(at: number, label: string, fire: () => void): Timer {
    const timer: Timer = { at: Math.max(at, this.time), seq: this.seq++, label, fire, cancelled: false };
    // Insert in (at, seq) order; the queue stays small, so a linear insert is fine.
    let i = this.queue.length;
    while (
      i > 0 &&
      (this.queue[i - 1]!.at > timer.at ||
        (this.queue[i - 1]!.at === timer.at && this.queue[i - 1]!.seq > timer.seq))
    )
      i--;
    this.queue.splice(i, 0, timer);
    return timer;
  }

  /**
   * A timer of one process: it fires at `at`, or, if the process is paused then, when the pause ends; never once the
   * process crashed.
   */
  processAt(gate: ProcessGate | undefined, at: number, label: string, fire: () => void): Timer {
    const timer = this.at(at, label, () => {
      if (gate?.dead === true) return;
      if (gate !== undefined && gate.pausedUntil > this.time) {
        const later = this.processAt(gate, gate.pausedUntil, label, fire);
        // Cancelling the original cancels the deferred one too.
        timer.onCancel = () => (later.cancelled = true);
        return;
      }
      fire();
    });
    return timer;
  }

  /** A monotonic clock on virtual time for one process (true time, unless `spec` or the nemesis skews it). */
  clock(spec: ProcessClock = {}, gate?: ProcessGate): ProtocolClock {
    const scale = spec.timerScale ?? 1;
    const jumpAt = spec.jumpAtMs ?? Infinity;
    return {
      now: () => this.time / scale + (this.time >= jumpAt ? (spec.jumpMs ?? 0) : 0) + (gate?.offsetMs ?? 0),
      sleep: (ms, signal) =>
        new Promise<void>((resolve, reject) => {
          if (signal?.aborted) {
            reject(signal.reason as Error);
            return;
          }
          const timer = this.processAt(gate, this.time + Math.max(0, ms) * scale, 'sleep', () => {
            signal?.removeEventListener('abort', onAbort);
            resolve();
          });
          const onAbort = (): void => {
            cancel(timer);
            reject(signal!.reason as Error);
          };
          signal?.addEventListener('abort', onAbort, { once: true });
        }),
    };
  }

  /**
   * One call from a process to a node: the request arrives after a chosen delay (or never), `apply` runs at the
   * node then (atomically), and the reply comes back after another chosen delay (or never). The caller's timeout
   * rejects with NodeTimeoutError — the call may still take effect later, exactly as on a real network.
   */
  call<T>(label: string, timeoutMs: number, apply: () => T, timerScale = 1, gate?: ProcessGate): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const timeout = this.processAt(gate, this.time + timeoutMs * timerScale, `timeout ${label}`, () => {
        if (settled) return;
        settled = true;
        reject(new NodeTimeoutError(label, timeoutMs));
      });
      const deliver = (withReply: boolean): void => {
        // A script's error reply travels back like any reply, and rejects the call (as the client does).
        let outcome: { ok: true; reply: T } | { ok: false; error: Error };
        try {
          outcome = { ok: true, reply: apply() };
        } catch (error) {
          outcome = { ok: false, error: error instanceof Error ? error : new Error(String(error)) };
        }
        this.note(`${label} applied${outcome.ok ? '' : ` (error: ${outcome.error.message})`}`);
        this.onApply?.(label);
        if (!withReply) return;
        const back = this.delay(`reply ${label}`);
        if (back === null) return;
        this.processAt(gate, this.time + back, `reply ${label}`, () => {
          if (settled) return;
          settled = true;
          cancel(timeout);
          if (outcome.ok) resolve(outcome.reply);
          else reject(outcome.error);
        });
      };
      const delay = this.delay(`request ${label}`);
      if (delay === null) return;
      this.at(this.time + delay, `request ${label}`, () => deliver(true));
      if (this.links.duplicates && this.choose(`duplicate ${label}`, 2) === 1) {
        const again = this.delay(`duplicate request ${label}`);
        if (again !== null) this.at(this.time + again, `duplicate ${label}`, () => deliver(false));
      }
    });
  }

  /** A chosen delay, or null for a lost message. */
  private delay(point: string): number | null {
    const options = this.links.delaysMs.length + (this.links.losses ? 1 : 0);
    const pick = this.choose(point, options);
    return pick < this.links.delaysMs.length ? this.links.delaysMs[pick]! : null;
  }

  /**
   * Runs events until none is left, `maxSteps` were run, or virtual time passes `untilMs`. Before each event every
   * pending promise continuation runs (a macrotask turn drains the microtask queue), so the real async code reacts to
   * each event completely before the next. `afterEach` is the place for invariant checks.
   */
  async run(options: { maxSteps: number; untilMs: number; afterEach?: () => void }): Promise<void> {
    for (;;) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      const next = this.queue.shift();
      if (next === undefined) return;
      if (next.cancelled) continue;
      if (next.at > options.untilMs || this.steps >= options.maxSteps) return;
      this.time = next.at;
      this.seq++;
      this.steps++;
      next.fire();
      options.afterEach?.();
    }
  }
}

/** The resource keys a simulated script call uses (the names the coordinator derives: keys/key-layout.ts). */
type Keys = Pick<ResourceKeys, 'lease' | 'record' | 'token' | 'channel'>;

/**
 * A process's connection to one simulated node: the ProtocolNode and RepairNode slices over the transport. Like
 * NodeConnection, it keeps the node's seal epoch as this process last saw it, reads it when a call is made (when its
 * round begins), and learns the node's new epoch from a SEALED reply or from sealing the node itself.
 */
export class SimNode implements ProtocolNode, RepairNode {
  readonly address: string;
  sealEpoch = '';

  constructor(
    private readonly world: SimWorld,
    readonly model: SimRedisNode,
    /** Who is calling, for the log. */
    private readonly caller: string,
    /** The calling process's timers run this many times slow (its timeouts last longer). */
    private readonly timerScale = 1,
    /** How many nodes the calling process counts its quorum over (sent with every promise, as NodeConnection does). */
    readonly nodeCount = 0,
    /** The calling process, for the nemesis. */
    private readonly gate?: ProcessGate,
  ) {
    this.address = `sim-${model.index}`;
  }

  get index(): number {
    return this.model.index;
  }

  private call<T>(what: string, timeoutMs: number, apply: () => T): Promise<T> {
    if (this.gate?.dead === true) return new Promise<T>(() => undefined); // a crashed process sends nothing
    return this.world.call(
      `${this.caller}->n${this.model.index} ${what}`,
      timeoutMs,
      apply,
      this.timerScale,
      this.gate,
    );
  }

  private learn<R extends { readonly kind: string }>(reply: R): R {
    if (reply.kind === 'sealed') this.sealEpoch = (reply as unknown as { epoch: string }).epoch;
    return reply;
  }

  acquire(
    timeoutMs: number,
    keys: Pick<Keys, 'lease' | 'record' | 'token'>,
    leaseId: string,
    ttlMs: number,
    proposal: bigint,
  ) {
    const epoch = this.sealEpoch;
    return this.call(`acquire t=${proposal}`, timeoutMs, () =>
      this.model.acquire(keys, leaseId, ttlMs, proposal, epoch, this.nodeCount),
    ).then((reply) => this.learn(reply));
  }

  promise(
    timeoutMs: number,
    keys: Pick<Keys, 'lease' | 'record' | 'token'>,
    leaseId: string,
    proposal: bigint,
  ) {
    const epoch = this.sealEpoch;
    return this.call(`promise t=${proposal}`, timeoutMs, () =>
      this.model.promise(keys, leaseId, proposal, epoch, this.nodeCount),
    ).then((reply) => this.learn(reply));
  }

  extend(timeoutMs: number, keys: Pick<Keys, 'lease' | 'record'>, leaseId: string, ttlMs: number) {
    return this.call('extend', timeoutMs, () => this.model.extend(keys, leaseId, ttlMs, this.nodeCount));
  }

  release(timeoutMs: number, keys: Pick<Keys, 'lease' | 'record' | 'channel'>, leaseId: string) {
    return this.call('release', timeoutMs, () => this.model.release(keys, leaseId));
  }

  inspect(timeoutMs: number, keys: Pick<Keys, 'lease' | 'record'>) {
    return this.call('inspect', timeoutMs, () => this.model.inspect(keys));
  }

  repairMarker(timeoutMs: number, operation: 'claim' | 'renew', repairId: string, markerTtlMs: number) {
    return this.call(`repair-marker ${operation}`, timeoutMs, () =>
      this.model.repairMarker(operation, repairId, markerTtlMs),
    );
  }

  repairRead(timeoutMs: number, cursor: string, count: number, incarnation: string, seal: string) {
    return this.call(`repair-read${seal === '' ? '' : ' (seal)'}`, timeoutMs, () =>
      this.model.repairRead(cursor, count, incarnation, seal),
    ).then((reply) => {
      if (reply.kind === 'read' && seal !== '') this.sealEpoch = seal;
      return reply;
    });
  }

  repairRaise(
    timeoutMs: number,
    repairId: string,
    floor: bigint,
    registers: readonly (readonly [string, bigint])[],
    leases: readonly (readonly [string, string, number])[],
  ) {
    return this.call(`repair-raise floor=${floor}`, timeoutMs, () =>
      this.model.repairRaise(repairId, floor, registers, leases),
    );
  }

  finishRepair(
    timeoutMs: number,
    repairId: string,
    incarnation: string,
    sealEpoch: string,
    settings: Readonly<Record<string, string>>,
  ) {
    return this.call('finish-repair', timeoutMs, () =>
      this.model.finishRepair(repairId, incarnation, sealEpoch, settings),
    ).then((reply) => {
      if (reply.kind === 'finished') this.sealEpoch = sealEpoch;
      return reply;
    });
  }
}
