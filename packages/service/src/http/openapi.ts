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
  // What every operation with a JSON body may answer before it runs (json-body.ts, http-conventions.ts).
  const bodyRefusals = { '413': errorRef('PayloadTooLarge'), '415': errorRef('UnsupportedMediaType') };

  return {
    openapi: '3.1.0',
    info: {
      title: 'fenced coordinator',
      version: options.version,
      description:
        'Redlock leases over independent Redis masters, each carrying a fencing token (a decimal string, ' +
        'unique per grant and larger than every grant that completed before it). The lock is an efficiency ' +
        'device; present the token to a guarded store for safety.\n\n' +
        'Every error answers `{ "error": { "code", "message" } }`. A request the service refuses before any ' +
        'operation runs keeps the code `INVALID_REQUEST` and gets the status of the HTTP convention it broke: ' +
        '`404` for a path no operation serves, `405` (with `Allow` listing the methods served) for a method ' +
        'the path is not served with, `413` for a body over the limit, `415` for a body that is not UTF-8 JSON ' +
        'sent as `Content-Type: application/json` without `Content-Encoding`.',
      contact: { name: 'fenced maintainers' },
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [
      {
        url: 'http://{host}:{port}',
        description: 'The service, where FENCED_HOST and FENCED_PORT make it listen.',
        variables: {
          host: { default: '127.0.0.1', description: 'FENCED_HOST, or the name clients reach it by.' },
          port: { default: '8080', description: 'FENCED_PORT.' },
        },
      },
    ],
    tags: [
      { name: 'leases', description: 'Leases on one resource: acquire, extend, release, inspect.' },
      {
        name: 'multi-resource leases',
        description: 'One lease over several resources, each with its own token, all or nothing.',
      },
      { name: 'operations', description: 'Health, readiness, metrics and this document, for operators.' },
    ],
    // Without API keys (FENCED_AUTH=off, or a loopback address) anyone who reaches the service may call it.
    security: options.authEnabled ? [{ bearerAuth: [] }] : [{}],
    paths: {
      '/v1/locks/{resource}/leases': {
        post: {
          operationId: 'acquireLease',
          tags: ['leases'],
          summary: 'Acquire a lease, waiting up to waitMs on the server',
          description:
            'If the client disconnects while waiting, the wait is cancelled and a lease granted afterwards is released.',
          parameters: [resource],
          requestBody: { required: true, content: json('AcquireRequest') },
          responses: {
            '201': { description: 'Granted.', content: json('LeaseResponse') },
            '400': errorRef('InvalidRequest'),
            ...bodyRefusals,
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
          tags: ['leases'],
          summary: 'Extend a lease: same token, new TTL',
          description:
            'Extends the lease on a majority of the nodes for a new ttlMs from now. The token stays the same; a ' +
            'lease that expired or was taken over answers 409 LEASE_LOST and must not be used any more.',
          parameters: [resource, leaseId],
          requestBody: { required: true, content: json('ExtendRequest') },
          responses: {
            '200': { description: 'Extended; the token is unchanged.', content: json('LeaseResponse') },
            '400': errorRef('InvalidRequest'),
            ...bodyRefusals,
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
          tags: ['leases'],
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
          tags: ['leases'],
          summary: 'Whether the resource is held, and by which token (never a lease id)',
          description:
            'Reads every node and answers the majority view: whether a lease holds the resource and its token. ' +
            'It never answers a lease id, which is the capability to extend or release the lease.',
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
          tags: ['multi-resource leases'],
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
            ...bodyRefusals,
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
          tags: ['multi-resource leases'],
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
            ...bodyRefusals,
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
          tags: ['multi-resource leases'],
          summary: 'Release every resource of a multi-resource lease (the resources in the JSON body)',
          description:
            'Idempotent; compare-and-delete of every resource on every node. A 503 means a majority did not confirm ' +
            'some resource: it expires by itself within its ttl, and the call may be repeated.',
          parameters: [leaseId],
          requestBody: { required: true, content: json('MultiReleaseRequest') },
          responses: {
            '204': { description: 'Released, or already expired.' },
            '400': errorRef('InvalidRequest'),
            ...bodyRefusals,
            '401': errorRef('Unauthorized'),
            '500': errorRef('Internal'),
            '503': errorRef('QuorumUnavailable'),
          },
        },
      },
      '/healthz': {
        get: {
          operationId: 'health',
          tags: ['operations'],
          summary: 'Liveness: the process serves HTTP',
          description:
            'Answers 200 while the process serves HTTP, whatever the Redis nodes do: a liveness probe.',
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
          tags: ['operations'],
          summary: 'Readiness: a quorum of Redis nodes is reachable, correctly configured and voting',
          description:
            'Answers 200 when a majority of the Redis nodes vote, 503 when not; the body gives each node and why ' +
            'it does not vote. A readiness probe: route traffic only to an instance that answers 200.',
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
          tags: ['operations'],
          summary: 'Prometheus metrics',
          description:
            'The service counters and histograms, the per-node gauges (read from the node view, probed when older ' +
            'than 5 s) and the process metrics, in the Prometheus text format.',
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
          tags: ['operations'],
          summary: 'This document',
          description: 'The OpenAPI 3.1 document of this service, with the bounds it enforces. Public.',
          security: [],
          responses: {
            '200': { description: 'OpenAPI 3.1 document.', content: { 'application/json': {} } },
            '4XX': errorRef('InvalidRequest'),
          },
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
        PayloadTooLarge: {
          description:
            'INVALID_REQUEST: the body is larger than the service accepts; the message gives the limit.',
          content: json('Error'),
        },
        UnsupportedMediaType: {
          description:
            'INVALID_REQUEST: the body is not UTF-8 JSON sent as `Content-Type: application/json` without `Content-Encoding`.',
          content: json('Error'),
        },
        QuorumUnavailable: {
          description: 'QUORUM_UNAVAILABLE: no majority of Redis nodes could decide; retry with backoff.',
          content: json('Error'),
        },
      },
      ...(options.authEnabled
        ? {
            securitySchemes: {
              bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key from FENCED_API_KEYS.' },
            },
          }
        : {}),
    },
  };
}

/** zod stamps each schema as a standalone document (`$schema`, `$id`); inside OpenAPI they are fragments. */
function stripSchemaIdentity(schema: JsonObject): JsonObject {
  delete schema.$schema;
  delete schema.$id;
  return schema;
}
