/**
 * Where the node state a script depends on lives, for one quorum member: its *scopes*. A standalone Redis node has one
 * scope, its own node-state keys; a Redis Cluster member has one per hash slot, each slot's node state kept in that
 * slot (DESIGN §3c). Every vote, read and repair script runs on one scope, with that scope's keys, and everything this
 * process remembers about a member's node state is remembered per scope: whether it holds its incarnation key (it
 * votes), and the seal epoch it last saw (every promise-recording call carries it).
 *
 * The argument (DESIGN §3, §3c): a script is atomic on the one server holding its scope, and the scope's keys and the
 * resource's keys are in the same slot, so everything §3 argues for a node holds for each (member, scope) pair. A
 * reply that reveals a scope without its incarnation key stops that scope voting here at once (`lost`); only a
 * repair's or a probe's proof lets it vote again (`found`).
 *
 * Tests that fail when this breaks: test/unit/coordinator/nodes/node-scopes.test.ts,
 * test/fault/cluster-amnesia.test.ts, test/fault/flushed-node.test.ts.
 */
import { nodeStateKeys, type NodeStateKeys } from '../keys/key-layout.js';
import { keySlot, SLOT_COUNT } from '../keys/slots.js';

export class NodeScopes {
  /** How many scopes: 1 for a standalone node, SLOT_COUNT for a Cluster member. */
  readonly count: number;
  /** Per scope: 1 when it was last seen holding its incarnation key (it votes), 0 otherwise. */
  private readonly initialized: Uint8Array;
  private initializedCount = 0;
  /** Per scope: the seal epoch this process last saw. */
  private readonly epochs: string[];
  private readonly keys: (NodeStateKeys | undefined)[];
  /** Scopes this process is repairing now. */
  readonly underRepair = new Set<number>();

  constructor(
    private readonly prefix: string,
    /** Whether the member is a Redis Cluster: one scope per slot. */
    readonly perSlot: boolean,
  ) {
    this.count = perSlot ? SLOT_COUNT : 1;
    this.initialized = new Uint8Array(this.count);
    this.epochs = new Array<string>(this.count).fill('');
    this.keys = new Array<NodeStateKeys | undefined>(this.count);
  }

  /** The scope holding the node state for a resource whose keys include `key` (its record, say). */
  of(key: string): number {
    return this.perSlot ? keySlot(key) : 0;
  }

  /** The node-state keys of one scope (built once). */
  keysOf(scope: number): NodeStateKeys {
    let keys = this.keys[scope];
    if (keys === undefined) {
      keys = this.perSlot ? nodeStateKeys(this.prefix, scope) : nodeStateKeys(this.prefix);
      this.keys[scope] = keys;
    }
    return keys;
  }

  epochOf(scope: number): string {
    return this.epochs[scope]!;
  }

  /** The seal epoch a reply, a repair or a probe told for `scope`: this process's later rounds carry it. */
  sealed(scope: number, epoch: string): void {
    this.epochs[scope] = epoch;
  }

  /** Whether `scope` was last seen holding its incarnation key. */
  votes(scope: number): boolean {
    return this.initialized[scope] === 1;
  }

  /** Whether every scope holds its incarnation key (the member as a whole is initialized). */
  get all(): boolean {
    return this.initializedCount === this.count;
  }

  /** Whether any scope holds its incarnation key. */
  get any(): boolean {
    return this.initializedCount > 0;
  }

  /** Records whether `scope` holds its incarnation key. */
  set(scope: number, initialized: boolean): void {
    if ((this.initialized[scope] === 1) === initialized) return;
    this.initialized[scope] = initialized ? 1 : 0;
    this.initializedCount += initialized ? 1 : -1;
  }

  /** Records whether every scope holds its incarnation key. */
  setAll(initialized: boolean): void {
    this.initialized.fill(initialized ? 1 : 0);
    this.initializedCount = initialized ? this.count : 0;
  }

  /** Scopes last seen without their incarnation key (ascending). */
  empty(): number[] {
    return this.listWhere(0);
  }

  /** Scopes last seen holding their incarnation key (ascending). */
  voting(): number[] {
    return this.listWhere(1);
  }

  private listWhere(flag: 0 | 1): number[] {
    const scopes: number[] = [];
    for (let scope = 0; scope < this.count; scope++) if (this.initialized[scope] === flag) scopes.push(scope);
    return scopes;
  }

  /** How a log line names `scope` of the member at `address`. */
  describe(scope: number, address: string): string {
    return this.perSlot ? `slot ${scope} of ${address}` : `node ${address}`;
  }
}
