import type { EventEmitter } from 'node:events';

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

/** What the service reads from a granted or extended lease. */
export interface GrantedLease {
  readonly resource: string;
  readonly id: string;
  readonly token: bigint;
  readonly ttlMs: number;
  readonly validityMs: number;
  readonly expiresAt: Date;
}

/** One node's health as the coordinator reports it (never credentials). */
export interface NodeStatusView {
  node: number;
  address: string;
  reachable: boolean;
  role?: string;
  configOk: boolean;
  problems: string[];
  voting: boolean;
  latencyMs?: number;
}

/** Payload of the coordinator's `nodeError` event. */
export interface NodeErrorEvent {
  node: number | string;
  operation: string;
  error: unknown;
}
