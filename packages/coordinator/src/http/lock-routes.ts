import { formatToken, type LeaseResponseBody } from '@fenced/shared';
import { Router, type Response } from 'express';
import type { Logger } from 'pino';
import type { GrantedLease, LeaseService } from './lease-service.js';
import { createRouteSupport } from './route-support.js';
import { parseOrThrow, type Schemas } from './schemas.js';
import type { ServiceMetrics } from './service-metrics.js';

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
  const { coordinator, schemas, metrics } = deps;
  const router = Router();

  const support = createRouteSupport(deps);
  const observe = support.observe.bind(support);

  router.post('/v1/locks/:resource/leases', async (req, res) => {
    const resource = parseOrThrow(schemas.resource, req.params.resource, 'resource');
    const body = parseOrThrow(schemas.acquireBody, req.body, 'request body');
    await support.serverSideAcquire(
      res,
      'acquire',
      (signal) => coordinator.acquire(resource, { ttlMs: body.ttlMs, waitMs: body.waitMs ?? 0, signal }),
      (lease) => coordinator.release(lease.resource, lease.id),
      (lease) => sendLease(res, 201, lease),
    );
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
