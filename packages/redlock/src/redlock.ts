import type { Redis } from 'ioredis';
import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  Coordinator,
  type AttemptReport,
  type CoordinatorOptions,
  type MultiLease,
  type NodeVoteAgainst,
} from '@fenced/coordinator';
import { LeaseLostError, LockedError, QuorumUnavailableError } from '@fenced/shared';
import {
  ExecutionError,
  ResourceLockedError,
  type Client,
  type ExecutionResult,
  type ExecutionStats,
} from './errors.js';
import { LongLockKeeper } from './keeper.js';
import { Lock } from './lock.js';

/** redlock v5's settings, with its defaults. */
export interface Settings {
  /** Clock drift allowance as a fraction of the duration. @defaultValue `0.01` */
  readonly driftFactor: number;
  /** Retries after the first attempt; `-1` retries until granted. @defaultValue `10` */
  readonly retryCount: number;
  /** Delay between attempts (ms). @defaultValue `200` */
  readonly retryDelay: number;
  /** Random spread of the delay (ms). @defaultValue `100` */
  readonly retryJitter: number;
  /** `using()` extends the lock when this many ms of validity are left. @defaultValue `500` */
  readonly automaticExtensionThreshold: number;
}

/**
 * Options fenced adds to redlock's settings (constructor only). Anything else of the coordinator's options may be
 * passed too, e.g. `signingKey` (every lock then carries `proofs`) or `unsafeAllowUnsafeNodes` for development
 * nodes without `appendfsync always`.
 */
export type FencedSettings = Partial<
  Omit<CoordinatorOptions, 'nodes' | 'driftFactor' | 'retryDelayMs' | 'retryJitterMs'>
>;

export type RedlockAbortSignal = AbortSignal & { error?: Error };

/** redlock v5's defaults, unchanged. */
export const DEFAULT_REDLOCK_SETTINGS: Readonly<Settings> = Object.freeze({
  driftFactor: 0.01,
  retryCount: 10,
  retryDelay: 200,
  retryJitter: 100,
  automaticExtensionThreshold: 500,
} satisfies Settings);

const SETTING_NAMES = new Set(Object.keys(DEFAULT_REDLOCK_SETTINGS));

/**
 * The maximum TTL a Redlock records when it initializes a fresh cluster (and runs with unless it names `maxTtlMs`):
 * the largest integer a duration can be, so every duration redlock accepts is granted as one lease of that length.
 * Why this weakens none of G1–G5: no token argument rests on the maximum (a node that lost its state is repaired by
 * the sealed repair, which needs no clock and no wait; DESIGN §3), and the guard (G1, G3–G5) never looks at a
 * lease's length. What a long lease costs is liveness only, as in redlock: a holder that dies without releasing
 * keeps its resources unavailable until the lease runs out.
 */
export const REDLOCK_MAX_TTL_MS = Number.MAX_SAFE_INTEGER;

/** The longest delay a Node.js timer holds; longer waits re-arm. */
const MAX_TIMER_MS = 2_147_483_647;

/**
 * The redlock v5 API over a fenced {@link Coordinator}: the same constructor, methods, events and errors, and
 * every lock carries fencing tokens. See the package README for what behaves differently and why.
 */
export class Redlock extends EventEmitter {
  readonly clients: Set<Client>;
  readonly settings: Settings;
  /** The coordinator doing the work (fenced's own API: `inspect`, `acquire` with `autoExtend`, ...). */
  readonly coordinator: Coordinator;
  /** The last error each node's calls failed with (by node index): what a vote against reports. */
  private readonly lastNodeErrors = new Map<number, Error>();
  /** The coordinator's first start-up (see leaseTtl). */
  private started: Promise<void> | undefined;

