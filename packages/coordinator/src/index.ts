export { Coordinator } from './coordinator.js';
export type {
  AcquireOptions,
  TryAcquireOptions,
  NodeStatus,
  NodeErrorEvent,
  CoordinatorEvents,
} from './coordinator.js';
export type { Lease } from './lease.js';
export { coordinatorDefaults } from './options.js';
export type { CoordinatorOptions } from './options.js';
export { MalformedReplyError, NodeTimeoutError, TokenExhaustedError } from './errors.js';
