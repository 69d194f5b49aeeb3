// `@fenced/coordinator`: the library. It loads ioredis and `@fenced/shared`, nothing of the HTTP service
// (`@fenced/coordinator/service`) or its client (`@fenced/coordinator/client`).
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
export type { CoordinatorOptions, CoordinatorSettings } from './options.js';
export { MalformedReplyError, NodeCallError, NodeTimeoutError, TokenExhaustedError } from './errors.js';
