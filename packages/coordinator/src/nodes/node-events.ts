// Node state changes, told once each: derived from the node view (NodeStatus) after every probe round, repair
// step and abstention, compared with what was told before. The coordinator emits them as `nodeState` events and
// publishes them on the `fenced:node` diagnostics channel (node:diagnostics_channel), so that an application
// or an APM tool sees a node go down, come back, be refused as unsafe, or the quorum be lost, without polling.
import { NOT_REDIS } from './node-connection.js';

/** The slice of a node's `NodeStatus` (node-set.ts) a state is read from. */
interface NodeView {
  readonly node: number;
  readonly address: string;
  readonly reachable: boolean;
  readonly voting: boolean;
  readonly problems: readonly string[];
  readonly repair?: unknown;
}

/** The diagnostics channel (`node:diagnostics_channel`) the coordinator publishes {@link NodeStateEvent}s on. */
export const NODE_STATE_CHANNEL = 'fenced:node';

/** What changed. */
export type NodeStateChange =
  | 'up'
  | 'down'
  | 'not-redis'
  | 'unsafe'
  | 'voting'
  | 'not-voting'
  | 'repair-started'
  | 'repair-finished'
  | 'quorum-lost'
  | 'quorum-regained';

/** One node state change (or, for `quorum-lost` / `quorum-regained`, one change of the whole set). */
export interface NodeStateEvent {
  readonly change: NodeStateChange;
  /** The node's index, or `null` for a quorum change. */
  readonly node: number | null;
  /** host:port (never credentials), or `null` for a quorum change. */
  readonly address: string | null;
  /** In words: why (the node's problems), or the voting count against the quorum. */
  readonly detail: string;
  /** For `unsafe`: each setting that is wrong, in words. */
  readonly settings?: readonly string[];
  /** For `unsafe`: whether the node votes anyway (`unsafeAllowUnsafeNodes`). */
  readonly accepted?: boolean;
  /** Nodes that vote now, and the quorum. */
  readonly voting: number;
  readonly quorum: number;
}

interface Seen {
  reachable: boolean;
  notRedis: boolean;
  unsafe: string;
  voting: boolean;
  repairing: boolean;
}

/** Compares each node view with the last one told, and tells what changed, once. */
export class NodeStateTracker {
  private readonly seen = new Map<number, Seen>();
  private quorumHeld: boolean | undefined;

  constructor(
    private readonly quorum: number,
    private readonly allowUnsafe: boolean,
    private readonly tell: (event: NodeStateEvent) => void,
  ) {}

  /** Takes the current view of every node; tells each change since the last view. */
  observe(statuses: readonly NodeView[], configProblems: (node: number) => readonly string[]): void {
    const voting = statuses.filter((s) => s.voting).length;
    const base = { voting, quorum: this.quorum };
    for (const status of statuses) {
      const detail = status.problems.join('; ') || 'ok';
      const settings = configProblems(status.node);
      const now: Seen = {
        reachable: status.reachable,
        notRedis: !status.reachable && status.problems.some((p) => p.includes(NOT_REDIS)),
        unsafe: settings.join('; '),
        voting: status.voting,
        repairing: status.repair !== undefined,
      };
      const before = this.seen.get(status.node);
      this.seen.set(status.node, now);
      const node = { ...base, node: status.node, address: status.address, detail };
      if (before?.reachable !== now.reachable || before.notRedis !== now.notRedis) {
        if (now.notRedis) this.tell({ ...node, change: 'not-redis' });
        else if (now.reachable) this.tell({ ...node, change: 'up' });
        else this.tell({ ...node, change: 'down' });
      }
      if (now.unsafe !== '' && now.unsafe !== (before?.unsafe ?? '')) {
        this.tell({ ...node, change: 'unsafe', settings, accepted: this.allowUnsafe });
      }
      if (before === undefined ? !now.voting : before.voting !== now.voting) {
        this.tell({ ...node, change: now.voting ? 'voting' : 'not-voting' });
      }
      if (now.repairing !== (before?.repairing ?? false)) {
        this.tell({ ...node, change: now.repairing ? 'repair-started' : 'repair-finished' });
      }
    }
    const held = voting >= this.quorum;
    if (held !== this.quorumHeld && (this.quorumHeld !== undefined || !held)) {
      const detail = `${voting} of ${statuses.length} nodes vote; the quorum is ${this.quorum}`;
      this.tell({
        ...base,
        node: null,
        address: null,
        detail,
        change: held ? 'quorum-regained' : 'quorum-lost',
      });
    }
    this.quorumHeld = held;
  }
}
