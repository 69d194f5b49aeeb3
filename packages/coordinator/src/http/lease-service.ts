import type { EventEmitter } from 'node:events';
import type { NodeErrorEvent, NodeStatus } from '../coordinator.js';
import type { Lease } from '../lease.js';

/**
 * The slice of the coordinator the HTTP service uses (docs/internal-api.md). Declared structurally so the
 * service depends on the smallest surface it needs; the real `Coordinator` satisfies it.
 */
export interface LeaseService extends Pick<EventEmitter, 'on' | 'off'> {
  readonly quorum: number;
  readonly nodeCount: number;
  acquire(
    resource: string,
    options: { ttlMs: number; waitMs?: number; signal?: AbortSignal },
  ): Promise<GrantedLease>;
  extend(resource: string, leaseId: string, ttlMs: number): Promise<GrantedLease>;
  release(resource: string, leaseId: string): Promise<void>;
  inspect(resource: string): Promise<{ held: boolean; token?: bigint }>;
  nodeStatus(): Promise<readonly NodeStatusView[]>;
}

/** What the service reads from a granted or extended lease; `proof` only when the coordinator signs. */
export type GrantedLease = Pick<Lease, 'resource' | 'id' | 'token' | 'ttlMs' | 'validityMs' | 'expiresAt'> & {
  readonly proof?: string | undefined;
};

/** One node's health as the coordinator reports it (never credentials). */
export type NodeStatusView = NodeStatus;

export type { NodeErrorEvent };
