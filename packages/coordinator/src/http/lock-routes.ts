import {
  ErrorCode,
  QuorumUnavailableError,
  formatToken,
  isFencedError,
  type LeaseResponseBody,
} from '@fenced/shared';
import { Router, type Response } from 'express';
import type { Logger } from 'pino';
import type { GrantedLease, LeaseService } from './lease-service.js';
import { safeError } from './request-log.js';
import { parseOrThrow, type Schemas } from './schemas.js';
import type { DenialReason, ServiceMetrics } from './service-metrics.js';

export interface LockRoutesDeps {
  coordinator: LeaseService;
  schemas: Schemas;
  metrics: ServiceMetrics;
  logger: Logger;
  /** Aborted when the server shuts down: waiting acquires then end with 503 so clients retry elsewhere. */
  shutdownSignal: AbortSignal;
}

/** The `/v1/locks` routes of DESIGN §5. */
export function lockRoutes(deps: LockRoutesDeps): Router {
  const { coordinator, schemas, metrics, logger, shutdownSignal } = deps;
  const router = Router();

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

  router.post('/v1/locks/:resource/leases', async (req, res) => {
    const resource = parseOrThrow(schemas.resource, req.params.resource, 'resource');
    const body = parseOrThrow(schemas.acquireBody, req.body, 'request body');
    const timer = metrics.operationSeconds.startTimer({ operation: 'acquire' });

    // The wait happens here, on the server. When the client goes away we stop waiting, and a lease that
    // is granted anyway (the grant raced the disconnect) or whose response never left is released at once:
    // nobody knows its id, so it could only block the resource until its TTL ran out.
    const cancel = new AbortController();
    let clientGone = false;
    let lease: GrantedLease | undefined;
    res.once('close', () => {
      if (res.writableFinished) return;
      clientGone = true;
      cancel.abort(new Error('client disconnected'));
      if (lease) void releaseAbandoned(lease);
    });

    if (shutdownSignal.aborted) cancel.abort(shutdownSignal.reason);
    inProgress.add(cancel);
    metrics.acquiresInFlight.inc();
    try {
      lease = await coordinator.acquire(resource, {
        ttlMs: body.ttlMs,
        waitMs: body.waitMs ?? 0,
        signal: cancel.signal,
      });
    } catch (error) {
      if (clientGone) {
        deny('client_disconnected');
        return;
      }
      if (shutdownSignal.aborted && !isFencedError(error)) {
        deny('shutting_down');
        throw new QuorumUnavailableError('the service is shutting down; retry (another instance)');
      }
      deny(denialReason(error));
      throw error;
    } finally {
      inProgress.delete(cancel);
      metrics.acquiresInFlight.dec();
    }

    if (clientGone) {
      timer({ outcome: 'client_disconnected' });
      await releaseAbandoned(lease);
      return;
    }
    metrics.grants.inc();
    timer({ outcome: 'granted' });
    sendLease(res, 201, lease);

    function deny(reason: DenialReason): void {
      metrics.denials.inc({ reason });
      if (reason === 'quorum_unavailable') metrics.quorumFailures.inc({ operation: 'acquire' });
      timer({ outcome: reason });
    }
  });

  router.post('/v1/locks/:resource/leases/:leaseId/extend', async (req, res) => {
    const resource = parseOrThrow(schemas.resource, req.params.resource, 'resource');
    const leaseId = parseOrThrow(schemas.leaseId, req.params.leaseId, 'leaseId');
    const body = parseOrThrow(schemas.extendBody, req.body, 'request body');
    const lease = await observe('extend', metrics.extends, 'extended', () =>
      coordinator.extend(resource, leaseId, body.ttlMs),
    );
    sendLease(res, 200, lease);
  });

  router.delete('/v1/locks/:resource/leases/:leaseId', async (req, res) => {
    const resource = parseOrThrow(schemas.resource, req.params.resource, 'resource');
    const leaseId = parseOrThrow(schemas.leaseId, req.params.leaseId, 'leaseId');
    await observe('release', metrics.releases, 'released', () => coordinator.release(resource, leaseId));
    res.status(204).end();
  });

  router.get('/v1/locks/:resource', async (req, res) => {
    const resource = parseOrThrow(schemas.resource, req.params.resource, 'resource');
    const status = await observe('inspect', null, 'ok', () => coordinator.inspect(resource));
    res.status(200).json({
      resource,
      held: status.held,
      ...(status.held && status.token !== undefined ? { token: formatToken(status.token) } : {}),
    });
  });

  return router;

  async function observe<T>(
    operation: string,
    outcomes: ServiceMetrics['extends'] | null,
    success: string,
    call: () => Promise<T>,
  ): Promise<T> {
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
  }

  async function releaseAbandoned(lease: GrantedLease): Promise<void> {
    metrics.grantsReleasedAfterDisconnect.inc();
    try {
      await coordinator.release(lease.resource, lease.id);
    } catch (error) {
      // The lease then ends at its TTL; the guard keeps the data safe either way.
      logger.warn({ err: safeError(error) }, 'could not release a lease granted after its client went away');
    }
  }
}

function sendLease(res: Response, status: 200 | 201, lease: GrantedLease): void {
  const body: LeaseResponseBody = {
    resource: lease.resource,
    leaseId: lease.id,
    token: formatToken(lease.token),
    ttlMs: lease.ttlMs,
    validityMs: Math.floor(lease.validityMs),
    expiresAt: lease.expiresAt.toISOString(),
    ...(lease.proof !== undefined ? { proof: lease.proof } : {}),
  };
  res.status(status).json(body);
}

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

export function denialReason(error: unknown): DenialReason {
  const outcome = errorOutcome(error);
  return outcome === 'lost' ? 'internal' : (outcome as DenialReason);
}
