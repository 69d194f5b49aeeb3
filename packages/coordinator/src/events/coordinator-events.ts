// The events a `Coordinator` emits, and the sinks that turn what its node set reports into them.
import { channel } from 'node:diagnostics_channel';
import type { EventEmitter } from 'node:events';
import { NODE_STATE_CHANNEL, type NodeStateEvent } from '../nodes/node-events.js';
import type { NodeRepairStatus } from '../nodes/node-set.js';

/** Payload of the `nodeError` event: a call to one node failed (timeout, connection, malformed reply, ...). */
export interface NodeErrorEvent {
  node: number;
  address: string;
  operation: string;
  error: unknown;
}

/** Payload of the `repairProgress` event: a repair this coordinator runs took a step (DESIGN §3). */
export interface RepairProgressEvent {
  node: number;
  address: string;
  /** The step: its phase, registers copied so far, and the same in words. */
  repair: NodeRepairStatus;
}

/** The events a `Coordinator` emits, each with its one payload (`coordinator.on('nodeState', (event) => …)`). */
export interface CoordinatorEvents {
  nodeError: [NodeErrorEvent];
  repairProgress: [RepairProgressEvent];
  nodeState: [NodeStateEvent];
}

/** Where node state changes are published, besides the `nodeState` event (`node:diagnostics_channel`). */
const nodeStateChannel = channel(NODE_STATE_CHANNEL);

/** The sinks a node set reports to (nodes/node-set.ts's constructor takes each). */
export interface NodeEventSinks {
  readonly nodeError: (node: number, operation: string, error: unknown) => void;
  readonly repairProgress: (node: number, repair: NodeRepairStatus) => void;
  readonly nodeState: (event: NodeStateEvent) => void;
}

/**
 * What the node set reports, as the owner's events: `addressOf` names a node by its address once the node set
 * exists (a report made while it is being built names it `node <i>`).
 */
export function coordinatorEventSinks(
  emitter: EventEmitter<CoordinatorEvents>,
  addressOf: (node: number) => string | undefined,
): NodeEventSinks {
  const unsafeWarned = new Set<number>();
  return {
    nodeError: (node, operation, error) => {
      emitter.emit('nodeError', { node, address: addressOf(node) ?? `node ${node}`, operation, error });
    },
    repairProgress: (node, repair) => {
      emitter.emit('repairProgress', { node, address: addressOf(node) ?? `node ${node}`, repair });
    },
    nodeState: (event) => {
      emitter.emit('nodeState', event);
      if (nodeStateChannel.hasSubscribers) nodeStateChannel.publish(event);
      // A node refused as unsafe makes the coordinator refuse to start or to count it: say so once even when
      // nobody listens to either, rather than only through a QuorumUnavailableError later.
      else if (
        event.change === 'unsafe' &&
        !event.accepted &&
        event.node !== null &&
        emitter.listenerCount('nodeState') === 0 &&
        !unsafeWarned.has(event.node)
      ) {
        unsafeWarned.add(event.node);
        process.emitWarning(
          `fenced: node ${event.node} (${event.address}) refused: ${event.settings?.join('; ')} — it could lose fencing tokens; fix its configuration (or set unsafeAllowUnsafeNodes for development only)`,
          { code: 'FENCED_UNSAFE_NODE' },
        );
      }
    },
  };
}
