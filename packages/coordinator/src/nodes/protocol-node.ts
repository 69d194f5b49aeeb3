import type { QuorumUnavailableError } from '@fenced/shared';
import type { CoordinatorSettings } from '../options.js';
import type { ResourceKeys } from '../keys/key-layout.js';
import type { NodeReply } from '../quorum/quorum.js';
import type {
  AcquireReply,
  ExtendReply,
  InspectReply,
  PromiseReply,
  ReleaseReply,
} from '../scripts/script-results.js';

/**
 * The smallest slice of one Redis node the lease and token protocol needs: one method per script, each bounded
 * by `timeoutMs`, each resolving with the script's typed reply (or rejecting: a timeout, a connection error, a
 * malformed reply — all votes against). `NodeConnection` implements it over ioredis; the deterministic protocol
 * simulation implements it over an in-memory model of the same Lua semantics, so the decision code it drives is
 * the code that runs in production.
 */
export interface ProtocolNode {
  readonly index: number;
  /** host:port, for messages; never credentials. */
  readonly address: string;
  /** acquire.lua: a lease vote plus the folded-in token promise of `proposal`. */
  acquire(
    timeoutMs: number,
    keys: Pick<ResourceKeys, 'lease' | 'record' | 'token'>,
    leaseId: string,
    ttlMs: number,
    proposal: bigint,
  ): Promise<AcquireReply>;
  /** promise.lua: a later token round. */
  promise(
    timeoutMs: number,
    keys: Pick<ResourceKeys, 'lease' | 'record' | 'token'>,
    leaseId: string,
    proposal: bigint,
  ): Promise<PromiseReply>;
  /** extend.lua: compare-and-extend. */
  extend(
    timeoutMs: number,
    keys: Pick<ResourceKeys, 'lease' | 'record'>,
    leaseId: string,
    ttlMs: number,
  ): Promise<ExtendReply>;
  /** release.lua: compare-and-delete, then publish the release. */
  release(
    timeoutMs: number,
    keys: Pick<ResourceKeys, 'lease' | 'record' | 'channel'>,
    leaseId: string,
  ): Promise<ReleaseReply>;
  /** inspect.lua: whether the lease key exists, and its token. */
  inspect(timeoutMs: number, keys: Pick<ResourceKeys, 'lease' | 'record' | 'token'>): Promise<InspectReply>;
}

/** The clock the protocol measures validity and waits on: monotonic milliseconds. */
export interface ProtocolClock {
  now(): number;
  /** Resolves after `ms`; rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

/**
 * What the protocol steps (acquire attempt, token rounds, extend, release, repair) need from the node set,
 * and nothing more: the nodes, which of them vote right now, the settings, the clock, and where to report what
 * the replies revealed (a node that restarted empty).
 */
export interface ProtocolContext {
  readonly nodes: readonly ProtocolNode[];
  readonly quorum: number;
  readonly settings: Readonly<CoordinatorSettings>;
  readonly clock: ProtocolClock;
  /** Whether node `index` may vote now (reachable when last seen, configured safely, initialized, not repairing). */
  isVoting(index: number): boolean;
  /** Called with every decided fan-out's replies: a NOT_INITIALIZED reply stops that node voting at once. */
  noteAbstentions(replies: readonly NodeReply<{ readonly kind: string }>[]): void;
  /**
   * Reads the cluster's settings again after a node refused a call for them (SETTINGS_MISMATCH), adopting or refusing
   * as configured (nodes/cluster-settings.ts); resolves whether the settings this process runs with changed.
   * @throws ClusterSettingsError when this process's configuration is refused
   */
  refreshSettings(): Promise<boolean>;
  /** The error for "no majority could vote", naming each node's problem. */
  unavailable(
    summary: string,
    replies?: readonly NodeReply<{ readonly kind: string }>[],
  ): QuorumUnavailableError;
}

/** One call per node in node order; `null` (no call: a vote against) for nodes that may not vote. */
export function votingCalls<T>(
  context: Pick<ProtocolContext, 'nodes' | 'isVoting'>,
  call: (node: ProtocolNode) => Promise<T>,
): ((() => Promise<T>) | null)[] {
  return context.nodes.map((node) => (context.isVoting(node.index) ? () => call(node) : null));
}
