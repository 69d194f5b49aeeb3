import { ErrorCode, LeaseLostError, isFencedError } from '@fenced/shared';
import { MAX_TIMER_MS } from '../quorum/timer-limit.js';

export interface LeaseKeeper {
  /** Aborted with a LeaseLostError once the lease cannot be kept. */
  readonly signal: AbortSignal;
  stop(): void;
}

/** What the keeper needs of a lease: the library's leases and the HTTP client's leases both have it. */
export interface KeptLease {
  readonly resource: string;
  /** Validity at grant or at the last extension. */
  readonly validityMs: number;
  remainingMs(): number;
  extend(ttlMs?: number): Promise<void>;
}

export interface KeepAliveOptions {
  /** Delay between retries of an extension that failed without losing the lease (too few nodes, a network error). */
  readonly retryDelayMs: number;
  /** Extend when this fraction of the validity is left (0 < fraction < 1). */
  readonly extendAtRemainingFraction: number;
}

/**
 * The one keep-alive loop of every lease (the library's `autoExtend` and `using()`, the HTTP client's likewise):
 * extends when `extendAtRemainingFraction` of the validity is left; an extension that failed without reporting
 * the lease lost (too few nodes answered, the service was unreachable) is retried while validity remains, since
 * the lease may still be ours; `signal` aborts with a LeaseLostError when an extension reports the lease lost or
 * the validity runs out first.
 */
export function keepLeaseAlive(lease: KeptLease, options: KeepAliveOptions): LeaseKeeper {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;

  const lose = (reason: unknown): void => {
    if (stopped || controller.signal.aborted) return;
    clearTimeout(timer);
    controller.abort(reason);
  };

  const schedule = (delayMs: number): void => {
    if (stopped || controller.signal.aborted) return;
    clearTimeout(timer);
    // A timer holds at most MAX_TIMER_MS: a lease longer than that is extended early, which only costs a call.
    timer = setTimeout(() => void extend(), Math.min(Math.max(0, delayMs), MAX_TIMER_MS));
  };

  const nextExtension = (): number =>
    lease.remainingMs() - lease.validityMs * options.extendAtRemainingFraction;

  const extend = async (): Promise<void> => {
    if (lease.remainingMs() <= 0) {
      lose(new LeaseLostError(lease.resource, 'the lease expired before it could be extended'));
      return;
    }
    try {
      await lease.extend();
      schedule(nextExtension());
    } catch (error) {
      if (stopped) return;
      const lost = isFencedError(error) && error.code === ErrorCode.LEASE_LOST;
      // Not reported lost: the lease may still be ours, so keep trying while validity remains.
      if (!lost && lease.remainingMs() > 0) {
        schedule(Math.min(options.retryDelayMs, lease.remainingMs() / 2));
        return;
      }
      lose(
        error instanceof LeaseLostError
          ? error
          : new LeaseLostError(lease.resource, 'the lease could not be extended', { cause: error }),
      );
    }
  };

  schedule(nextExtension());
  return {
    signal: controller.signal,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
