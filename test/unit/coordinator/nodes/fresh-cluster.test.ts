// A fresh cluster is initialized only while no node can hold state another lacks (nodes/fresh-cluster.ts). The
// nodes here are in memory with fresh-init.lua's semantics (test/integration/coordinator/nodes/fresh-init.test.ts pins
// the script itself); the algorithm is the real one. Negative controls: mutants 17 and 18 of test/mutants/.
import { describe, expect, it } from 'vitest';
import {
  initializeFreshCluster,
  type FreshInitNode,
  type FreshInitStep,
} from '../../../../packages/coordinator/src/nodes/fresh-cluster.js';
import type { FreshInitReply } from '../../../../packages/coordinator/src/scripts/script-results.js';

/** One Redis node's state as the fresh initialization and a token register see it. */
class MemoryNode implements FreshInitNode {
  incarnation: string | null = null;
  readonly marks = new Set<string>();
  register = 0n;
  /** Runs before each call this node receives: the schedule's hook. */
  beforeCall: () => void = () => undefined;

  constructor(readonly name: string) {}

  freshInit(_timeoutMs: number, { step, nonce, argument }: FreshInitStep): Promise<FreshInitReply> {
    this.beforeCall();
    // fresh-init.lua, line for line.
    if (this.incarnation !== null) return Promise.resolve({ kind: 'initialized' });
    if (step === 'mark') {
      this.marks.add(nonce);
      return Promise.resolve({ kind: 'ok' });
    }
    if (!this.marks.has(nonce)) return Promise.resolve({ kind: 'init-mark-lost' });
    if (step === 'init') {
      this.incarnation = String(argument);
      this.marks.clear();
    }
    return Promise.resolve({ kind: 'ok' });
  }

  hasResourceKeys(): Promise<boolean> {
    this.beforeCall();
    return Promise.resolve(this.register !== 0n);
  }

  /** A restart without data: everything is gone. */
  restartEmpty(): void {
    this.incarnation = null;
    this.marks.clear();
    this.register = 0n;
  }
}

const OPTIONS = { timeoutMs: 1_000, markTtlMs: 30_000 };

/** Whether a majority of initialized nodes would promise a token below `token` (G2 broken for a later grant). */
function majorityBelow(nodes: readonly MemoryNode[], token: bigint): boolean {
  const quorum = Math.floor(nodes.length / 2) + 1;
  return nodes.filter((n) => n.incarnation !== null && n.register < token).length >= quorum;
}

describe('initializing a fresh cluster', () => {
  it('initializes every node of a cluster that never ran', async () => {
    const nodes = ['A', 'B', 'C'].map((name) => new MemoryNode(name));
    const outcome = await initializeFreshCluster(nodes, OPTIONS);
    expect(outcome).toEqual({ kind: 'initialized', initialized: [0, 1, 2] });
    expect(nodes.every((n) => n.incarnation !== null && n.marks.size === 0)).toBe(true);
  });

  it('gives up when any node is initialized or holds a register', async () => {
    const initialized = ['A', 'B', 'C'].map((name) => new MemoryNode(name));
    initialized[1]!.incarnation = 'old';
    expect((await initializeFreshCluster(initialized, OPTIONS)).kind).toBe('gave-up');
    expect(initialized[0]!.incarnation).toBeNull();

    const withRegister = ['A', 'B', 'C'].map((name) => new MemoryNode(name));
    withRegister[2]!.register = 7n;
    expect((await initializeFreshCluster(withRegister, OPTIONS)).kind).toBe('gave-up');
    expect(withRegister.every((n) => n.incarnation === null)).toBe(true);
  });

  it('never re-initializes a node that voted and restarted empty while the initialization ran', async () => {
    // The other process, a grant and C's restart land between any two calls of this initialization.
    const initialize = async (nodes: readonly MemoryNode[], at: number): Promise<void> => {
      const [a, , c] = nodes as [MemoryNode, MemoryNode, MemoryNode];
      let calls = 0;
      for (const node of nodes) {
        node.beforeCall = () => {
          if (calls++ !== at) return;
          // Another coordinator initializes the whole cluster (its calls do not go through this hook).
          for (const n of nodes) {
            n.incarnation ??= `other-${n.name}`;
            n.marks.clear();
          }
          // Grant G: A and C promise token 1000; then C restarts empty.
          a.register = 1000n;
          c.register = 1000n;
          c.restartEmpty();
        };
      }
      await initializeFreshCluster(nodes, OPTIONS);
    };
    // 3 marks + 3 checks + 3 scans + 3 inits: the interference before each of them.
    for (let scheduleAt = 0; scheduleAt < 12; scheduleAt++) {
      const nodes = ['A', 'B', 'C'].map((name) => new MemoryNode(name));
      await initialize(nodes, scheduleAt);
      expect(
        majorityBelow(nodes, 1000n),
        `interference before call ${scheduleAt}: C initialized empty beside B`,
      ).toBe(false);
    }
  });

  it('lets several concurrent initializations all succeed, each on its own marks', async () => {
    const nodes = ['A', 'B', 'C'].map((name) => new MemoryNode(name));
    const outcomes = await Promise.all([
      initializeFreshCluster(nodes, OPTIONS),
      initializeFreshCluster(nodes, OPTIONS),
      initializeFreshCluster(nodes, OPTIONS),
    ]);
    expect(nodes.every((n) => n.incarnation !== null)).toBe(true);
    expect(outcomes).toEqual(outcomes.map(() => ({ kind: 'initialized', initialized: [0, 1, 2] })));
  });
});