  constructor(
    clients: Iterable<Client>,
    settings: Partial<Settings> & FencedSettings = {},
    scripts?: unknown,
  ) {
    super();
    // As redlock: an `error` event without listeners must not crash the process.
    this.on('error', () => undefined);
    this.clients = new Set(clients);
    if (this.clients.size === 0) {
      throw new Error('Redlock must be instantiated with at least one redis client.');
    }
    if (scripts !== undefined) {
      throw new Error(
        '@fenced/redlock runs its own scripts (they mint fencing tokens); custom scripts are not supported.',
      );
    }
    const redlockSettings: Record<string, unknown> = {};
    const fencedSettings: Record<string, unknown> = {};
    for (const [name, value] of Object.entries(settings)) {
      if (value === undefined) continue;
      (SETTING_NAMES.has(name) ? redlockSettings : fencedSettings)[name] = value;
    }
    this.settings = Object.freeze({ ...DEFAULT_REDLOCK_SETTINGS, ...(redlockSettings as Partial<Settings>) });
    this.coordinator = new Coordinator({
      // A redlock user does not pick fenced's maximum TTL: unless this process names one, it runs with the one the
      // cluster recorded on its nodes (one that names another is refused, as any fenced process is), and a cluster
      // it initializes records REDLOCK_MAX_TTL_MS, so a duration is granted as asked (see the README, Durations).
      clusterSettings: fencedSettings.maxTtlMs === undefined ? 'adopt' : 'require-match',
      maxTtlMs: REDLOCK_MAX_TTL_MS,
      // redlock's own lease keys: the resource name holding the lock's value (keys/key-layout.ts in the coordinator).
      keyLayout: 'redlock',
      // On nodes recorded in the 'fenced' layout (a Coordinator or the service initialized them) the lock also holds
      // that key beside the cluster's own record and register, so node-redlock workers and this one still exclude
      // each other during a rolling migration, whoever initialized the nodes (README, Keys).
      holdRedlockKey: true,
      ...(fencedSettings as FencedSettings),
      // Recognised by what they can do (any copy of ioredis 4.28+ or 5); a Cluster is one member (DESIGN §3c).
      nodes: [...this.clients] as Redis[],
      driftFactor: this.settings.driftFactor,
      retryDelayMs: this.settings.retryDelay,
      retryJitterMs: this.settings.retryJitter,
    });
    this.coordinator.on('nodeError', ({ node, error }) => {
      const reported = error instanceof Error ? error : new Error(String(error));
      this.lastNodeErrors.set(node, reported);
      this.emit('error', reported);
    });
  }

  /** Closes the coordinator, then runs `quit()` on every client, as redlock does. */
  async quit(): Promise<void> {
    await this.coordinator.close();
    await Promise.all([...this.clients].map((client) => client.quit()));
  }

  /**
   * Acquires a lock on every resource, all or nothing, each with its own fencing token. Makes up to
   * `retryCount + 1` attempts (`-1`: until granted), as redlock does; between two attempts it waits
   * `retryDelay ± retryJitter` ms, and a release of the resource in that time ends the wait at once (fenced's
   * waiters), so the next attempt does not sleep through a free resource. `error.attempts` (and a granted
   * `lock.attempts`) has one entry per attempt, with each node's own vote in the attempt's deciding round.
   *
   * A `duration` above the cluster's maximum TTL (`maxTtlMs`) is granted as a lease of `maxTtlMs` that is kept
   * extended until `duration` is over (see keeper.ts for why the lease itself never lives longer).
   * @throws ExecutionError when not granted within the attempts
   */
  async acquire(resources: string[], duration: number, settings?: Partial<Settings>): Promise<Lock> {
    checkDuration(duration);
    const merged = this.merge(settings);
    const ttlMs = await this.leaseTtl(duration);
    const attempts: Promise<ExecutionStats>[] = [];
    const maxAttempts = merged.retryCount < 0 ? Infinity : merged.retryCount + 1;
    for (let attempt = 1; ; attempt++) {
      const last = attempt >= maxAttempts;
      const delayMs = last ? 0 : retryDelayOf(merged);
      const started = performance.now();
      // Every round the coordinator ran in this attempt; the last one decided it, and its votes are reported.
      const reports: AttemptReport[] = [];
      try {
        // Not the last attempt: wait up to one retry delay for a release (a waiter is woken by it).
        const lease = await this.coordinator.acquire(resources, {
          ttlMs,
          waitMs: delayMs,
          onAttempt: (report) => reports.push(report),
        });
        attempts.push(this.stats(reports.at(-1), null, resources.length));
        return this.lockOf(lease, duration, attempts, merged);
      } catch (error) {
        if (!(error instanceof LockedError || error instanceof QuorumUnavailableError)) throw error;
        attempts.push(this.stats(reports.at(-1), error, resources.length));
        if (last) {
          throw new ExecutionError(
            'The operation was unable to achieve a quorum during its retry window.',
            attempts,
            { cause: error },
          );
        }
        // A quorum shortfall fails at once: sleep what is left of the retry delay before the next attempt.
        const left = delayMs - (performance.now() - started);
        if (left > 0) await sleep(left);
      }
    }
  }

