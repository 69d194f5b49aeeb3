/**
 * Folding (DESIGN §3, "memory bounded by active resources"): a fold pass moves the token registers of idle
 * resources into each node's floor, so a node holds keys only for live leases and recently used resources, plus
 * one floor key.
 *
 * Why it is safe: fold.lua deletes a register only in the same atomic call that raises the node's floor to at
 * least its value, and an absent register reads as the floor (lua/include/decimal-token.lua). So each node's
 * answer for every resource stays at least every value it ever promised for it, and the uniqueness and
 * monotonicity argument of tokens/promise-rounds.ts holds exactly as before. Which registers go (idle: no live
 * lease, untouched for `tokenRetentionMs`) is an efficiency choice only: a resource used again soon would otherwise
 * read the raised floor and need a second token round. Nothing here depends on a clock for safety; OBJECT IDLETIME
 * only picks the registers.
 *
 * A pass runs on voting nodes only (fold.lua itself refuses a node that is empty or under repair), one SCAN step
 * per call so that no call blocks a node for long, and one process per node and interval does the work (the fold
 * lock): the others find it busy.
 *
 * Paced: a pass scans every key of a node, about 1.2 µs of node time per key (bench/probes/fold-cost.ts), so a node
 * holding a million leases spends some 2.4 s on one pass. Back to back, that is 2.6 s in which the node spends
 * nine tenths of its time on the pass, on every node at once (one process starts the pass on all of them), and
 * acquires queue behind it. So after each step the pass waits until its steps have taken at most
 * {@link FOLD_TIME_SHARE} of its time on that node, as Redis bounds its own active expiry; a step that took longer
 * because the node or the machine was busy buys a longer pause. A pass that runs longer than half its interval
 * keeps its lock (fold.lua, ClusterMember.fold), so no second process starts a pass beside it. What it costs:
 * memory (an idle register may stay until its retention plus one paced pass: 37 s for a million leases), and
 * node CPU (a paced pass took about 40 % more than one back to back, measured on a 2-core machine).
 *
 * Tests that fail when this breaks: test/unit/coordinator/protocol/protocol-simulation.test.ts (folding among promises
 * and repairs), test/integration/coordinator/nodes/fold.test.ts, test/fault/folding.test.ts (F21), and the mutation
 * table's "fold without raising the floor" and "absent register reads zero" rows.
 */
import type { FoldReply } from '../scripts/script-results.js';

/** The slice of a node a fold pass needs. */
export interface FoldNode {
  readonly index: number;
  /** One SCAN step of a fold pass (fold.lua). */
  fold(
    timeoutMs: number,
    cursor: string,
    count: number,
    minIdleSeconds: number,
    passIntervalMs: number,
  ): Promise<FoldReply>;
}

export interface FoldPass {
  readonly nodes: readonly FoldNode[];
  /** Whether node `index` votes now: a pass skips the others. */
  isVoting(index: number): boolean;
  readonly tokenRetentionMs: number;
  /** Bound of one fold call. */
  readonly callTimeoutMs: number;
  /** Aborted when the owner closes: the pass stops between steps. */
  readonly signal: AbortSignal;
  /** Milliseconds from a monotonic clock (performance.now), to time each step. */
  now(): number;
  /** Resolves after `ms`, or early once `signal` aborts; never rejects. */
  pause(ms: number): Promise<void>;
}

/** Registers per fold step (SCAN COUNT hint): bounds how long one step blocks a node. */
export const FOLD_BATCH = 500;

/**
 * The largest share of a node's time that a fold pass's steps may take (as the pass sees them: call to reply): after
 * a step of `t` ms, the pass waits `t × (1 − share) / share` ms.
 */
export const FOLD_TIME_SHARE = 0.1;

/**
 * The pause after a fold step that took `stepMs`: what keeps the steps at {@link FOLD_TIME_SHARE} of the pass's
 * time, but at most a quarter of the pass interval, so the pass's lock (renewed by a step once half of it is gone)
 * cannot lapse during a pause.
 */
export function foldPauseMs(stepMs: number, passIntervalMs: number): number {
  return Math.min((Math.max(0, stepMs) * (1 - FOLD_TIME_SHARE)) / FOLD_TIME_SHARE, passIntervalMs / 4);
}

/** How often fold passes start: half the retention, at least every second, at most every minute. */
export function foldIntervalMs(tokenRetentionMs: number): number {
  return Math.min(60_000, Math.max(1_000, Math.floor(tokenRetentionMs / 2)));
}

/** One fold pass over every voting node; returns how many registers it folded. */
export async function foldIdleRegisters(pass: FoldPass): Promise<number> {
  const retentionMs = pass.tokenRetentionMs;
  // OBJECT IDLETIME counts whole seconds, so round up: a register is never folded before the retention.
  const minIdleSeconds = Math.ceil(retentionMs / 1_000) + 1;
  const intervalMs = foldIntervalMs(retentionMs);
  let folded = 0;
  await Promise.all(
    pass.nodes
      .filter((node) => pass.isVoting(node.index))
      .map(async (node) => {
        let cursor = '0';
        do {
          if (pass.signal.aborted) return;
          const started = pass.now();
          const reply = await node.fold(pass.callTimeoutMs, cursor, FOLD_BATCH, minIdleSeconds, intervalMs);
          if (reply.kind !== 'folded') return; // busy (another process's pass), empty, or corrupt
          folded += reply.folded;
          cursor = reply.cursor;
          if (cursor !== '0') await pass.pause(foldPauseMs(pass.now() - started, intervalMs));
        } while (cursor !== '0');
      }),
  );
  return folded;
}
