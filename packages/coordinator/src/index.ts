export { Coordinator } from './coordinator.js';
export type {
  AcquireOptions,
  TryAcquireOptions,
  NodeStatus,
  NodeErrorEvent,
  CoordinatorEvents,
} from './coordinator.js';
export type { Lease } from './lease.js';
export { DEFAULT_COORDINATOR_OPTIONS } from './options.js';
export type { CoordinatorOptions } from './options.js';
export { MalformedReplyError, NodeCallError, NodeTimeoutError, TokenExhaustedError } from './errors.js';
// The HTTP service (`server.ts` is its process entry point; `createApp` builds it without listening).
export { createApp, DEFAULT_APP_OPTIONS } from './http/app.js';
export type { AppDeps, AppOptions, HealthAuth } from './http/app.js';
export type { LeaseService } from './http/lease-service.js';
export { createServiceLogger } from './http/service-logger.js';
export { loadConfig, DEFAULT_SERVICE_CONFIG } from './config.js';
export type { ServiceConfig } from './config.js';
export { startServer } from './server.js';
export type { RunningServer } from './server.js';
