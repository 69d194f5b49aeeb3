import type { ResourceKeys } from '../keys/key-layout.js';
import { fanOut } from '../quorum/quorum.js';
import { votingCalls, type ProtocolContext } from '../nodes/protocol-node.js';

/**
 * Whether a majority of voting nodes holds a lease on the resource, and its token (the highest any of them
 * stores with the lease). Read-only; never returns a lease id. A view, not a guarantee: the lease may end a
 * moment later.
 * @throws QuorumUnavailableError when fewer than a majority of nodes could be read
 */
export async function inspectOnQuorum(
  context: ProtocolContext,
  keys: ResourceKeys,
): Promise<{ held: boolean; token?: bigint }> {
  const timeout = context.settings.nodeTimeoutMs;
  const result = await fanOut(
    votingCalls(context, (node) => node.inspect(timeout, keys)),
    (reply) => reply.kind === 'view' && reply.held,
  );
  context.noteAbstentions(result.replies);
  if (result.outcome === 'won') {
    let token: bigint | undefined;
    for (const reply of result.replies) {
      if (reply.state === 'ok' && reply.value.kind === 'view' && reply.value.token !== null) {
        if (token === undefined || reply.value.token > token) token = reply.value.token;
      }
    }
    return token === undefined ? { held: true } : { held: true, token };
  }
  const answered = result.replies.filter((r) => r.state === 'ok' && r.value.kind === 'view').length;
  const undecided = result.replies.filter((r) => r.state === 'pending').length;
  if (answered + undecided < context.quorum)
    throw context.unavailable('could not read a majority of nodes', result.replies);
  return { held: false };
}
