/**
 * The token rounds of an acquire (DESIGN §3): a quorum max-register.
 *
 * Invariant (G2): a token is handed out only when a majority of nodes *promised* it, and a node promises `t` only
 * when `t` is above every value it ever promised for that resource (acquire.lua / promise.lua: `t > cur`, then
 * `cur = t`, atomically; an absent register reads as the node's floor, which is at least every value folded away).
 *
 * Why that is enough, with no clock involved:
 * - Unique: two grants cannot both collect a majority of promises for the same `t`, because any two majorities
 *   share a node, and that node promises a value at most once.
 * - Monotonic: if grant A (token tA, promised by majority M_A) completed before grant B started, then every node of
 *   M_A already had `cur >= tA` when B asked. B's majority M_B shares a node with M_A, which refuses anything
 *   `<= tA`; so B's token is above tA.
 * - Both hold as long as no node of M_A forgets its register: the start-up checks demand fsync-always AOF and
 *   noeviction, and a node that restarted empty abstains until repaired (nodes/repair.ts keeps this argument
 *   valid for that case).
 *
 * The rounds ask only the nodes whose acquire granted the lease (`granted`), so each promise finds the lease record
 * and fixes its token (promise.lua): an extend or inspect then reports the grant's token (acquire.lua, "The record's
 * token"). No token argument rests on which nodes are asked: a token still needs a majority of promises.
 *
 * Proposals are chosen by tokens/proposal.ts: a good proposal lets the first round — folded into the acquire's own
 * script — finish in one round trip. A refused proposal costs this second round, proposing above every register
 * value (`cur`) the refusals reported. The rounds are bounded: refusals here mean other grants minted tokens meanwhile, and the
 * caller's wait loop retries the whole attempt.
 *
 * Tests that fail when this breaks: test/unit/coordinator/protocol/acquire-attempt.test.ts (a token accepted on fewer than
 * a quorum of promises; a second round sent to a node whose grant is not in), the protocol simulation
 * (test/unit/coordinator/protocol/protocol-simulation.test.ts), and the fault suite's token checker on real nodes.
 */
import type { QuorumUnavailableError } from '@fenced/shared';
import type { ResourceKeys } from '../keys/key-layout.js';
import { fanOut } from '../quorum/quorum.js';
import { votingCalls, type ProtocolContext } from '../nodes/protocol-node.js';
import type { TokenProposer } from './proposal.js';

/** How many extra promise rounds an acquire may spend when its first proposal was refused (DESIGN §3). */
export const MAX_PROMISE_ROUNDS = 4;

export type PromiseRoundsResult =
  | { readonly kind: 'promised'; readonly token: bigint }
  | { readonly kind: 'contended' }
  | { readonly kind: 'exhausted' }
  | { readonly kind: 'unavailable'; readonly error: QuorumUnavailableError; readonly retryable: boolean };

/**
 * Second (and later) token rounds: propose above every register value seen, until a majority promises.
 * Bounded: contention here means other holders minted tokens in between, and the caller retries the lease.
 */
export async function promiseRounds(
  context: ProtocolContext,
  proposer: TokenProposer,
  request: { readonly resource: string; readonly keys: ResourceKeys; readonly leaseId: string },
  refusedProposal: bigint,
  /**
   * The nodes to ask, by index: those whose acquire granted this lease. A promise is asked only where the lease
   * record already stands, so that it fixes the record's token to the one it promises (promise.lua); a node whose
   * acquire arrives after its promise would keep the refused proposal (acquire.lua, "The record's token").
   */
  granted: (index: number) => boolean,
): Promise<PromiseRoundsResult> {
  const { resource, keys, leaseId } = request;
  const timeout = context.settings.nodeTimeoutMs;
  let previousProposal = refusedProposal;
  for (let round = 0; round < MAX_PROMISE_ROUNDS; round++) {
    const proposal = proposer.nextAbove(resource, previousProposal);
    if (proposal === null) return { kind: 'exhausted' };
    previousProposal = proposal;
    const result = await fanOut(
      votingCalls(context, (node) => node.promise(timeout, keys, leaseId, proposal)).map((call, index) =>
        granted(index) ? call : null,
      ),
      (reply) => reply.kind === 'promised',
    );
    context.noteAbstentions(result.replies);
    for (const reply of result.replies) {
      if (reply.state === 'ok' && (reply.value.kind === 'promised' || reply.value.kind === 'refused')) {
        proposer.observe(resource, reply.value.cur);
      }
    }
    // The token is valid only with a majority of promises: `won` is exactly quorum votes for.
    if (result.outcome === 'won') return { kind: 'promised', token: proposal };
    const answered = result.replies.filter(
      (r) => r.state === 'ok' && (r.value.kind === 'promised' || r.value.kind === 'refused'),
    ).length;
    const pending = result.replies.filter((r) => r.state === 'pending').length;
    if (answered + pending < context.quorum) {
      return {
        kind: 'unavailable',
        error: context.unavailable('no majority of nodes answered the token promise', result.replies),
        // A majority just granted the lease, so the nodes are there: most likely slow, worth another attempt.
        retryable: true,
      };
    }
  }
  return { kind: 'contended' };
}
