import { formatToken, type MultiLeaseResponseBody } from '@fenced/shared';
import { Router, type Response } from 'express';
import { lockOrder } from '../multi-lease.js';
import type { GrantedMultiLease } from './lease-service.js';
import type { LockRoutesDeps } from './lock-routes.js';
import { createRouteSupport } from './route-support.js';
import { parseOrThrow } from './schemas.js';

/**
 * The `/v1/leases` routes: one lease over several resources, granted all or nothing (protocol/multi-acquire.ts),
 * each resource with its own token, all under one lease id. The service keeps no state: extend and release name
 * the resources again, and the lease id is the capability, as on the single-resource routes.
 */
export function multiLeaseRoutes(deps: LockRoutesDeps): Router {
  const { coordinator, schemas, metrics } = deps;
  const router = Router();

  const support = createRouteSupport(deps);
  const observe = support.observe.bind(support);

  router.post('/v1/leases', async (req, res) => {
    const body = parseOrThrow(schemas.multiAcquireBody, req.body, 'request body');
    const resources = lockOrder(body.resources);
    await support.serverSideAcquire(
      res,
      'acquire_many',
      (signal) => coordinator.acquire(resources, { ttlMs: body.ttlMs, waitMs: body.waitMs ?? 0, signal }),
      (lease) => coordinator.release(lease.resources, lease.id),
      (lease) => sendMultiLease(res, 201, lease),
    );
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