  /**
   * Releases the lock on every node. Unlike redlock, releasing a lock that already expired (or was released)
   * succeeds: there is nothing left to release.
   * @throws ExecutionError when too few nodes confirmed (the lock then expires by itself)
   */
  async release(lock: Lock, _settings?: Partial<Settings>): Promise<ExecutionResult> {
    lock.expiration = 0;
    lock.keeper?.stop();
    const reports: AttemptReport[] = [];
    try {
      await lock.lease.release({ onAttempt: (report) => reports.push(report) });
      return { attempts: [this.stats(reports.at(-1), null, lock.resources.length)] };
    } catch (error) {
      throw this.executionError(error, lock.resources.length, reports.at(-1));
    }
  }

  /**
   * Extends a valid lock to `duration` from now; returns a new Lock and marks `existing` expired, as redlock
   * does. Tokens never change on extension. A `duration` above `maxTtlMs` is kept as in `acquire`.
   * @throws ExecutionError when the lock already expired or was lost (the error's `cause` is a LeaseLostError)
   */
  async extend(existing: Lock, duration: number, settings?: Partial<Settings>): Promise<Lock> {
    checkDuration(duration);
    if (existing.expiration < Date.now() || existing.lease.remainingMs() <= 0) {
      throw new ExecutionError('Cannot extend an already-expired lock.', []);
    }
    const merged = this.merge(settings);
    existing.expiration = 0;
    existing.keeper?.stop();
    const reports: AttemptReport[] = [];
    try {
      await existing.lease.extend(await this.leaseTtl(duration), {
        onAttempt: (report) => reports.push(report),
      });
    } catch (error) {
      throw this.executionError(error, existing.resources.length, reports.at(-1));
    }
    return this.lockOf(
      existing.lease,
      duration,
      [this.stats(reports.at(-1), null, existing.resources.length)],
      merged,
    );
  }

