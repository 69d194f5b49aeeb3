// The wait loop of multi-resource acquires (protocol/acquire-within.ts) over a scripted context: the optimistic
// first round makes every resource's attempt at once, every later round (and every tryAcquire round) goes in lock
// order, and a partial grant is released before anything waits. The real-node behaviour (exclusion, no deadlock or
// livelock, no partial grant left) is in test/integration/coordinator/lease/multi-lease.test.ts.
import { describe, expect, it } from 'vitest';
import {
  acquireWithin,
  type AcquireLoopContext,
} from '../../../../packages/coordinator/src/protocol/acquire-within.js';
import type { AttemptResult } from '../../../../packages/coordinator/src/protocol/acquire-attempt.js';
import { ReleaseSubscription } from '../../../../packages/coordinator/src/protocol/waiters.js';
import { resourceKeys } from '../../../fixtures/keys.js';

type Event = `start ${string}` | `end ${string}` | `undo ${string}`;

/** A context whose attempts answer from `answer(resource, round)`, each after a macrotask, logging every step. */
function scripted(answer: (resource: string, round: number) => 'granted' | 'held') {
  const log: Event[] = [];
  const rounds = new Map<string, number>();
  let now = 0;
  const context: AcquireLoopContext = {
    minValidityMs: 0,
    retryDelayMs: 1,
    now: () => now,
    keysOf: (resource) => resourceKeys('fenced', resource),
    async attempt(resource): Promise<AttemptResult> {
      const round = (rounds.get(resource) ?? 0) + 1;
      rounds.set(resource, round);
      log.push(`start ${resource}`);
      await new Promise((resolve) => setImmediate(resolve));
      log.push(`end ${resource}`);
      now += 1;
      return answer(resource, round) === 'granted'
        ? { kind: 'granted', grant: { token: 1n, ttlMs: 1000, validityMs: 1000, validUntil: now + 1000 } }
        : { kind: 'failed', retryAfterMs: 1, contended: false };
    },
    async undo(keys): Promise<void> {
      const resource = ['a', 'b', 'c'].find((r) => resourceKeys('fenced', r).channel === keys.channel);
      log.push(`undo ${resource ?? '?'}`);
      await new Promise((resolve) => setImmediate(resolve));
    },
    subscribe: (_channel, _maxWaitMs, leaseId) =>
      Promise.resolve(new ReleaseSubscription(() => undefined, leaseId)),
    jitter: () => 0,
    sleep: () => Promise.resolve(),
    throwIfClosed: () => undefined,
  };
  return { context, log };
}

const request = (waitMs: number) => ({
  resources: ['a', 'b', 'c'],
  leaseId: 'lease-1',
  ttlMs: 1000,
  waitMs,
  signal: undefined,
});

describe('acquireWithin over several resources', () => {
  it('makes every attempt of the first round at once, and grants the set in that one round', async () => {
    const { context, log } = scripted(() => 'granted');
    const outcome = await acquireWithin(context, request(1000));
    expect(outcome.kind).toBe('granted');
    expect(log).toEqual(['start a', 'start b', 'start c', 'end a', 'end b', 'end c']);
  });

  it('releases the grants of a failed first round before going on in lock order, one attempt after another', async () => {
    // b is held in the first round only.
    const { context, log } = scripted((resource, round) =>
      resource === 'b' && round === 1 ? 'held' : 'granted',
    );
    const outcome = await acquireWithin(context, request(1000));
    expect(outcome.kind).toBe('granted');
    const firstRound = log.slice(0, 6);
    expect(firstRound.slice(0, 3)).toEqual(['start a', 'start b', 'start c']);
    const undos = log.slice(6).filter((e) => e.startsWith('undo'));
    expect(undos.sort()).toEqual(['undo a', 'undo c']);
    // Every undo comes before the next round's first attempt, and that round is sequential.
    const lastUndo = Math.max(log.lastIndexOf('undo a'), log.lastIndexOf('undo c'));
    expect(log.slice(lastUndo + 1)).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
  });

  it('goes in lock order from the first round when it may not wait (tryAcquire)', async () => {
    const { context, log } = scripted(() => 'granted');
    const outcome = await acquireWithin(context, request(0));
    expect(outcome.kind).toBe('granted');
    expect(log).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
  });
});
