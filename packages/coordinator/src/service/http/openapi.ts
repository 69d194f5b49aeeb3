import { z } from 'zod';
import type { Schemas } from './schemas.js';

export interface OpenApiOptions {
  /** Whether the lock endpoints require `Authorization: Bearer <key>`. */
  authEnabled: boolean;
  /** Whether /healthz, /readyz and /metrics require the key too. */
  healthAuthRequired: boolean;
  version: string;
}

type JsonObject = Record<string, unknown>;

/**
 * The OpenAPI 3.1 document of the service, generated from the zod schemas that validate requests (so the
 * documented bounds are the enforced ones). OpenAPI 3.1 schemas are JSON Schema 2020-12, zod's own target.
 */
export function createOpenApiDocument(schemas: Schemas, options: OpenApiOptions): JsonObject {
  const { schemas: componentSchemas } = z.toJSONSchema(schemas.components, {
    target: 'draft-2020-12',
    unrepresentable: 'throw',
    uri: (id) => `#/components/schemas/${id}`,
  });
  for (const schema of Object.values(componentSchemas)) stripSchemaIdentity(schema);

  const parameter = (name: string, schema: z.ZodType, description: string): JsonObject => ({
    name,
    in: 'path',
    required: true,
    description,
    schema: stripSchemaIdentity(z.toJSONSchema(schema, { target: 'draft-2020-12' })),
  });
  const resource = parameter(
    'resource',
    schemas.resource,
    'The resource name, percent-encoded as one path segment.',
  );
  const leaseId = parameter('leaseId', schemas.leaseId, 'The lease id returned by the acquire call.');
  const ref = (id: string): JsonObject => ({ $ref: `#/components/schemas/${id}` });
  const json = (id: string): JsonObject => ({ 'application/json': { schema: ref(id) } });
  const errorRef = (name: string): JsonObject => ({ $ref: `#/components/responses/${name}` });
  const publicOps = options.healthAuthRequired ? {} : { security: [] };

  return {
    openapi: '3.1.0',
    info: {
      title: 'fenced coordinator',
      version: options.version,
      description:
        'Redlock leases over independent Redis masters, each carrying a fencing token (a decimal string, ' +
        'unique per grant and larger than every grant that completed before it). The lock is an efficiency ' +
        'device; present the token to a guarded store for safety.',
    },
    ...(options.authEnabled ? { security: [{ bearerAuth: [] }] } : {}),
    paths: {
      '/v1/locks/{resource}/leases': {
        post: {
          operationId: 'acquireLease',
          summary: 'Acquire a lease, waiting up to waitMs on the server',
          description:
            'If the client disconnects while waiting, the wait is cancelled and a lease granted afterwards is released.',
          parameters: [resource],
          requestBody: { required: true, content: json('AcquireRequest') },
          responses: {
            '201': { description: 'Granted.', content: json('LeaseResponse') },
            '400': errorRef('InvalidRequest'),
            '401': errorRef('Unauthorized'),
            '409': { description: 'LOCKED: not granted within waitMs.', content: json('Error') },
            '500': errorRef('Internal'),
            '503': errorRef('QuorumUnavailable'),
          },
        },
      },
      '/v1/locks/{resource}/leases/{leaseId}/extend': {
        post: {
          operationId: 'extendLease',
          summary: 'Extend a lease: same token, new TTL',
          parameters: [resource, leaseId],
          requestBody: { required: true, content: json('ExtendRequest') },
          responses: {
            '200': { description: 'Extended; the token is unchanged.', content: json('LeaseResponse') },
            '400': errorRef('InvalidRequest'),
            '401': errorRef('Unauthorized'),
            '409': {
              description: 'LEASE_LOST: the lease expired or another holder took the resource.',
              content: json('Error'),
            },
            '500': errorRef('Internal'),
            '503': errorRef('QuorumUnavailable'),
          },
        },
      },
      '/v1/locks/{resource}/leases/{leaseId}': {
        delete: {
          operationId: 'releaseLease',
          summary: 'Release a lease (compare-and-delete on every node)',
          description:
            'Idempotent. A 503 means a majority did not confirm the release: the service keeps retrying it on the ' +
            'nodes that missed it (a few times, with backoff), the lease expires by itself within its ttl, and the ' +
            'call may be repeated.',
          parameters: [resource, leaseId],
          responses: {
            '204': { description: 'Released, or already expired.' },
            '400': errorRef('InvalidRequest'),
            '401': errorRef('Unauthorized'),
            '500': errorRef('Internal'),
            '503': errorRef('QuorumUnavailable'),
          },
        },
      },
      '/v1/locks/{resource}': {
        get: {
          operationId: 'inspectLock',
          summary: 'Whether the resource is held, and by which token (never a lease id)',
          parameters: [resource],
          responses: {
            '200': { description: 'The majority view.', content: json('LockStatus') },
            '400': errorRef('InvalidRequest'),
            '401': errorRef('Unauthorized'),
            '500': errorRef('Internal'),
            '503': errorRef('QuorumUnavailable'),
          },
        },
      },
      '/v1/leases': {
        post: {
          operationId: 'acquireMultiLease',
          summary: 'Acquire one lease over several resources, all or nothing, waiting up to waitMs',
          description:
            'Every resource is granted, each with its own fencing token under one lease id, or none is. Resources ' +
            'are taken in sorted order, one attempt each, and partial grants are released before any wait, so ' +
            'overlapping requests neither deadlock nor livelock. A resource held by a single-resource lease blocks ' +
            'it like any other holder. If the client disconnects while waiting, a lease granted afterwards is released.',
          requestBody: { required: true, content: json('MultiAcquireRequest') },
          responses: {
            '201': { description: 'Granted, every resource.', content: json('MultiLeaseResponse') },
            '400': errorRef('InvalidRequest'),
            '401': errorRef('Unauthorized'),
            '409': {
              description: 'LOCKED: some resource was not granted within waitMs; nothing is held.',
              content: json('Error'),
            },
            '500': errorRef('Internal'),
            '503': errorRef('QuorumUnavailable'),
          },
        },
      },
      '/v1/leases/{leaseId}/extend': {
        post: {
          operationId: 'extendMultiLease',
          summary: 'Extend every resource of a multi-resource lease: same tokens, new TTL',
          description: 'Name the same resources as the acquire; the service keeps no state about the lease.',
          parameters: [leaseId],
          requestBody: { required: true, content: json('MultiExtendRequest') },
          responses: {
            '200': {
              description: 'Extended; the tokens are unchanged.',
              content: json('MultiLeaseResponse'),
            },
            '400': errorRef('InvalidRequest'),
            '401': errorRef('Unauthorized'),
            '409': {
              description:
                'LEASE_LOST: some resource expired or another holder took it; every resource of the lease is released.',
              content: json('Error'),
            },
            '500': errorRef('Internal'),
            '503': errorRef('QuorumUnavailable'),
          },
        },
      },
      '/v1/leases/{leaseId}': {
        delete: {
          operationId: 'releaseMultiLease',
          summary: 'Release every resource of a multi-resource lease (the resources in the JSON body)',
          description:
            'Idempotent; compare-and-delete of every resource on every node. A 503 means a majority did not confirm ' +
            'some resource: it expires by itself within its ttl, and the call may be repeated.',
          parameters: [leaseId],
          requestBody: { required: true, content: json('MultiReleaseRequest') },
          responses: {
            '204': { description: 'Released, or already expired.' },
            '400': errorRef('InvalidRequest'),
            '401': errorRef('Unauthorized'),
            '500': errorRef('Internal'),
            '503': errorRef('QuorumUnavailable'),
          },
        },
      },
      '/healthz': {
        get: {
          operationId: 'health',
          summary: 'Liveness: the process serves HTTP',
          ...publicOps,
          responses: {
            '200': { description: 'Alive.', content: json('Health') },
            '401': errorRef('Unauthorized'),
          },
        },
      },
      '/readyz': {
        get: {
          operationId: 'readiness',
          summary: 'Readiness: a quorum of Redis nodes is reachable, correctly configured and voting',
          ...publicOps,
          responses: {
            '200': { description: 'Ready.', content: json('Readiness') },
            '401': errorRef('Unauthorized'),
            '503': { description: 'No quorum of voting nodes.', content: json('Readiness') },
          },
        },
      },
      '/metrics': {
        get: {
          operationId: 'metrics',
          summary: 'Prometheus metrics',
          ...publicOps,
          responses: {
            '200': { description: 'Prometheus text exposition format.', content: { 'text/plain': {} } },
            '401': errorRef('Unauthorized'),
          },
        },
      },
      '/openapi.json': {
        get: {
          operationId: 'openapi',
          summary: 'This document',
          security: [],
          responses: { '200': { description: 'OpenAPI 3.1 document.', content: { 'application/json': {} } } },
        },
      },
    },
    components: {
      schemas: componentSchemas,
      responses: {
        InvalidRequest: {
          description: 'INVALID_REQUEST: the message says what is allowed.',
          content: json('Error'),
        },
        Unauthorized: { description: 'UNAUTHORIZED: no valid API key.', content: json('Error') },
        Internal: { description: 'INTERNAL: details stay in the server log.', content: json('Error') },
        QuorumUnavailable: {
          description: 'QUORUM_UNAVAILABLE: no majority of Redis nodes could decide; retry with backoff.',
          content: json('Error'),
        },
      },
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key from FENCED_API_KEYS.' },
      },
    },
  };
}

/** zod stamps each schema as a standalone document (`$schema`, `$id`); inside OpenAPI they are fragments. */
function stripSchemaIdentity(schema: JsonObject): JsonObject {
  delete schema.$schema;
  delete schema.$id;
  return schema;
}