  /**
   * Runs `routine` under a lock that is extended whenever `automaticExtensionThreshold` ms of validity are left,
   * and always released. When an extension fails, or validity runs out first, `signal` aborts with the error in
   * `signal.error` (an ExecutionError), as in redlock.
   */
  using<T>(
    resources: string[],
    duration: number,
    settings: Partial<Settings>,
    routine?: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T>;
  using<T>(
    resources: string[],
    duration: number,
    routine: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T>;
  async using<T>(
    resources: string[],
    duration: number,
    settingsOrRoutine: Partial<Settings> | ((signal: RedlockAbortSignal) => Promise<T>) | undefined,
    optionalRoutine?: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T> {
    const settings = typeof settingsOrRoutine === 'function' ? undefined : settingsOrRoutine;
    const routine = typeof settingsOrRoutine === 'function' ? settingsOrRoutine : optionalRoutine;
    if (typeof routine !== 'function') throw new Error('using needs a routine to run under the lock.');
    const merged = this.merge(settings);
    if (merged.automaticExtensionThreshold > duration - 100) {
      throw new Error(
        'A lock `duration` must be at least 100ms greater than the `automaticExtensionThreshold` setting.',
      );
    }
    let lock = await this.acquire(resources, duration, merged);
    const controller = new AbortController();
    const signal = controller.signal as RedlockAbortSignal;
    let timer: NodeJS.Timeout | undefined;
    let extension: Promise<void> | undefined;
    let done = false;

    const lose = (error: Error): void => {
      if (signal.aborted) return;
      signal.error = error;
      controller.abort(error);
    };
    // Extend with `threshold` ms of validity left (monotonic, from the lease); retry a quorum shortfall while
    // validity lasts; abort the signal once the lock is lost or its validity ran out.
    const schedule = (): void => {
      if (done) return;
      const remaining = lock.lease.remainingMs();
      if (remaining <= 0) {
        lose(
          new ExecutionError('The lock expired before it could be extended.', [], {
            cause: new LeaseLostError(lock.resources[0]!),
          }),
        );
        return;
      }
      const delay = Math.max(0, remaining - merged.automaticExtensionThreshold);
      // A timer holds at most MAX_TIMER_MS: a longer wait re-arms instead of extending early.
      timer = setTimeout(
        () => {
          if (delay > MAX_TIMER_MS) schedule();
          else extension = extend();
        },
        Math.min(delay, MAX_TIMER_MS),
      );
    };
    const extend = async (): Promise<void> => {
      try {
        lock = await lock.extend(duration);
        schedule();
      } catch (error) {
        if (done) return;
        const cause = error instanceof ExecutionError ? error.cause : error;
        if (cause instanceof QuorumUnavailableError && lock.lease.remainingMs() > 0) {
          timer = setTimeout(
            () => {
              extension = extend();
            },
            Math.min(merged.retryDelay, lock.lease.remainingMs() / 2),
          );
          return;
        }
        lose(error instanceof Error ? error : new Error(String(error)));
      }
    };

    schedule();
    try {
      return await routine(signal);
    } finally {
      done = true;
      clearTimeout(timer);
      await extension?.catch(() => undefined);
      // A failed release only delays the next holder by the remaining validity; never mask the routine's outcome.
      await lock.release().catch(() => undefined);
    }
  }

  /**
   * The lease ttl for a requested duration: the duration, or the cluster's maximum when it is longer. Read once
   * the coordinator has started, so a maximum it takes from the nodes is the one used. A failed start-up is not
   * reported here: the acquire that follows reports it in redlock's shape.
   */
  private async leaseTtl(duration: number): Promise<number> {
    this.started ??= this.coordinator.ready().catch(() => undefined);
    await this.started;
    return Math.min(duration, this.coordinator.settings.maxTtlMs);
  }

  /**
   * A Lock over a lease that was just granted or extended to `leaseTtl(duration)`. Its `expiration` is the end of
   * the requested duration, less the time the grant took and the drift (as redlock computes it); a duration
   * above the lease's ttl gets a keeper that extends the lease until then.
   */
  private lockOf(
    lease: MultiLease,
    duration: number,
    attempts: ReadonlyArray<Promise<ExecutionStats>>,
    settings: Settings,
  ): Lock {
    const remaining = Math.max(0, lease.remainingMs());
    const beyondLease = duration - lease.ttlMs;
    const lock = new Lock(
      this,
      lease,
      attempts,
      Date.now() + Math.floor(remaining + Math.max(0, beyondLease)),
    );
    if (beyondLease > 0) {
      lock.keeper = new LongLockKeeper(
        lease,
        performance.now() + remaining + beyondLease,
        this.coordinator.settings.maxTtlMs,
        settings.retryDelay,
        (error) => {
          lock.expiration = 0;
          this.emit(
            'error',
            new ExecutionError('The lock was lost before its duration was over: an extension failed.', [], {
              cause: error,
            }),
          );
        },
      );
    }
    return lock;
  }

  private merge(settings: Partial<Settings> | undefined): Settings {
    const defined = Object.fromEntries(Object.entries(settings ?? {}).filter(([, v]) => v !== undefined));
    return { ...this.settings, ...(defined as Partial<Settings>) };
  }

  /**
   * One attempt's entry in redlock's shape, from each node's own reply in it (the coordinator's `AttemptReport`):
   * `votesFor` holds the clients whose node applied the call to every resource; `votesAgainst` maps every other
   * client to what its node said, as redlock v5 reports it: a node whose key for a resource holds another value
   * (acquire) or not this lock's value (extend, release) is a ResourceLockedError "The operation was applied to:
   * k of the n requested resources." (k is 0 for acquire and extend, whose redlock scripts apply to all or none,
   * and the resources released on that node for release); a node whose call failed is the error it failed with; a
   * node that does not vote now is the last error its calls failed with. Resolves once every node answered.
   *
   * Without a report (no node was asked: a release already sent, a start-up that failed before any vote) it falls
   * back to the outcome: every client for when `error` is null; for a quorum shortfall each node that could not
   * vote with its error; for a refusal every client against.
   */
  private stats(
    report: AttemptReport | undefined,
    error: unknown,
    resourceCount: number,
  ): Promise<ExecutionStats> {
    const clients = [...this.clients];
    const quorumSize = Math.floor(clients.length / 2) + 1;
    if (report !== undefined) {
      return report.votes.then((votes) => {
        const votesFor = new Set<Client>();
        const votesAgainst = new Map<Client, Error>();
        votes.forEach((vote, i) => {
          const client = clients[i]!;
          if (vote.vote === 'for') votesFor.add(client);
          else votesAgainst.set(client, this.voteError(vote, i, report.operation, resourceCount));
        });
        return { membershipSize: clients.length, quorumSize, votesFor, votesAgainst };
      });
    }
    const votesAgainst = new Map<Client, Error>();
    clients.forEach((client, i) => {
      if (error instanceof LockedError) {
        votesAgainst.set(client, lockedError(0, resourceCount));
      } else if (error instanceof QuorumUnavailableError) {
        const reason = error.nodeErrors[i];
        if (reason !== null && reason !== undefined) {
          votesAgainst.set(client, this.lastNodeErrors.get(i) ?? new Error(reason));
        }
      }
    });
    return Promise.resolve({
      membershipSize: clients.length,
      quorumSize,
      votesFor: new Set(error === null ? clients : []),
      votesAgainst,
    });
  }

  /** The error redlock v5 puts in `votesAgainst` for a node's vote against (see `stats`). */
  private voteError(
    vote: NodeVoteAgainst,
    node: number,
    operation: AttemptReport['operation'],
    resourceCount: number,
  ): Error {
    switch (vote.reason) {
      case 'held':
      case 'not-held':
        return lockedError(operation === 'release' ? vote.applied : 0, resourceCount);
      case 'not-voting':
        // The error the node's own calls last failed with (as redlock reports it, e.g. ioredis' "Connection is
        // closed."), else the coordinator's reason why the node does not vote.
        return this.lastNodeErrors.get(node) ?? vote.error;
      case 'error':
        return vote.error;
    }
  }

  /** Fenced's errors in redlock's type; invalid arguments stay as they are (redlock throws plain errors too). */
  private executionError(error: unknown, resourceCount: number, report?: AttemptReport): unknown {
    if (error instanceof LockedError || error instanceof QuorumUnavailableError) {
      return new ExecutionError(
        'The operation was unable to achieve a quorum during its retry window.',
        [this.stats(report, error, resourceCount)],
        { cause: error },
      );
    }
    if (error instanceof LeaseLostError) {
      return new ExecutionError(
        'The lock was lost: it expired or another holder took a resource.',
        report === undefined ? [] : [this.stats(report, error, resourceCount)],
        { cause: error },
      );
    }
    return error;
  }
}

/** redlock v5's ResourceLockedError for a node that applied the call to `applied` of `resourceCount` resources. */
function lockedError(applied: number, resourceCount: number): ResourceLockedError {
  return new ResourceLockedError(
    `The operation was applied to: ${applied} of the ${resourceCount} requested resources.`,
  );
}

function checkDuration(duration: number): void {
  if (Math.floor(duration) !== duration) {
    throw new Error('Duration must be an integer value in milliseconds.');
  }
}

/** redlock's delay between attempts: `retryDelay` plus or minus up to `retryJitter`, never negative. */
function retryDelayOf(settings: Settings): number {
  return Math.max(0, settings.retryDelay + Math.floor((Math.random() * 2 - 1) * settings.retryJitter));
}
