import { createRequire } from 'node:module';
import {
  assertInteger,
  assertOneOf,
  ErrorCode,
  InvalidRequestError,
  isFencedError,
  QuorumUnavailableError,
  mergeOptions,
  toHttpError,
  type HttpError,
} from '@fenced/shared';
import { fastify, type FastifyInstance, type FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { ApiKeyCheck, unauthorized } from './api-key-auth.js';
import { healthRoutes } from './health-routes.js';
import type { LeaseService, NodeErrorEvent } from './lease-service.js';
import { lockRoutes } from './lock-routes.js';
import { registerNodeMetrics } from './node-metrics.js';
import { multiLeaseRoutes } from './multi-lease-routes.js';
import { fromFastifyRequestError, parseJsonBody } from './json-body.js';
import { methodNotAllowed, notFound, RefusedRequestError, RouteTable } from './http-conventions.js';
import { createOpenApiDocument } from './openapi.js';
import { REQUEST_ID_HEADER, RequestLog, requestId, routePattern, safeError } from './request-log.js';
import { DEFAULT_APP_OPTIONS, LOG_LEVELS, type AppOptions } from '../service-options.js';
import { ShuttingDownError } from './route-support.js';
import { createSchemas } from './schemas.js';
import { createServiceLogger } from './service-logger.js';
import { ServiceMetrics } from './service-metrics.js';

/** What {@link createApp} needs: the coordinator, optional collaborators, and any {@link AppOptions}. */
export interface AppDeps extends Partial<AppOptions> {
  /** The coordinator (or anything with the same slice of its API). */
  coordinator: LeaseService;
  /** Request and error log. @defaultValue a silent logger */
  logger?: Logger;
  /** Registry for the service's metrics; a fresh one per app when absent (never prom-client's global). */
  registry?: Registry;
  /** Abort it when shutting down: waiting acquires end with 503, the nodeError listener is removed. */
  shutdownSignal?: AbortSignal;
}

export { DEFAULT_APP_OPTIONS, type AppOptions, type HealthAuth } from '../service-options.js';

const packageVersion = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;

/**
 * Builds the coordinator service's HTTP app (DESIGN §5): a fastify instance with every route, hook and error
 * mapping in place. It never listens: `server.ts` owns ports, signals, connection limits and the environment
 * (`await app.listen(...)` there; `app.inject(...)` or `app.server` after `await app.ready()` in tests).
 * `app.close()` closes its server when listening and stops listening to the coordinator's `nodeError` events.
 */
export function createApp(deps: AppDeps): FastifyInstance {
  const options = resolveOptions(deps);
  const logger = deps.logger ?? createServiceLogger({ level: 'silent' });
  const metrics = new ServiceMetrics(deps.registry);
  registerNodeMetrics(metrics.registry, deps.coordinator);
  const shutdownSignal = deps.shutdownSignal ?? new AbortController().signal;
  const schemas = createSchemas(options);
  const auth = new ApiKeyCheck(options.apiKeys);
  const requestLog = new RequestLog(logger, metrics, options.accessLogLevel);
  const openApi = JSON.stringify(
    createOpenApiDocument(schemas, {
      authEnabled: auth.enabled,
      healthAuthRequired: options.healthAuth === 'required',
      version: packageVersion,
    }),
  );

  const onNodeError = (event: NodeErrorEvent): void => {
    metrics.nodeErrors.inc({ node: String(event.node), operation: String(event.operation) });
    logger.debug({ node: event.node, operation: event.operation, err: safeError(event.error) }, 'node error');
  };
  deps.coordinator.on('nodeError', onNodeError);
  const stopNodeErrors = (): void => void deps.coordinator.off('nodeError', onNodeError);
  shutdownSignal.addEventListener('abort', stopNodeErrors, { once: true });

  const app = fastify({
    // Logging is ours (RequestLog): fastify's request logger would cost a child logger per request.
    logger: false,
    genReqId: requestId,
    bodyLimit: options.bodyLimitBytes,
    // A resource name is up to 256 bytes, up to 768 characters percent-encoded: longer segments get the
    // validation message, not a 404.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 4096 },
    // Shutdown is server.ts's: it drains with `Connection: close` (below) instead of fastify's 503s.
    return503OnClosing: false,
    frameworkErrors: (error, _request, reply) => sendError(reply, error),
  });
  // Every route, so that a request no route serves gets 404, or 405 with `Allow` when the path is served.
  const routes = new RouteTable();
  app.addHook('onRoute', (route) => routes.add(route.method, route.url));
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, parseJsonBody);

  app.addHook('onSend', (request, reply, payload, done) => {
    void reply.header(REQUEST_ID_HEADER, request.id);
    // Lease responses carry capabilities: no cache may keep them.
    if (request.url.startsWith('/v1/')) void reply.header('Cache-Control', 'no-store');
    // Draining: the client must not send another request on this connection, which is about to close.
    if (shutdownSignal.aborted) void reply.header('Connection', 'close');
    done(null, payload);
  });
  app.addHook('onResponse', requestLog.onResponse);
  app.addHook('onClose', (_instance, done) => {
    stopNodeErrors();
    done();
  });

  app.get('/openapi.json', (_request, reply) => {
    void reply.type('application/json; charset=utf-8').send(openApi);
  });
  const routeDeps = { coordinator: deps.coordinator, schemas, metrics, logger, requestLog, shutdownSignal };
  void app.register((scope, _opts, done) => {
    if (options.healthAuth === 'required') scope.addHook('onRequest', auth.onRequest);
    healthRoutes(scope, deps.coordinator, metrics);
    done();
  });
  void app.register((scope, _opts, done) => {
    if (auth.enabled) scope.addHook('onRequest', auth.onRequest);
    lockRoutes(scope, routeDeps);
    multiLeaseRoutes(scope, routeDeps);
    done();
  });

  app.setNotFoundHandler((request, reply) => {
    // Unknown /v1 paths answer 401 to a caller without a key, as the known ones do.
    if (request.url.startsWith('/v1/') && !auth.authorized(request.headers.authorization)) {
      sendError(reply, unauthorized(reply));
      return;
    }
    // The message does not echo the path: on a lease route it would carry the lease id.
    const methods = routes.methodsOf(request.url);
    if (methods.length === 0) {
      sendError(reply, notFound(request.method));
    } else if (!methods.includes(request.method)) {
      sendError(reply, methodNotAllowed(request.method, methods));
    } else {
      // The path is a route's with an empty parameter (`/v1/locks//leases`, `/v1/locks/`).
      sendError(
        reply,
        new InvalidRequestError(
          'a path parameter is empty: resource names are 1 to 256 bytes, percent-encoded as one path segment (see GET /openapi.json)',
        ),
      );
    }
  });
  app.setErrorHandler((error, request, reply) => {
    // A quorum failure's message names nodes and the driver's words ("Stream isn't writeable ..."): the operator
    // gets them here, once per request at warn with each node's reason; the client a stable message and the code.
    if (
      isFencedError(error) &&
      error.code === ErrorCode.QUORUM_UNAVAILABLE &&
      !(error instanceof ShuttingDownError)
    ) {
      const nodes = error instanceof QuorumUnavailableError ? error.nodeErrors : [];
      logger.warn(
        {
          requestId: request.id,
          route: routePattern(request, 503),
          reason: error.message,
          nodes: nodes.map((reason, node) => ({ node, reason })).filter((entry) => entry.reason !== null),
        },
        'quorum unavailable',
      );
      sendError(reply, new QuorumUnavailableError(QUORUM_UNAVAILABLE_MESSAGE));
      return;
    }
    const response = sendError(reply, error);
    if (response.unexpected) {
      logger.error(
        { requestId: request.id, route: routePattern(request, 500), err: safeError(error) },
        'unexpected error',
      );
    }
  });
  return app;

  function sendError(reply: FastifyReply, error: unknown): HttpError {
    const refused = fromFastifyRequestError(error, options.bodyLimitBytes) ?? error;
    let response = toHttpError(refused);
    // The same INVALID_REQUEST body, with the status of the HTTP convention the request broke (404/405/413/415).
    if (refused instanceof RefusedRequestError) {
      response = {
        ...response,
        status: refused.status,
        headers: { ...response.headers, ...refused.headers },
      };
    }
    void reply.code(response.status).headers(response.headers).send(response.body);
    return response;
  }
}

