import type { EventEmitter } from 'node:events';
import type { Lease, MultiLease, NodeErrorEvent, NodeStateEvent, NodeStatus } from '@fenced/coordinator';

/**
 * The slice of the coordinator the HTTP service uses (see `Coordinator`). Declared structurally so the
 * service depends on the smallest surface it needs; the real `Coordinator` satisfies it.
 */
export interface LeaseService extends Pick<EventEmitter, 'on' | 'off'> {
  /** Votes a decision needs: `floor(nodeCount / 2) + 1`. */
  readonly quorum: number;
  /** How many Redis nodes there are. */
  readonly nodeCount: number;
  /** See `Coordinator.acquire`. */
  acquire(
    resource: string,
    options: { ttlMs: number; waitMs?: number; signal?: AbortSignal },
  ): Promise<ServedLease>;
  /** One lease over several resources, all or nothing (`POST /v1/leases`). */
  acquire(
    resources: readonly string[],
    options: { ttlMs: number; waitMs?: number; signal?: AbortSignal },
  ): Promise<ServedMultiLease>;
  /** See `Coordinator.extend`: the same token, or `LeaseLostError`. */
  extend(resource: string, leaseId: string, ttlMs: number): Promise<ServedLease>;
  /** Every resource of a multi-resource lease; a lost one releases the set and throws LeaseLostError. */
  extend(resources: readonly string[], leaseId: string, ttlMs: number): Promise<ServedMultiLease>;
  /** See `Coordinator.release`: an expired lease is released already. */
  release(resource: string, leaseId: string): Promise<void>;
  /** Every resource of a multi-resource lease (`DELETE /v1/leases/{leaseId}`). */
  release(resources: readonly string[], leaseId: string): Promise<void>;
  /** See `Coordinator.inspect`: never a lease id. */
  inspect(resource: string): Promise<{ held: boolean; token?: bigint }>;
  /** One entry per node, in node order, for `/readyz`. */
  nodeStatus(): Promise<readonly NodeStatusView[]>;
  /** See `Coordinator.recentNodeStatus`: the view, probed again only when older than `maxAgeMs` (`/metrics`). */
  recentNodeStatus?(maxAgeMs: number): Promise<readonly NodeStatusView[]>;
}

/** What the service reads from a granted or extended lease; `proof` only when the coordinator signs. */
export type ServedLease = Pick<Lease, 'resource' | 'id' | 'token' | 'ttlMs' | 'validityMs' | 'expiresAt'> & {
  readonly proof?: string | undefined;
};

/** What the service reads from a granted or extended multi-resource lease; `proofs` only when it signs. */
export type ServedMultiLease = Pick<
  MultiLease,
  'resources' | 'id' | 'tokens' | 'proofs' | 'ttlMs' | 'validityMs' | 'expiresAt'
>;

/** One node's health as the coordinator reports it (never credentials). */
export type NodeStatusView = NodeStatus;

export type { NodeErrorEvent, NodeStateEvent };
