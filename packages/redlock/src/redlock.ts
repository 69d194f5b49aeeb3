import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import { Coordinator, type CoordinatorOptions, type MultiLease } from '@fenced/coordinator';
import { LeaseLostError, LockedError, QuorumUnavailableError } from '@fenced/shared';
import { ExecutionError, ResourceLockedError, type ExecutionResult, type ExecutionStats } from './errors.js';
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

const MAX_WAIT_MS = 2_147_483_647;
const SETTING_NAMES = new Set(Object.keys(DEFAULT_REDLOCK_SETTINGS));

/**
 * How long fenced waits for what redlock would have tried `retryCount + 1` times: the longest window redlock's
 * retries could span, `retryCount × (retryDelay + retryJitter)`; `-1` waits as long as a timer can. Within the
 * window fenced does not poll: a release wakes the waiter (pub/sub), with the retry delay only as a fallback.
 */
export function waitMsOf(settings: Settings): number {
  if (settings.retryCount < 0) return MAX_WAIT_MS;
  return Math.min(
    MAX_WAIT_MS,
    Math.max(0, settings.retryCount * (settings.retryDelay + settings.retryJitter)),
  );
}

/**
 * The redlock v5 API over a fenced {@link Coordinator}: the same constructor, methods, events and errors, and
 * every lock carries fencing tokens. See the package README for what behaves differently and why.
 */
export class Redlock extends EventEmitter {
  readonly clients: Set<Redis>;
  readonly settings: Settings;
  /** The coordinator doing the work (fenced's own API: `inspect`, `acquire` with `autoExtend`, ...). */
  readonly coordinator: Coordinator;

  constructor(
    clients: Iterable<Redis>,
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
      ...(fencedSettings as FencedSettings),
      nodes: [...this.clients],
      driftFactor: this.settings.driftFactor,
      retryDelayMs: this.settings.retryDelay,
      retryJitterMs: this.settings.retryJitter,
    });
    this.coordinator.on('nodeError', ({ error }) => {
      this.emit('error', error instanceof Error ? error : new Error(String(error)));
    });
  }

  /** Closes the coordinator, then runs `quit()` on every client, as redlock does. */
  async quit(): Promise<void> {
    await this.coordinator.close();
    await Promise.all([...this.clients].map((client) => client.quit()));
  }

  /**
   * Acquires a lock on every resource, all or nothing, each with its own fencing token.
   * @throws ExecutionError when not granted within the retry window or without a quorum
   */
  async acquire(resources: string[], duration: number, settings?: Partial<Settings>): Promise<Lock> {
    checkDuration(duration);
    const merged = this.merge(settings);
    const waitMs = waitMsOf(merged);
    try {
      const lease = await this.coordinator.acquire(resources, { ttlMs: duration, waitMs });
      return new Lock(this, lease, [this.stats(null, 'for')], expirationOf(lease));
    } catch (error) {
      throw this.executionError(error, resources.length);
    }
  }

  /**
   * Releases the lock on every node. Unlike redlock, releasing a lock that already expired (or was released)
   * succeeds: there is nothing left to release.
   * @throws ExecutionError when too few nodes confirmed (the lock then expires by itself)
   */
  async release(lock: Lock, _settings?: Partial<Settings>): Promise<ExecutionResult> {
    lock.expiration = 0;
    try {
      await lock.lease.release();
      return { attempts: [this.stats(null, 'for')] };
    } catch (error) {
      throw this.executionError(error, lock.resources.length);
    }
  }

  /**
   * Extends a valid lock to `duration` from now; returns a new Lock and marks `existing` expired, as redlock
   * does. Tokens never change on extension.
   * @throws ExecutionError when the lock already expired or was lost (the error's `cause` is a LeaseLostError)
   */
  async extend(existing: Lock, duration: number, _settings?: Partial<Settings>): Promise<Lock> {
    checkDuration(duration);
    if (existing.expiration < Date.now() || existing.lease.remainingMs() <= 0) {
      throw new ExecutionError('Cannot extend an already-expired lock.', []);
    }
    existing.expiration = 0;
    try {
      await existing.lease.extend(duration);
    } catch (error) {
      throw this.executionError(error, existing.resources.length);
    }
    return new Lock(this, existing.lease, [this.stats(null, 'for')], expirationOf(existing.lease));
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
      timer = setTimeout(
        () => {
          extension = extend();
        },
        Math.max(0, remaining - merged.automaticExtensionThreshold),
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

  private merge(settings: Partial<Settings> | undefined): Settings {
    const defined = Object.fromEntries(Object.entries(settings ?? {}).filter(([, v]) => v !== undefined));
    return { ...this.settings, ...(defined as Partial<Settings>) };
  }

  /** One summary entry in redlock's shape; `against` maps node errors to the clients, in node order. */
  private stats(error: unknown, vote: 'for' | 'against', resourceCount = 1): Promise<ExecutionStats> {
    const clients = [...this.clients];
    const votesAgainst = new Map<Redis, Error>();
    if (vote === 'against') {
      clients.forEach((client, i) => {
        if (error instanceof LockedError) {
          votesAgainst.set(
            client,
            new ResourceLockedError(
              `The operation was applied to: 0 of the ${resourceCount} requested resources.`,
            ),
          );
        } else if (error instanceof QuorumUnavailableError) {
          const reason = error.nodeErrors[i];
          if (reason !== null && reason !== undefined) votesAgainst.set(client, new Error(reason));
        }
      });
    }
    return Promise.resolve({
      membershipSize: clients.length,
      quorumSize: Math.floor(clients.length / 2) + 1,
      votesFor: new Set(vote === 'for' ? clients : []),
      votesAgainst,
    });
  }

  /** Fenced's errors in redlock's type; invalid arguments stay as they are (redlock throws plain errors too). */
  private executionError(error: unknown, resourceCount: number): unknown {
    if (error instanceof LockedError || error instanceof QuorumUnavailableError) {
      return new ExecutionError(
        'The operation was unable to achieve a quorum during its retry window.',
        [this.stats(error, 'against', resourceCount)],
        { cause: error },
      );
    }
    if (error instanceof LeaseLostError) {
      return new ExecutionError('The lock was lost: it expired or another holder took a resource.', [], {
        cause: error,
      });
    }
    return error;
  }
}

function checkDuration(duration: number): void {
  if (Math.floor(duration) !== duration) {
    throw new Error('Duration must be an integer value in milliseconds.');
  }
}

function expirationOf(lease: MultiLease): number {
  return Date.now() + Math.max(0, Math.floor(lease.remainingMs()));
}
