import { formatToken, type MultiLeaseResponseBody } from '@fenced/shared';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { lockOrder } from '@fenced/coordinator';
import type { ServedMultiLease } from './lease-service.js';
import type { LockRoutesDeps } from './lock-routes.js';
import { createRouteSupport } from './route-support.js';
import { parseOrThrow } from './schemas.js';

interface LeaseParams {
  Params: { leaseId: string };
}

/**
 * The `/v1/leases` routes: one lease over several resources, granted all or nothing (protocol/acquire-within.ts),
 * each resource with its own token, all under one lease id. The service keeps no state: extend and release name
 * the resources again, and the lease id is the capability, as on the single-resource routes.
 */
export function multiLeaseRoutes(app: FastifyInstance, deps: LockRoutesDeps): void {
  const { coordinator, schemas, metrics } = deps;
  const support = createRouteSupport(deps);

  app.post('/v1/leases', async (request, reply) => {
    const body = parseOrThrow(schemas.multiAcquireBody, request.body, 'request body');
    const resources = lockOrder(body.resources);
    await support.serverSideAcquire(
      request,
      reply,
      'acquire_many',
      (body.waitMs ?? 0) > 0,
      (signal) => coordinator.acquire(resources, { ttlMs: body.ttlMs, waitMs: body.waitMs ?? 0, signal }),
      (lease) => coordinator.release(lease.resources, lease.id),
      (lease) => sendMultiLease(reply, 201, lease),
    );
    return reply;
  });

  app.post<LeaseParams>('/v1/leases/:leaseId/extend', async (request, reply) => {
    const leaseId = parseOrThrow(schemas.leaseId, request.params.leaseId, 'leaseId');
    const body = parseOrThrow(schemas.multiExtendBody, request.body, 'request body');
    const resources = lockOrder(body.resources);
    const lease = await support.observe('extend_many', metrics.extends, 'extended', () =>
      coordinator.extend(resources, leaseId, body.ttlMs),
    );
    sendMultiLease(reply, 200, lease);
    return reply;
  });

  app.delete<LeaseParams>('/v1/leases/:leaseId', async (request, reply) => {
    const leaseId = parseOrThrow(schemas.leaseId, request.params.leaseId, 'leaseId');
    const body = parseOrThrow(schemas.multiReleaseBody, request.body, 'request body');
    const resources = lockOrder(body.resources);
    await support.observe('release_many', metrics.releases, 'released', () =>
      coordinator.release(resources, leaseId),
    );
    return reply.code(204).send();
  });
}

function sendMultiLease(reply: FastifyReply, status: 200 | 201, lease: ServedMultiLease): void {
  const body: MultiLeaseResponseBody = {
    resources: [...lease.resources],
    leaseId: lease.id,
    tokens: Object.fromEntries([...lease.tokens].map(([resource, token]) => [resource, formatToken(token)])),
    ...(lease.proofs !== undefined ? { proofs: Object.fromEntries(lease.proofs) } : {}),
    ttlMs: lease.ttlMs,
    validityMs: Math.floor(lease.validityMs),
    expiresAt: lease.expiresAt.toISOString(),
  };
  void reply.code(status).send(body);
}
