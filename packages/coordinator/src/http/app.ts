import { createRequire } from 'node:module';
import { assertInteger, assertOneOf, InvalidRequestError, mergeOptions, toHttpError } from '@fenced/shared';
import express, { type ErrorRequestHandler, type Express } from 'express';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { ApiKeyCheck } from './api-key-auth.js';
import { healthRoutes } from './health-routes.js';
import type { LeaseService, NodeErrorEvent } from './lease-service.js';
import { lockRoutes } from './lock-routes.js';
import { registerNodeMetrics } from './node-metrics.js';
import { multiLeaseRoutes } from './multi-lease-routes.js';
import { createOpenApiDocument } from './openapi.js';
import { requestLog, routePattern, safeError } from './request-log.js';
import { createSchemas, type RequestLimits } from './schemas.js';
import { createServiceLogger } from './service-logger.js';
import { ServiceMetrics } from './service-metrics.js';

/** Who may call `/healthz`, `/readyz` and `/metrics`. */
export type HealthAuth = 'public' | 'required';

/** Options of the HTTP layer; {@link DEFAULT_APP_OPTIONS} holds their defaults. */
export interface AppOptions extends RequestLimits {
  /**
   * Largest JSON body accepted, in bytes. Lease requests are a few dozen bytes.
   * @defaultValue 16384
   */
  bodyLimitBytes: number;
  /**
   * API keys accepted as `Authorization: Bearer <key>`. Empty: authentication is off.
   * @defaultValue []
   */
  apiKeys: readonly string[];
  /**
   * Whether the health and metrics endpoints need a key too. Public suits probes and scrapers inside a
   * private network; `required` hides node addresses and traffic figures from anyone without a key.
   * @defaultValue 'public'
   */
  healthAuth: HealthAuth;
}

/** Defaults of {@link AppOptions}. */
export const DEFAULT_APP_OPTIONS = Object.freeze({
  minTtlMs: 100,
  maxTtlMs: 300_000,
  maxWaitMs: 60_000,
  bodyLimitBytes: 16_384,
  apiKeys: [],
  healthAuth: 'public',
} as const satisfies Required<AppOptions>);

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

const packageVersion = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;

/**
 * Builds the express app of the coordinator service (DESIGN §5). It never listens: `server.ts` owns ports,
 * signals and the environment.
 */
export function createApp(deps: AppDeps): Express {
  const options = resolveOptions(deps);
  const logger = deps.logger ?? createServiceLogger({ level: 'silent' });
  const metrics = new ServiceMetrics(deps.registry);
  registerNodeMetrics(metrics.registry, deps.coordinator);
  const shutdownSignal = deps.shutdownSignal ?? new AbortController().signal;
  const schemas = createSchemas(options);
  const auth = new ApiKeyCheck(options.apiKeys);
  const openApi = createOpenApiDocument(schemas, {
    authEnabled: auth.enabled,
    healthAuthRequired: options.healthAuth === 'required',
    version: packageVersion,
  });

  const onNodeError = (event: NodeErrorEvent): void => {
    metrics.nodeErrors.inc({ node: String(event.node), operation: String(event.operation) });
    logger.debug({ node: event.node, operation: event.operation, err: safeError(event.error) }, 'node error');
  };
  deps.coordinator.on('nodeError', onNodeError);
  shutdownSignal.addEventListener('abort', () => deps.coordinator.off('nodeError', onNodeError), {
    once: true,
  });

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(requestLog(logger, metrics));

  app.get('/openapi.json', (_req, res) => {
    res.json(openApi);
  });
  if (options.healthAuth === 'required') app.use(['/healthz', '/readyz', '/metrics'], auth.middleware());
  app.use(healthRoutes(deps.coordinator, metrics));

  app.use('/v1', (_req, res, next) => {
    // Lease responses carry capabilities: no cache may keep them.
    res.setHeader('Cache-Control', 'no-store');
    next();
  });
  app.use('/v1', auth.middleware());
  app.use('/v1', express.json({ limit: options.bodyLimitBytes, strict: true, type: 'application/json' }));
  app.use(lockRoutes({ coordinator: deps.coordinator, schemas, metrics, logger, shutdownSignal }));
  app.use(multiLeaseRoutes({ coordinator: deps.coordinator, schemas, metrics, logger, shutdownSignal }));

  app.use((req, _res, next) => {
    // The message does not echo the path: on a lease route it would carry the lease id.
    next(
      new InvalidRequestError(
        `no endpoint ${req.method} for this path; resource names are 1 to 256 bytes, percent-encoded as one path segment (see GET /openapi.json)`,
      ),
    );
  });
  app.use(errorHandler(logger));
  return app;
}

const APP_DEPENDENCIES = ['coordinator', 'logger', 'registry', 'shutdownSignal'];

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
  };
  return Object.freeze(options);
}

function errorHandler(logger: Logger): ErrorRequestHandler {
  return (error, req, res, next) => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const response = toHttpError(error);
    if (response.unexpected) {
      logger.error(
        { requestId: res.locals.requestId as unknown, route: routePattern(req), err: safeError(error) },
        'unexpected error',
      );
    }
    res.status(response.status).set(response.headers).json(response.body);
  };
}
