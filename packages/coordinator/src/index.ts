// `@fenced/coordinator`: the library. It loads ioredis and `@fenced/shared`, nothing of the HTTP service (the
// `@fenced/service` package, which uses this entry only) or its client (`@fenced/coordinator/client`).
export { Coordinator } from './coordinator.js';
export type {
  AcquireOptions,
  CoordinatorAcquireOptions,
  AttemptReport,
  AttemptReportOptions,
  NodeVote,
  NodeVoteAgainst,
  NodeVoteFor,
  TryAcquireOptions,
  NodeStatus,
  NodeRepairStatus,
  RepairProgress,
  NodeErrorEvent,
  RepairProgressEvent,
  CoordinatorEvents,
} from './coordinator.js';
export type { LeaseWatchOptions } from './lease/lease-watch.js';
export { NODE_STATE_CHANNEL } from './nodes/node-events.js';
export type { NodeStateEvent, NodeStateChange } from './nodes/node-events.js';
export type { ClusterMemberConfig } from './options.js';
export {
  CLUSTER_ENTRY_PREFIX,
  NODE_ENTRY_FORMS,
  nodeEntryAddress,
  nodeEntryProblem,
  parseNodeEntry,
} from './nodes/node-address.js';
export type { ShardStatus } from './nodes/node-connection.js';
export type { Lease } from './lease/lease.js';
export type { MultiLease } from './lease/multi-lease.js';
export { MAX_LEASE_RESOURCES, lockOrder } from './lease/multi-lease.js';
export type { SigningKey } from './signing/lease-signer.js';
export { DEFAULT_COORDINATOR_OPTIONS } from './options.js';
export type { CoordinatorOptions, CoordinatorSettings } from './options.js';
export type { KeyLayout } from './keys/key-layout.js';
export {
  CoordinatorClosedError,
  MalformedReplyError,
  NodeCallError,
  NodeTimeoutError,
  TokenExhaustedError,
  UnsafeNodeError,
} from './errors.js';
export type { UnsafeNode } from './errors.js';
export { ClusterSettingsError } from './nodes/cluster-settings.js';
export type { ClusterSettingsMode } from './options.js';
