import fs from 'node:fs/promises';

/**
 * What happened to one operation, Jepsen style: an `invoke` when a process starts it, then exactly one of
 * `ok` (it took effect), `fail` (it certainly did not) or `unknown` (it may have: a timeout, a lost reply).
 * An invoke without a completion counts as `unknown`.
 */
export type EventKind = 'invoke' | 'ok' | 'fail' | 'unknown';

/** Operations the checkers know; any other name may be recorded too. */
export type KnownOp = 'acquire' | 'release' | 'extend' | 'write' | 'read' | 'increment';
export type Op = KnownOp | (string & {});

/** The facts an event may carry. All optional: record what the operation knows. */
export interface EventFields {
  token?: bigint;
  leaseId?: string;
  /** Operation id of a guarded write (G5). */
  opId?: string;
  /** Value written, read, or returned (a counter's new value, a read's result...). */
  value?: unknown;
  /** Lease validity granted by an acquire or extend, for the overlap report. */
  validityMs?: number;
  /** Error code or message of a `fail`/`unknown`. */
  error?: string;
}

export interface HistoryEvent extends EventFields {
  readonly kind: EventKind;
  /** Who: a client or worker name. One process runs one operation at a time, unless `call` links events. */
  readonly process: string;
  readonly op: Op;
  readonly resource: string;
  /** Monotonic milliseconds (`performance.now()`), comparable within one test process. */
  readonly t: number;
  /** Links a completion to its invoke; absent in hand-made histories, where the process's open invoke is meant. */
  readonly call?: number;
}

/**
 * One committed guarded transaction, in commit order per resource: typically read back at the end of a
 * run from a log table the guarded transaction appends to, so the order is the database's, not a client's.
 */
export interface CommitRecord {
  readonly resource: string;
  readonly token: bigint;
  readonly leaseId?: string;
  readonly opId?: string;
  readonly process?: string;
  readonly value?: unknown;
  /** Commit position (e.g. a sequence assigned under the fence-row lock); the array order when absent. */
  readonly seq?: number;
  /** Monotonic milliseconds, when known. */
  readonly t?: number;
}

/** The plain data every checker reads. Hand-made histories for tests are just this. */
export interface HistoryData {
  readonly events: readonly HistoryEvent[];
  readonly commits: readonly CommitRecord[];
}

/** An invoke paired with its completion; fields of the completion win over those of the invoke. */
export interface Operation extends EventFields {
  readonly process: string;
  readonly op: Op;
  readonly resource: string;
  /** `unknown` also when no completion was recorded. */
  readonly outcome: Exclude<EventKind, 'invoke'>;
  readonly invokedAt: number;
  /** Completion time; `Infinity` when the operation never completed. */
  readonly completedAt: number;
}

/** A started operation: complete it exactly once. */
export interface PendingCall {
  readonly call: number;
  ok(fields?: EventFields): void;
  fail(fields?: EventFields): void;
  unknown(fields?: EventFields): void;
}

export interface HistoryOptions {
  /** Clock for event times. @defaultValue `() => performance.now()` */
  now?: () => number;
}

/**
 * Records a fault run: operations as invoke/completion events, plus commit records. Cheap enough to record
 * every call of a contention storm; checkers run on `data` afterwards.
 *
 * @example
 * const history = new History();
 * const lease = await history.run('p1', 'acquire', 'r', () => locks.acquire('r'), (l) => ({ token: l.token, leaseId: l.id }));
 */
export class History implements HistoryData {
  private readonly log: HistoryEvent[] = [];
  private readonly commitLog: CommitRecord[] = [];
  private nextCall = 1;
  private readonly now: () => number;

  constructor(options: HistoryOptions = {}) {
    this.now = options.now ?? (() => performance.now());
  }

  get events(): readonly HistoryEvent[] {
    return this.log;
  }

  get commits(): readonly CommitRecord[] {
    return this.commitLog;
  }

  invoke(process: string, op: Op, resource: string, fields: EventFields = {}): PendingCall {
    const call = this.nextCall++;
    this.log.push({ ...fields, kind: 'invoke', process, op, resource, t: this.now(), call });
    let done = false;
    const complete =
      (kind: Exclude<EventKind, 'invoke'>) =>
      (more: EventFields = {}): void => {
        if (done) throw new Error(`call ${call} (${process} ${op} ${resource}) completed twice`);
        done = true;
        this.log.push({ ...more, kind, process, op, resource, t: this.now(), call });
      };
    return { call, ok: complete('ok'), fail: complete('fail'), unknown: complete('unknown') };
  }