const APP_DEPENDENCIES = ['coordinator', 'logger', 'registry', 'shutdownSignal'];

/** What an API client reads in a 503 QUORUM_UNAVAILABLE: no node address, no driver internals. */
export const QUORUM_UNAVAILABLE_MESSAGE =
  'quorum unavailable: too few Redis nodes answered or voted to decide; retry with backoff (the service log has the reason of each node)';

function resolveOptions(deps: AppDeps): Readonly<AppOptions> {
  const merged = mergeOptions('app', DEFAULT_APP_OPTIONS, deps, APP_DEPENDENCIES);
  const count = { min: 0, max: Number.MAX_SAFE_INTEGER };
  const maxTtlMs = assertInteger('maxTtlMs', merged.maxTtlMs, { min: 1, max: Number.MAX_SAFE_INTEGER });
  const options: AppOptions = {
    minTtlMs: assertInteger('minTtlMs', merged.minTtlMs, { min: 1, max: maxTtlMs }),
    maxTtlMs,
    maxWaitMs: assertInteger('maxWaitMs', merged.maxWaitMs, count),
    bodyLimitBytes: assertInteger('bodyLimitBytes', merged.bodyLimitBytes, count),
    apiKeys: Object.freeze([...merged.apiKeys]),
    healthAuth: assertOneOf('healthAuth', merged.healthAuth, ['public', 'required']),
    accessLogLevel: assertOneOf('accessLogLevel', merged.accessLogLevel, LOG_LEVELS),
  };
  return Object.freeze(options);
}
