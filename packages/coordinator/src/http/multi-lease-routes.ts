import {
  QuorumUnavailableError,
  formatToken,
  isFencedError,
  type MultiLeaseResponseBody,
} from '@fenced/shared';
import { Router, type Response } from 'express';
import { lockOrder } from '../multi-lease.js';
import type { GrantedMultiLease } from './lease-service.js';
import { denialReason, errorOutcome, type LockRoutesDeps } from './lock-routes.js';
import { safeError } from './request-log.js';
import { parseOrThrow } from './schemas.js';
import type { DenialReason, ServiceMetrics } from './service-metrics.js';

/**
 * The `/v1/leases` routes: one lease over several resources, granted all or nothing (protocol/multi-acquire.ts),
 * each resource with its own token, all under one lease id. The service keeps no state: extend and release name
 * the resources again, and the lease id is the capability, as on the single-resource routes.
 */
export function multiLeaseRoutes(deps: LockRoutesDeps): Router {
  const { coordinator, schemas, metrics, logger, shutdownSignal } = deps;
  const router = Router();

  const inProgress = new Set<AbortController>();
  shutdownSignal.addEventListener(
    'abort',
    () => {
      for (const controller of inProgress) controller.abort(shutdownSignal.reason);
    },
    { once: true },
  );

  router.post('/v1/leases', async (req, res) => {
    const body = parseOrThrow(schemas.multiAcquireBody, req.body, 'request body');
    const resources = lockOrder(body.resources);
    const timer = metrics.operationSeconds.startTimer({ operation: 'acquire_many' });

    // As for one resource: a client that goes away stops the wait, and a lease granted anyway is released.
    const cancel = new AbortController();
    let clientGone = false;
    let lease: GrantedMultiLease | undefined;
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
      lease = await coordinator.acquire(resources, {
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
    sendMultiLease(res, 201, lease);

    function deny(reason: DenialReason): void {
      metrics.denials.inc({ reason });
      if (reason === 'quorum_unavailable') metrics.quorumFailures.inc({ operation: 'acquire_many' });
      timer({ outcome: reason });
    }
  });

  router.post('/v1/leases/:leaseId/extend', async (req, res) => {
    const leaseId = parseOrThrow(schemas.leaseId, req.params.leaseId, 'leaseId');
    const body = parseOrThrow(schemas.multiExtendBody, req.body, 'request body');
    const resources = lockOrder(body.resources);
    const lease = await observe('extend_many', metrics.extends, 'extended', () =>
      coordinator.extend(resources, leaseId, body.ttlMs),
    );
    sendMultiLease(res, 200, lease);
  });

  router.delete('/v1/leases/:leaseId', async (req, res) => {
    const leaseId = parseOrThrow(schemas.leaseId, req.params.leaseId, 'leaseId');
    const body = parseOrThrow(schemas.multiReleaseBody, req.body, 'request body');
    const resources = lockOrder(body.resources);
    await observe('release_many', metrics.releases, 'released', () =>
      coordinator.release(resources, leaseId),
    );
    res.status(204).end();
  });

  return router;

  async function observe<T>(
    operation: string,
    outcomes: ServiceMetrics['extends'],
    success: string,
    call: () => Promise<T>,
  ): Promise<T> {
    const timer = metrics.operationSeconds.startTimer({ operation });
    try {
      const result = await call();
      outcomes.inc({ outcome: success });
      timer({ outcome: success });
      return result;
    } catch (error) {
      const outcome = errorOutcome(error);
      outcomes.inc({ outcome });
      if (outcome === 'quorum_unavailable') metrics.quorumFailures.inc({ operation });
      timer({ outcome });
      throw error;
    }
  }

  async function releaseAbandoned(lease: GrantedMultiLease): Promise<void> {
    metrics.grantsReleasedAfterDisconnect.inc();
    try {
      await coordinator.release(lease.resources, lease.id);
    } catch (error) {
      logger.warn({ err: safeError(error) }, 'could not release a lease granted after its client went away');
    }
  }
}

function sendMultiLease(res: Response, status: 200 | 201, lease: GrantedMultiLease): void {
  const body: MultiLeaseResponseBody = {
    resources: [...lease.resources],
    leaseId: lease.id,
    tokens: Object.fromEntries([...lease.tokens].map(([resource, token]) => [resource, formatToken(token)])),
    ...(lease.proofs !== undefined ? { proofs: Object.fromEntries(lease.proofs) } : {}),
    ttlMs: lease.ttlMs,
    validityMs: Math.floor(lease.validityMs),
    expiresAt: lease.expiresAt.toISOString(),
  };
  res.status(status).json(body);
}