  /**
   * Runs `fn` as one recorded operation: `ok` with `describe(result)` when it resolves; when it throws,
   * `classify(error)` decides `fail` or `unknown` (default: `unknown`, the safe answer for a checker, since
   * an error does not prove the operation had no effect). Rethrows the error.
   */
  async run<T>(
    process: string,
    op: Op,
    resource: string,
    fn: () => Promise<T>,
    describe: (result: T) => EventFields = () => ({}),
    options: { fields?: EventFields; classify?: (error: unknown) => 'fail' | 'unknown' } = {},
  ): Promise<T> {
    const pending = this.invoke(process, op, resource, options.fields);
    let result: T;
    try {
      result = await fn();
    } catch (error) {
      const kind = options.classify?.(error) ?? 'unknown';
      pending[kind]({ error: describeError(error) });
      throw error;
    }
    pending.ok(describe(result));
    return result;
  }

  /** Adds one committed guarded transaction (in commit order, or with `seq`). */
  commit(record: CommitRecord): void {
    this.commitLog.push(record);
  }

  /** Plain data for the checkers, and a snapshot that later recording does not change. */
  get data(): HistoryData {
    return { events: [...this.log], commits: [...this.commitLog] };
  }

  /** Writes the history as JSON (tokens as decimal strings), for a failing run's post-mortem. */
  async dump(file: string): Promise<void> {
    await fs.writeFile(file, toJson(this), 'utf8');
  }
}

/** JSON with bigints as decimal strings. */
export function toJson(history: HistoryData): string {
  return JSON.stringify(
    { events: history.events, commits: history.commits },
    (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value),
    2,
  );
}

function describeError(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? `${code}: ${error.message}` : error.message;
  }
  return String(error);
}

/**
 * Pairs every invoke with its completion: by `call` when recorded, else with the same process's open
 * invoke of the same op and resource (one operation at a time per process). Completions without an invoke
 * become operations invoked at their own time. Sorted by invoke time.
 */
export function operations(history: HistoryData): Operation[] {
  const byCall = new Map<number, HistoryEvent>();
  const openByProcess = new Map<string, HistoryEvent[]>();
  const result: Operation[] = [];
  const pairs: [HistoryEvent, HistoryEvent | null][] = [];
  const paired = new Set<HistoryEvent>();
  const slot = (e: HistoryEvent): string => `${e.process}\u0000${e.op}\u0000${e.resource}`;

  for (const event of history.events) {
    if (event.kind === 'invoke') {
      if (event.call !== undefined) byCall.set(event.call, event);
      else {
        const open = openByProcess.get(slot(event)) ?? [];
        open.push(event);
        openByProcess.set(slot(event), open);
      }
      continue;
    }
    let invoke: HistoryEvent | undefined;
    if (event.call !== undefined) invoke = byCall.get(event.call);
    else invoke = openByProcess.get(slot(event))?.shift();
    if (invoke && !paired.has(invoke)) {
      paired.add(invoke);
      pairs.push([invoke, event]);
    } else {
      pairs.push([{ ...event, kind: 'invoke' }, event]);
    }
  }
  for (const event of history.events)
    if (event.kind === 'invoke' && !paired.has(event)) pairs.push([event, null]);

  for (const [invoke, completion] of pairs) {
    const { kind: _i, t: invokedAt, call: _c, ...invokeFields } = invoke;
    const completionFields = completion ? stripMeta(completion) : {};
    result.push({
      ...invokeFields,
      ...completionFields,
      process: invoke.process,
      op: invoke.op,
      resource: invoke.resource,
      outcome: completion ? (completion.kind as Operation['outcome']) : 'unknown',
      invokedAt,
      completedAt: completion ? completion.t : Infinity,
    });
  }
  return result.sort((a, b) => a.invokedAt - b.invokedAt);
}

function stripMeta(event: HistoryEvent): EventFields {
  const fields: EventFields = {};
  if (event.token !== undefined) fields.token = event.token;
  if (event.leaseId !== undefined) fields.leaseId = event.leaseId;
  if (event.opId !== undefined) fields.opId = event.opId;
  if (event.value !== undefined) fields.value = event.value;
  if (event.validityMs !== undefined) fields.validityMs = event.validityMs;
  if (event.error !== undefined) fields.error = event.error;
  return fields;
}
