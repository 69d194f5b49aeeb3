import { LeaseLostError } from '@fenced/shared';
import { MAX_TIMER_MS } from '../quorum/timer-limit.js';
import { keepLeaseAlive, type KeptLease, type LeaseKeeper } from './keep-lease-alive.js';

/**
 * What a lease watch needs of its lease. `resource` names the lease in errors (the first resource of a set).
 * Pure: no Redis, no HTTP, so the library's leases and the HTTP client's leases share it.
 */
export type WatchedLease = KeptLease;

/** The options of an acquire that concern the watch. */
export interface LeaseWatchOptions {
  /**
   * Keep the lease extended in the background until it is released (keep-lease-alive.ts: an extension when
   * `extendAtRemainingFraction` of the validity is left; an extension that failed without the lease being reported
   * lost is retried while validity remains). `lease.signal` aborts with a LeaseLostError when an extension fails
   * for good or the validity runs out first. The keeper stops on release, `await using` disposal, loss, and the
   * owner's `close()`. Without it the lease lives for its ttl unless you call `extend()`.
   * @defaultValue `false`
   */
  autoExtend?: boolean;
  /**
   * Called once, with the LeaseLostError that aborts `lease.signal`, when the lease is lost while held (never on
   * release). Runs synchronously from a timer or an extension: keep it short, and do not throw.
   */
  onLost?: (error: LeaseLostError) => void;
  /**
   * With `autoExtend`: extend when this fraction of the validity is left. Smaller leaves fewer extensions but less
   * room for a slow or retried extension before the lease runs out.
   * @defaultValue `0.5`
   */
  extendAtRemainingFraction?: number;
}

/**
 * The options of every acquire, in the library (`Coordinator`) and in the HTTP client (`CoordinatorClient`)
 * alike: the lease, how long to wait for it, and how it is watched.
 */
export interface AcquireOptions extends LeaseWatchOptions {
  /** Lease time to live, an integer number of ms up to the cluster's maximum ttl. */
  ttlMs: number;
  /** How long to keep trying while another holder has the resource. @defaultValue `0` */
  waitMs?: number;
  /** Aborts the wait; the acquire then rejects with the signal's reason (a lease granted meanwhile is released). */
  signal?: AbortSignal;
}

/** Where watches live while they hold a timer: the owner (a coordinator or client) stops them on close. */
export interface LeaseWatchContext {
  /** Delay between extension retries after a QuorumUnavailableError. */
  readonly retryDelayMs: number;
  /** Watches that hold a timer; a watch adds itself while it does, and removes itself when it stops. */
  readonly live: Set<LeaseWatch>;
}

/**
 * The loss signal of one lease, and for `autoExtend` leases the keeper that extends it.
 *
 * `signal` aborts, once, with a LeaseLostError when the lease is known to be gone while it was held:
 * - an extension reported it lost (another holder, or it expired on a majority),
 * - its validity ran out before an extension succeeded (an expiry timer, independent of an extension still in
 *   flight: an extension blocked by paused nodes cannot delay the abort past the lease's own end),
 * - the owner was closed while the lease was kept (nobody can extend or release it after that).
 *
 * Releasing a lease stops the watch without aborting the signal: a released lease was not lost, and `onLost`
 * is for losses only. Without `autoExtend` the expiry timer is armed only once somebody reads `signal`, so a
 * lease nobody watches costs no timer.
 *
 * Every timer is cleared on release (and `await using` disposal), on loss, and by `closeAll()`.
 */
export class LeaseWatch {
  private readonly controller = new AbortController();
  private keeper: LeaseKeeper | undefined;
  private expiry: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly lease: WatchedLease,
    private readonly context: LeaseWatchContext,
    private readonly options: LeaseWatchOptions = {},
  ) {}

  /** The loss signal; reading it arms the expiry timer of a lease that is not auto-extended. */
  get signal(): AbortSignal {
    this.armExpiry();
    return this.controller.signal;
  }

  /** Whether a keeper is extending the lease in the background right now. */
  get autoExtending(): boolean {
    return this.keeper !== undefined;
  }

  /** Whether this watch holds a timer (a keeper or an expiry timer). */
  get active(): boolean {
    return this.keeper !== undefined || this.expiry !== undefined;
  }

  /** Starts the keeper of an `autoExtend` lease; call once the lease is granted. */
  start(): void {
    if (this.options.autoExtend !== true || this.stopped) return;
    const keeper = keepLeaseAlive(this.lease, {
      retryDelayMs: this.context.retryDelayMs,
      extendAtRemainingFraction: this.options.extendAtRemainingFraction ?? 0.5,
    });
    this.keeper = keeper;
    keeper.signal.addEventListener('abort', () => this.lost(keeper.signal.reason), { once: true });
    this.context.live.add(this);
    this.armExpiry();
  }

  /** The lease was extended: move the expiry timer to its new end. */
  extended(): void {
    if (this.expiry === undefined) return;
    clearTimeout(this.expiry);
    this.expiry = undefined;
    this.armExpiry();
  }

  /** The lease is gone: abort the signal and call `onLost`, once; stop every timer. */
  lost(reason: unknown): void {
    if (this.stopped || this.controller.signal.aborted) return;
    const error =
      reason instanceof LeaseLostError
        ? reason
        : new LeaseLostError(this.lease.resource, 'the lease can no longer be kept', { cause: reason });
    this.clearTimers();
    this.controller.abort(error);
    try {
      this.options.onLost?.(error);
    } catch {
      // A throwing callback must not break the lease; its error has nowhere to go.
    }
  }

  /** Released: stop every timer; the signal stays as it is. */
  stop(): void {
    this.stopped = true;
    this.clearTimers();
  }

  /** The owner is closing: a kept or watched lease can no longer be extended, so it is lost. */
  close(cause: Error): void {
    if (!this.active) return;
    this.lost(
      new LeaseLostError(
        this.lease.resource,
        'closed while keeping the lease: it is no longer extended and runs out at its ttl',
        { cause },
      ),
    );
  }

  private armExpiry(): void {
    if (this.stopped || this.controller.signal.aborted || this.expiry !== undefined) return;
    const remaining = this.lease.remainingMs();
    if (remaining <= 0) {
      this.lost(new LeaseLostError(this.lease.resource, 'the lease ran out before it was extended'));
      return;
    }
    this.context.live.add(this);
    // +1: a timer may fire a little early on some platforms; re-arm when the lease was extended meanwhile.
    this.expiry = setTimeout(
      () => {
        this.expiry = undefined;
        this.armExpiry();
      },
      // A timer holds at most MAX_TIMER_MS; a longer lease re-arms when it fires.
      Math.min(Math.ceil(remaining) + 1, MAX_TIMER_MS),
    );
    // A lease left unreleased must not keep the process alive through its watch.
    this.expiry.unref();
  }

  private clearTimers(): void {
    clearTimeout(this.expiry);
    this.expiry = undefined;
    this.keeper?.stop();
    this.keeper = undefined;
    this.context.live.delete(this);
  }
}

/** Closes every live watch of an owner (`coordinator.close()`, `client.close()`). */
export function closeAllWatches(live: Set<LeaseWatch>, cause: Error): void {
  for (const watch of [...live]) watch.close(cause);
  live.clear();
}
