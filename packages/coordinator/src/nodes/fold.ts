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
 * Tests that fail when this breaks: test/unit/coordinator/protocol-simulation.test.ts (folding among promises
 * and repairs), test/integration/coordinator/folding.test.ts, test/fault/folding.test.ts (F21), and the mutation
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
}

/** Registers per fold step (SCAN COUNT hint): bounds how long one step blocks a node. */
export const FOLD_BATCH = 500;

/** How often fold passes start: half the retention, at least every second, at most every minute. */
export function foldIntervalMs(tokenRetentionMs: number): number {
  return Math.min(60_000, Math.max(1_000, Math.floor(tokenRetentionMs / 2)));
}

/** One fold pass over every voting node; returns how many registers it folded. */
export async function foldIdleRegisters(pass: FoldPass): Promise<number> {
  const retentionMs = pass.tokenRetentionMs;
  // OBJECT IDLETIME counts whole seconds, so round up: a register is never folded before the retention.
  const minIdleSeconds = Math.ceil(retentionMs / 1_000) + 1;
  let folded = 0;
  await Promise.all(
    pass.nodes
      .filter((node) => pass.isVoting(node.index))
      .map(async (node) => {
        let cursor = '0';
        do {
          if (pass.signal.aborted) return;
          const reply = await node.fold(
            pass.callTimeoutMs,
            cursor,
            FOLD_BATCH,
            minIdleSeconds,
            foldIntervalMs(retentionMs),
          );
          if (reply.kind !== 'folded') return; // busy (another process's pass), empty, or corrupt
          folded += reply.folded;
          cursor = reply.cursor;
        } while (cursor !== '0');
      }),
  );
  return folded;
}
