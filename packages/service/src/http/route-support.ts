import { ErrorCode, QuorumUnavailableError, isFencedError } from '@fenced/shared';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { safeError, type RequestLog } from './request-log.js';
import type { DenialReason, ServiceMetrics } from './service-metrics.js';

/** What both lease routers (`/v1/locks`, `/v1/leases`) do the same way: waits on the server, and timed calls. */
export interface RouteSupport {
  /**
   * Runs an acquire that waits on the server. When the client goes away the wait stops, and a lease granted
   * anyway (the grant raced the disconnect) or whose response never left is released at once: nobody knows its
   * id, so it could only block its resources until its TTL ran out. Shutdown ends waiting acquires with 503 so
   * clients retry elsewhere, and acquires arriving during the drain get the same 503 at once. `waits`: the
   * acquire has a `waitMs` (only then is there a wait to cancel). Sends the lease with `send`, or nothing when
   * the client is gone.
   */
  serverSideAcquire<L>(
    request: FastifyRequest,
    reply: FastifyReply,
    operation: string,
    waits: boolean,
    acquire: (signal: AbortSignal | undefined) => Promise<L>,
    release: (lease: L) => Promise<void>,
    send: (lease: L) => void,
  ): Promise<void>;
  /** Times one call and counts its outcome (`outcomes` null: time it only). */
  observe<T>(
    operation: string,
    outcomes: ServiceMetrics['extends'] | null,
    success: string,
    call: () => Promise<T>,
  ): Promise<T>;
}

export function createRouteSupport(deps: {
  metrics: ServiceMetrics;
  logger: Logger;
  requestLog: RequestLog;
  shutdownSignal: AbortSignal;
}): RouteSupport {
  const { metrics, logger, requestLog, shutdownSignal } = deps;

  // Acquires in progress, each with its own controller. Shutdown aborts them one by one (rather than every
  // request combining its signal with the long-lived shutdown signal through AbortSignal.any, which keeps a
  // reference per request on that signal).
  const inProgress = new Set<AbortController>();
  shutdownSignal.addEventListener(
    'abort',
    () => {
      for (const controller of inProgress) controller.abort(shutdownSignal.reason);
    },
    { once: true },
  );

  return {
    async serverSideAcquire(request, reply, operation, waits, acquire, release, send) {
      const timer = metrics.operationSeconds.startTimer({ operation });
      if (shutdownSignal.aborted) {
        deny(metrics, operation, timer, 'shutting_down');
        throw shuttingDown();
      }
      // Only a wait can be cancelled: an acquire without one is a single attempt, over in a round trip.
      const cancel = waits ? new AbortController() : undefined;
      let clientGone = false;
      let granted: { lease: Parameters<typeof release>[0] } | undefined;
      const res = reply.raw;
      res.once('close', () => {
        if (res.writableFinished) return;
        clientGone = true;
        requestLog.aborted(request, reply);
        cancel?.abort(new Error('client disconnected'));
        if (granted) void releaseAfterDisconnect(metrics, logger, release, granted.lease);
      });

      if (cancel) inProgress.add(cancel);
      metrics.acquiresInFlight.inc();
      try {
        granted = { lease: await acquire(cancel?.signal) };
      } catch (error) {
        if (clientGone) {
          deny(metrics, operation, timer, 'client_disconnected');
          return;
        }
        if (shutdownSignal.aborted && !isFencedError(error)) {
          deny(metrics, operation, timer, 'shutting_down');
          throw shuttingDown();
        }
        deny(metrics, operation, timer, denialReason(error));
        throw error;
      } finally {
        if (cancel) inProgress.delete(cancel);
        metrics.acquiresInFlight.dec();
      }

      if (clientGone) {
        timer({ outcome: 'client_disconnected' });
        await releaseAfterDisconnect(metrics, logger, release, granted.lease);
        return;
      }
      metrics.grants.inc();
      timer({ outcome: 'granted' });
      send(granted.lease);
    },

    async observe(operation, outcomes, success, call) {
      const timer = metrics.operationSeconds.startTimer({ operation });
      try {
        const result = await call();
        outcomes?.inc({ outcome: success });
        timer({ outcome: success });
        return result;
      } catch (error) {
        const outcome = errorOutcome(error);
        outcomes?.inc({ outcome });
        if (outcome === 'quorum_unavailable') metrics.quorumFailures.inc({ operation });
        timer({ outcome });
        throw error;
      }
    },
  };
}

/** The 503 of a service that drains: its message is the service's own, sent to clients as it is. */
export class ShuttingDownError extends QuorumUnavailableError {
  constructor() {
    super('the service is shutting down; retry (another instance)');
  }
}

function shuttingDown(): ShuttingDownError {
  return new ShuttingDownError();
}

function deny(
  metrics: ServiceMetrics,
  operation: string,
  timer: (labels: { outcome: string }) => number,
  reason: DenialReason,
): void {
  metrics.denials.inc({ reason });
  if (reason === 'quorum_unavailable') metrics.quorumFailures.inc({ operation });
  timer({ outcome: reason });
}

/** Releases a lease nobody will ever know the id of; on failure it ends at its TTL. */
async function releaseAfterDisconnect<L>(
  metrics: ServiceMetrics,
  logger: Logger,
  release: (lease: L) => Promise<void>,
  lease: L,
): Promise<void> {
  metrics.grantsReleasedAfterDisconnect.inc();
  try {
    await release(lease);
  } catch (error) {
    // The lease then ends at its TTL; the guard keeps the data safe either way.
    logger.warn({ err: safeError(error) }, 'could not release a lease granted after its client went away');
  }
}

/** The outcome label of a failed call, for metrics. */
export function errorOutcome(error: unknown): string {
  if (!isFencedError(error)) return 'internal';
  switch (error.code) {
    case ErrorCode.LEASE_LOST:
      return 'lost';
    case ErrorCode.LOCKED:
      return 'locked';
    case ErrorCode.QUORUM_UNAVAILABLE:
      return 'quorum_unavailable';
    case ErrorCode.INVALID_REQUEST:
      return 'invalid_request';
    default:
      return 'internal';
  }
}

/** Why an acquire was denied, for metrics. */
export function denialReason(error: unknown): DenialReason {
  const outcome = errorOutcome(error);
  return outcome === 'lost' ? 'internal' : (outcome as DenialReason);
}
