/**
 * Release (DESIGN §2.5): compare-and-delete on every node, voting or not (a node that stopped voting may still
 * hold our key).
 *
 * Safety: release.lua deletes the lease key only when it holds *this* lease id, so a late or retried release never
 * touches a successor's lease (F11; test/fault/late-commands.test.ts). Releasing never touches a token register,
 * so it cannot affect G2. Releasing a lease that already expired is a success, and nothing retries forever: a node
 * that missed the release is retried in the background a bounded number of times, and the ttl ends the lease
 * anyway.
 */
import type { ResourceKeys } from '../keys/key-layout.js';
import { fanOut, type FanOutResult, type NodeReply } from '../quorum/quorum.js';
import type { ReleaseReply } from '../scripts/script-results.js';
import type { ProtocolContext, ProtocolNode } from '../nodes/protocol-node.js';

/** Background retries of a release on nodes that did not answer it (backoff from retryDelayMs, capped at 5 s). */
export const RELEASE_RETRIES = 8;
const RELEASE_RETRY_MAX_DELAY_MS = 5_000;

type ReleaseKeys = Pick<ResourceKeys, 'lease' | 'record' | 'channel'>;

/** Releases leases and keeps retrying, in the background, on the nodes that missed a release. */
export class Releaser {
  private readonly retries = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor(private readonly context: Pick<ProtocolContext, 'nodes' | 'settings'>) {}

  /** One release round on every node; nodes that do not answer it are retried in the background. */
  everywhere(keys: ReleaseKeys, leaseId: string): Promise<FanOutResult<ReleaseReply>> {
    const nodes = this.context.nodes;
    const result = this.releaseOn(nodes, keys, leaseId);
    void result.then(({ settled }) =>
      settled.then((replies) => this.retryLater(failedNodes(nodes, replies), keys, leaseId, 0)),
    );
    return result;
  }

  /** Releases in the background; failures are retried and otherwise left to the ttl. */
  inBackground(keys: ReleaseKeys, leaseId: string): void {
    this.everywhere(keys, leaseId).catch(() => undefined);
  }

  /**
   * Undoes a failed attempt: compare-and-delete on every node, waiting for every reply (each bounded by the node
   * timeout), so that neither the next attempt nor the caller sees our partial grants left on reachable nodes.
   */
  async undoAttempt(keys: ReleaseKeys, leaseId: string): Promise<void> {
    const timeout = this.context.settings.nodeTimeoutMs;
    await Promise.allSettled(this.context.nodes.map((node) => node.release(timeout, keys, leaseId)));
  }

  /** Stops every background retry. */
  close(): void {
    this.closed = true;
    for (const timer of this.retries) clearTimeout(timer);
    this.retries.clear();
  }

  /** One release round on these nodes. */
  private releaseOn(
    nodes: readonly ProtocolNode[],
    keys: ReleaseKeys,
    leaseId: string,
  ): Promise<FanOutResult<ReleaseReply>> {
    const timeout = this.context.settings.nodeTimeoutMs;
    return fanOut(
      nodes.map((node) => () => node.release(timeout, keys, leaseId)),
      () => true,
    );
  }

  /**
   * Keeps releasing, with backoff, on the nodes whose release failed (unreachable, timed out, reset): the lease
   * key left on such a node would otherwise refuse that node's vote to the next holder until the ttl ends. It is
   * compare-and-delete by lease id, so a late retry never touches a successor's lease (F11); it gives up after
   * {@link RELEASE_RETRIES} tries and when closed.
   */
  private retryLater(
    nodes: readonly ProtocolNode[],
    keys: ReleaseKeys,
    leaseId: string,
    attempt: number,
  ): void {
    if (nodes.length === 0 || attempt >= RELEASE_RETRIES || this.closed) return;
    const delay = Math.min(this.context.settings.retryDelayMs * 2 ** attempt, RELEASE_RETRY_MAX_DELAY_MS);
    const timer = setTimeout(() => {
      this.retries.delete(timer);
      void this.releaseOn(nodes, keys, leaseId)
        .then(({ settled }) => settled)
        .then((replies) => this.retryLater(failedNodes(nodes, replies), keys, leaseId, attempt + 1));
    }, delay);
    timer.unref();
    this.retries.add(timer);
  }
}

function failedNodes(nodes: readonly ProtocolNode[], replies: readonly NodeReply<unknown>[]): ProtocolNode[] {
  return nodes.filter((_, i) => replies[i]?.state === 'error');
}
