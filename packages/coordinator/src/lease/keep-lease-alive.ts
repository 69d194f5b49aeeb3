import { LeaseLostError, QuorumUnavailableError } from '@fenced/shared';
import type { Lease } from './lease.js';

export interface LeaseKeeper {
  /** Aborted with a LeaseLostError once the lease cannot be kept, or with the caller's reason. */
  readonly signal: AbortSignal;
  stop(): void;
}

/**
 * Keeps a lease alive for `using()`: extends it when half of its remaining validity is left, retries an
 * extension that found too few nodes while validity remains, and aborts `signal` with a LeaseLostError when the
 * lease is lost or runs out. Aborts too when the caller's own signal aborts.
 */
export function keepLeaseAlive(
  lease: Pick<Lease, 'resource' | 'remainingMs' | 'extend'>,
  options: { retryDelayMs: number; signal?: AbortSignal | undefined },
): LeaseKeeper {
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
    timer = setTimeout(() => void extend(), Math.max(0, delayMs));
  };

  const extend = async (): Promise<void> => {
    if (lease.remainingMs() <= 0) {
      lose(new LeaseLostError(lease.resource, 'the lease expired before it could be extended'));
      return;
    }
    try {
      await lease.extend();
      schedule(lease.remainingMs() / 2);
    } catch (error) {
      if (stopped) return;
      // Too few nodes answered: the lease may still be ours, so keep trying while validity remains.
      if (error instanceof QuorumUnavailableError && lease.remainingMs() > 0) {
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

  const outer = options.signal;
  const onOuterAbort = (): void => lose(outer?.reason);
  if (outer?.aborted) onOuterAbort();
  else outer?.addEventListener('abort', onOuterAbort, { once: true });

  schedule(lease.remainingMs() / 2);
  return {
    signal: controller.signal,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
      outer?.removeEventListener('abort', onOuterAbort);
    },
  };
}
