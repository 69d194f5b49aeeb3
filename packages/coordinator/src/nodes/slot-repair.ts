import type { ClusterConnection } from './cluster-connection.js';
import type { RepairContext } from './repair.js';

/** Repairs the empty slots of a Redis Cluster member (DESIGN §3c). */
export function repairEmptySlots(context: RepairContext, target: ClusterConnection): Promise<void> {
  void context;
  return Promise.reject(new Error(`repairing the empty slots of ${target.address} is not implemented yet`));
}
