// `@fenced/service`: the HTTP service around the library — the fastify app, its configuration from the
// environment, its logger, and the process around them. It loads fastify, pino, prom-client and zod; the
// library (`@fenced/coordinator`, which this package uses through its public entry only) installs none of them.
export { createApp, DEFAULT_APP_OPTIONS } from './http/app.js';
export type { AppDeps, AppOptions, HealthAuth } from './http/app.js';
export type { RequestLimits } from './service-options.js';
export type {
  LeaseService,
  ServedLease,
  ServedMultiLease,
  NodeStatusView,
  NodeErrorEvent,
} from './http/lease-service.js';
export { createServiceLogger, REDACTED_LOG_PATHS } from './http/service-logger.js';
export { logNodeStates } from './http/node-state-log.js';
export type { ServiceLoggerOptions } from './http/service-logger.js';
export { loadConfig, DEFAULT_SERVICE_CONFIG } from './config.js';
export type { ServiceConfig, LogLevel } from './config.js';
export { startServer, main } from './server.js';
export type { RunningServer, StartServerOptions } from './server.js';
