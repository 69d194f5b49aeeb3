import { ErrorCode, LeaseLostError, isFencedError } from '@fenced/shared';
import type { ClientLease } from './client-lease.js';

/**
 * Extends `lease` whenever `fraction` of its validity is left. Transient failures are retried (the client
 * already retries 503s) until the validity runs out; then, or on `LeaseLostError`, `onLost` is called once.
 */
export function keepAlive(
  lease: ClientLease,
  fraction: number,
  onLost: (reason: LeaseLostError) => void,
): { stop(): Promise<void> } {
  const stopped = new AbortController();
  const loop = (async () => {
    let lastError: unknown;
    while (!stopped.signal.aborted) {
      const remaining = lease.remainingMs();
      if (remaining <= 0) {
        onLost(
          new LeaseLostError(lease.resource, 'the lease ran out before it could be extended', {
            cause: lastError,
          }),
        );
        return;
      }
      const wait =
        lastError === undefined ? remaining - lease.validityMs * fraction : Math.min(remaining, 50);
      try {
        await sleep(Math.max(0, wait), stopped.signal);
        await lease.extend(undefined, stopped.signal);
        lastError = undefined;
      } catch (error) {
        if (stopped.signal.aborted) return;
        if (isFencedError(error) && error.code === ErrorCode.LEASE_LOST) {
          onLost(error as LeaseLostError);
          return;
        }
        lastError = error;
      }
    }
  })();
  return {
    async stop() {
      stopped.abort();
      await loop;
    },
  };
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
