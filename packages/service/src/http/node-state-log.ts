import type { Logger } from 'pino';
import type { LeaseService, NodeStateEvent } from './lease-service.js';

/** Node state changes logged at info; the others (down, not Redis, unsafe, not voting, quorum lost) at warn. */
const GOOD_CHANGES: ReadonlySet<NodeStateEvent['change']> = new Set([
  'up',
  'voting',
  'repair-started',
  'repair-finished',
  'quorum-regained',
]);

/**
 * Logs each node state change the coordinator tells (its `nodeState` events, each change once): a node up or
 * down, not a Redis server, refused as unsafe (with the settings), voting or not, a repair started or finished,
 * the quorum lost or regained — good news at info, the rest at warn. `startServer` calls it as soon as the
 * coordinator exists, so the start-up view is logged too; an application that embeds `createApp` calls it on its
 * own coordinator. Returns the function that stops it.
 */
export function logNodeStates(coordinator: Pick<LeaseService, 'on' | 'off'>, logger: Logger): () => void {
  const onNodeState = (event: NodeStateEvent): void => {
    const fields = {
      change: event.change,
      node: event.node,
      address: event.address,
      detail: event.detail,
      voting: event.voting,
      quorum: event.quorum,
      ...(event.settings !== undefined ? { settings: event.settings, accepted: event.accepted } : {}),
    };
    const message =
      event.node === null ? event.change.replace('-', ' ') : `node ${event.change.replaceAll('-', ' ')}`;
    if (GOOD_CHANGES.has(event.change)) logger.info(fields, message);
    else logger.warn(fields, message);
  };
  coordinator.on('nodeState', onNodeState);
  return () => void coordinator.off('nodeState', onNodeState);
}
