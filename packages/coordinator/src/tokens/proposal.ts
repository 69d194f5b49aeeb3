import { MAX_TOKEN } from '@fenced/shared';

/**
 * How many resources a process remembers registers for: between half of this and all of it, the most recently
 * used (two generations, see `remember`).
 */
const REMEMBERED_RESOURCES = 10_000;

interface Memory {
  /** Highest register value a node reported for the resource. */
  seen: bigint;
  /** Highest value this process proposed for the resource. */
  lastProposal: bigint;
}

/**
 * Chooses token proposals (DESIGN §3): the value an acquire proposes to the nodes, which becomes the granted token
 * only once a majority promised it. Safety comes from that majority, never from how the proposal was chosen. A
 * good proposal lets the common case finish in one round trip:
 * `max(last register value seen for the resource + 1, time floor, last proposal for it + 1)`.
 *
 * The time floor `Date.now() << 20` (about 2^60.6 today, 2^63 in the year 2248) starts a fresh process above
 * the tokens other processes minted before, and leaves 2^20 tokens per millisecond. A wrong clock only costs a
 * second round, never safety; a time floor above 2^63 − 1 is ignored.
 */
export class TokenProposer {
  /** The generation being filled, and the one before it; a lookup that finds a resource in `older` moves it. */
  private recent = new Map<string, Memory>();
  private older = new Map<string, Memory>();

  constructor(private readonly now: () => number = Date.now) {}

  /** The round-one proposal for a resource; `null` when no larger token fits in 64 bits. */
  firstProposal(resource: string): bigint | null {
    const m = this.remember(resource);
    const timeFloor = BigInt(Math.max(0, Math.floor(this.now()))) << 20n;
    return this.propose(m, max(m.seen + 1n, m.lastProposal + 1n, timeFloor <= MAX_TOKEN ? timeFloor : 0n));
  }

  /** A proposal above every register value seen and above `refusedProposal`; `null` when exhausted. */
  nextAbove(resource: string, refusedProposal: bigint): bigint | null {
    const m = this.remember(resource);
    return this.propose(m, max(m.seen, m.lastProposal, refusedProposal) + 1n);
  }

  /** Records a register value a node reported (when promising, refusing or granting). */
  observe(resource: string, register: bigint): void {
    const m = this.remember(resource);
    if (register > m.seen) m.seen = register;
  }

  lastSeen(resource: string): bigint {
    return (this.recent.get(resource) ?? this.older.get(resource))?.seen ?? 0n;
  }

  private propose(m: Memory, proposal: bigint): bigint | null {
    if (proposal > MAX_TOKEN) return null;
    m.lastProposal = proposal;
    return proposal;
  }

  /**
   * The memory of a resource, made if missing. Two generations instead of a least-recently-used list: a resource is
   * found in `recent`, or moved there from `older`; when `recent` holds half the budget it becomes `older` and the
   * previous `older` is dropped whole. O(1) per call, with no Map iteration on the acquire path (evicting the oldest
   * key of one Map by iteration walks every deleted entry before it). Forgetting costs at most a second token
   * round, never safety: the nodes' registers are the truth.
   */
  private remember(resource: string): Memory {
    let m = this.recent.get(resource);
    if (m !== undefined) return m;
    m = this.older.get(resource) ?? { seen: 0n, lastProposal: 0n };
    if (this.recent.size >= REMEMBERED_RESOURCES / 2) {
      this.older = this.recent;
      this.recent = new Map();
    }
    this.recent.set(resource, m);
    return m;
  }
}

function max(...values: bigint[]): bigint {
  return values.reduce((a, b) => (a > b ? a : b));
}
