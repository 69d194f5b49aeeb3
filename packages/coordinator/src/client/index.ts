// `@fenced/coordinator/client`: the HTTP client of the coordinator service. It depends on `@fenced/shared`
// and the global `fetch` only, never on the library or ioredis.
export {
  CoordinatorClient,
  DEFAULT_CLIENT_OPTIONS,
  type CoordinatorClientOptions,
  type UsingOptions,
  type LockStatus,
} from './coordinator-client.js';
export type { AcquireOptions, LeaseWatchOptions } from '../lease/lease-watch.js';
export { ClientLease } from './client-lease.js';
export { ClientMultiLease } from './client-multi-lease.js';
export { errorFromResponse } from './response-errors.js';
