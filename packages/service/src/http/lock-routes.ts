import { formatToken, type LeaseResponseBody } from '@fenced/shared';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import type { ServedLease, LeaseService } from './lease-service.js';
import type { RequestLog } from './request-log.js';
import { createRouteSupport } from './route-support.js';
import { parseOrThrow, type Schemas } from './schemas.js';
import type { ServiceMetrics } from './service-metrics.js';

export interface LockRoutesDeps {
  coordinator: LeaseService;
  schemas: Schemas;
  metrics: ServiceMetrics;
  logger: Logger;
  requestLog: RequestLog;
  /** Aborted when the server shuts down: waiting acquires then end with 503 so clients retry elsewhere. */
  shutdownSignal: AbortSignal;
}

interface ResourceParams {
  Params: { resource: string };
}
interface LeaseParams {
  Params: { resource: string; leaseId: string };
}

/** The `/v1/locks` routes of DESIGN §5, added to `app` (whose hooks check the API key). */
export function lockRoutes(app: FastifyInstance, deps: LockRoutesDeps): void {
  const { coordinator, schemas, metrics } = deps;
  const support = createRouteSupport(deps);

  app.post<ResourceParams>('/v1/locks/:resource/leases', async (request, reply) => {
    const resource = parseOrThrow(schemas.resource, request.params.resource, 'resource');
    const body = parseOrThrow(schemas.acquireBody, request.body, 'request body');
    await support.serverSideAcquire(
      request,
      reply,
      'acquire',
      (body.waitMs ?? 0) > 0,
      (signal) => coordinator.acquire(resource, { ttlMs: body.ttlMs, waitMs: body.waitMs ?? 0, signal }),
      (lease) => coordinator.release(lease.resource, lease.id),
      (lease) => sendLease(reply, 201, lease),
    );
    return reply;
  });

  app.post<LeaseParams>('/v1/locks/:resource/leases/:leaseId/extend', async (request, reply) => {
    const resource = parseOrThrow(schemas.resource, request.params.resource, 'resource');
    const leaseId = parseOrThrow(schemas.leaseId, request.params.leaseId, 'leaseId');
    const body = parseOrThrow(schemas.extendBody, request.body, 'request body');
    const lease = await support.observe('extend', metrics.extends, 'extended', () =>
      coordinator.extend(resource, leaseId, body.ttlMs),
    );
    sendLease(reply, 200, lease);
    return reply;
  });

  app.delete<LeaseParams>('/v1/locks/:resource/leases/:leaseId', async (request, reply) => {
    const resource = parseOrThrow(schemas.resource, request.params.resource, 'resource');
    const leaseId = parseOrThrow(schemas.leaseId, request.params.leaseId, 'leaseId');
    await support.observe('release', metrics.releases, 'released', () =>
      coordinator.release(resource, leaseId),
    );
    return reply.code(204).send();
  });

  app.get<ResourceParams>('/v1/locks/:resource', async (request, reply) => {
    const resource = parseOrThrow(schemas.resource, request.params.resource, 'resource');
    const status = await support.observe('inspect', null, 'ok', () => coordinator.inspect(resource));
    return reply.code(200).send({
      resource,
      held: status.held,
      ...(status.held && status.token !== undefined ? { token: formatToken(status.token) } : {}),
    });
  });
}

function sendLease(reply: FastifyReply, status: 200 | 201, lease: ServedLease): void {
  const body: LeaseResponseBody = {
    resource: lease.resource,
    leaseId: lease.id,
    token: formatToken(lease.token),
    ttlMs: lease.ttlMs,
    validityMs: Math.floor(lease.validityMs),
    expiresAt: lease.expiresAt.toISOString(),
    ...(lease.proof !== undefined ? { proof: lease.proof } : {}),
  };
  void reply.code(status).send(body);
}
