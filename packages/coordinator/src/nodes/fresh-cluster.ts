/**
 * Initializing a brand-new cluster (DESIGN §3: "a node is never initialized while some other node might hold state
 * it lacks").
 *
 * A node votes only while it holds its incarnation key. A node without one is either new (the cluster never ran)
 * or lost its state; the second kind must be repaired (nodes/repair.ts), because a grant may have counted a promise
 * it lost. Telling the two apart from one observation of every node is not enough: the observations are made one
 * node at a time, and between "every node looks new" and the write that initializes node X, another process can
 * initialize the cluster, a grant can be promised by X and others, and X can restart empty. Initializing X then
 * puts an empty node back among voters whose peers hold a promise it lacks — a later majority of X and nodes that
 * missed the grant goes below it (the test in test/unit/coordinator/nodes/fresh-cluster.test.ts reproduces it).
 *
 * So the initialization runs in three steps, each on every node, each step only after the previous one was
 * acknowledged by every node:
 *
 * 1. **Mark** every node (fresh-init.lua 'mark'): a key holding this initialization's nonce. A node that restarts
 *    loses the mark with everything else.
 * 2. **Check** every node (fresh-init.lua 'check', then a SCAN for resource keys): no incarnation key, our mark
 *    still there, no lease, register or floor.
 * 3. **Initialize** every node whose mark is still ours (fresh-init.lua 'init', atomically with the mark check).
 *
 * Why it is safe: suppose step 3 initializes node X while some grant G counted a promise of X that X no longer has.
 * X still holds our mark, so it has not restarted since step 1 on X (t1), and it is uninitialized; so X promised G
 * before t1 and lost it by restarting before t1. G's majority holds at least one other node Y that did not lose its
 * state (a quorum protocol survives at most N − quorum lost nodes, and 2·quorum − N ≥ 1), and Y was initialized
 * before G, hence before t1 — and still is. Step 2 read Y after every step-1 mark was acknowledged, so after t1: it
 * saw Y initialized and gave up. Contradiction. The argument speaks of one process's own mark and its own checks, so
 * several processes initializing at once are each safe: every node keeps one mark per process (a key named by its nonce),
 * and a node another process initialized first answers `initialized` at step 3 — the state we wanted.
 *
 * Tests that fail when this breaks: test/unit/coordinator/nodes/fresh-cluster.test.ts (the schedule above, and the
 * one-observation initialization as its negative control), test/integration/coordinator/lease/lifecycle.test.ts.
 */
import { randomUUID } from 'node:crypto';
import type { FreshInitReply } from '../scripts/script-results.js';

/** One step of fresh-init.lua: `argument` is the mark's ttl ('mark'), the incarnation id ('init'), or ''. */
export interface FreshInitStep {
  readonly step: 'mark' | 'check' | 'init';
  readonly nonce: string;
  readonly argument: string | number;
  /** The cluster's settings, recorded by 'init'. */
  readonly settings?: Readonly<Record<string, string>>;
}

/** The slice of a node a fresh initialization needs. */
export interface FreshInitNode {
  freshInit(timeoutMs: number, request: FreshInitStep): Promise<FreshInitReply>;
  /** Whether the node holds a lease, a token register or a floor. */
  hasResourceKeys(timeoutMs: number): Promise<boolean>;
}

export interface FreshInitOptions {
  /** Bound of each call. */
  readonly timeoutMs: number;
  /** How long a mark lives if this process dies before step 3. */
  readonly markTtlMs: number;
  /** The cluster's settings recorded on every node step 3 initializes (nodes/cluster-settings.ts). @defaultValue none */
  readonly settings?: Readonly<Record<string, string>>;
  /** Which nodes step 3 initializes (every node is marked and checked). @defaultValue all of them */
  readonly initialize?: (index: number) => boolean;
  /** A fresh random id (nonce, incarnations). */
  readonly newId?: () => string;
}

/**
 * What a fresh initialization did: `initialized` lists the nodes that hold their incarnation key after step 3 (by
 * position in `nodes`), whether this process or a concurrent one set it.
 */
export type FreshInitOutcome =
  | { readonly kind: 'initialized'; readonly initialized: readonly number[] }
  /** The cluster is not fresh (or another process initialized a node first), a node lost our mark or did not answer. */
  | { readonly kind: 'gave-up'; readonly why: string };

/**
 * Initializes every node of a cluster that has never run (see the argument above). Returns without writing an
 * incarnation key anywhere unless every node was marked and checked; never throws for a node's failure.
 */
export async function initializeFreshCluster(
  nodes: readonly FreshInitNode[],
  options: FreshInitOptions,
): Promise<FreshInitOutcome> {
  const newId = options.newId ?? randomUUID;
  const nonce = newId();
  const { timeoutMs } = options;
  try {
    // Step 1: mark every node. An initialized node means the cluster is not fresh.
    const marks = await Promise.all(
      nodes.map((n) => n.freshInit(timeoutMs, { step: 'mark', nonce, argument: options.markTtlMs })),
    );
    if (marks.some((m) => m.kind !== 'ok')) return { kind: 'gave-up', why: 'a node is initialized' };
    // Step 2: only now check every node — after the last mark was acknowledged.
    const checks = await Promise.all(
      nodes.map((n) => n.freshInit(timeoutMs, { step: 'check', nonce, argument: '' })),
    );
    const notOurs = checks.find((c) => c.kind !== 'ok');
    if (notOurs !== undefined) {
      return {
        kind: 'gave-up',
        why: notOurs.kind === 'initialized' ? 'a node is initialized' : 'a node lost our mark',
      };
    }
    const withKeys = await Promise.all(nodes.map((n) => n.hasResourceKeys(timeoutMs)));
    if (withKeys.includes(true)) return { kind: 'gave-up', why: 'a node holds resource keys' };
  } catch (error) {
    return { kind: 'gave-up', why: `a node did not answer: ${(error as Error).message}` };
  }
  // Step 3: each node is initialized only while our mark is still on it (atomically, in the script).
  const chosen = options.initialize ?? (() => true);
  const results = await Promise.allSettled(
    nodes.map((n, i) =>
      chosen(i)
        ? n.freshInit(timeoutMs, { step: 'init', nonce, argument: newId(), settings: options.settings ?? {} })
        : Promise.resolve({ kind: 'skipped' as const }),
    ),
  );
  const initialized = results.flatMap((r, i) =>
    r.status === 'fulfilled' && (r.value.kind === 'ok' || r.value.kind === 'initialized') ? [i] : [],
  );
  return { kind: 'initialized', initialized };
}
