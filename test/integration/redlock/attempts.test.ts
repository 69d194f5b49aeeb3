import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import Redlock, { ExecutionError, ResourceLockedError, type ExecutionStats } from '@fenced/redlock';
import { LeaseLostError } from '@fenced/shared';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { lockValue } from './redlock-fixture.js';

// redlock v5 semantics its users rely on, beyond what node-redlock's own tests check: attempts counted per
// attempt (also on success), each with every node's own vote, `retryCount: -1`, and the `error` event of a long
// lock whose keeper lost it.

let env: RedisNodes;
let nodes: Redis[];
const redlocks: Redlock[] = [];

function newRedlock(settings?: ConstructorParameters<typeof Redlock>[1]): Redlock {
  const redlock = new Redlock(nodes, settings);
  redlocks.push(redlock);
  return redlock;
}

beforeAll(async () => {
  env = await startRedisNodes(3);
  nodes = env.urls.map((url) => new Redis(url));
});

afterAll(async () => {
  await Promise.all(redlocks.map((r) => r.coordinator.close()));
  for (const node of nodes ?? []) node.disconnect();
  await env?.stop();
});

describe('@fenced/redlock attempts', () => {
  it('retryCount -1 keeps trying until granted; the lock lists every attempt, the refused ones first', async () => {
    const holder = newRedlock();
    const waiter = newRedlock({ retryCount: -1, retryDelay: 50, retryJitter: 0 });
    const held = await holder.acquire(['{attempts}forever'], 60_000);
    const pending = waiter.acquire(['{attempts}forever'], 5_000);
    // Held for more than one retry delay (plus one attempt's round), so the waiter was refused at least once.
    await sleep(300);
    await held.release();
    const lock = await pending;
    const attempts = await Promise.all(lock.attempts);
    expect(attempts.length).toBeGreaterThan(1);
    for (const refused of attempts.slice(0, -1)) {
      expect(refused.votesFor.size).toBe(0);
      expect(refused.votesAgainst.size).toBe(3);
      for (const vote of refused.votesAgainst.values()) expect(vote).toBeInstanceOf(ResourceLockedError);
    }
    expect(attempts.at(-1)!.votesFor.size).toBe(3);
    expect(attempts.at(-1)!.votesAgainst.size).toBe(0);
    await lock.release();
  });

  it('retryCount 0 makes exactly one attempt', async () => {
    const holder = newRedlock();
    const held = await holder.acquire(['{attempts}once'], 60_000);
    const error: unknown = await newRedlock({ retryCount: 0 })
      .acquire(['{attempts}once'], 1_000)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ExecutionError);
    expect((error as ExecutionError).attempts.length).toBe(1);
    await held.release();
  });
});

/** redlock's ResourceLockedError of a node that applied the call to `applied` of `count` resources. */
function lockedVote(applied: number, count: number): ResourceLockedError {
  return new ResourceLockedError(
    `The operation was applied to: ${applied} of the ${count} requested resources.`,
  );
}

/** Every client's vote in one attempt, by node index: 'for', or the error against. */
async function votesByNode(stats: Promise<ExecutionStats>): Promise<(string | Error)[]> {
  const { votesFor, votesAgainst, membershipSize, quorumSize } = await stats;
  expect(membershipSize).toBe(3);
  expect(quorumSize).toBe(2);
  expect(votesFor.size + votesAgainst.size).toBe(3);
  return nodes.map((node) => (votesFor.has(node) ? 'for' : votesAgainst.get(node)!));
}

describe('@fenced/redlock votes: each node its own', () => {
  // A holder planted by hand on the lease key (redlock's layout: the key is the resource name), as node-redlock's
  // own tests fake a holder.
  it('a granted acquire lists a minority node holding another value in votesAgainst, the others in votesFor', async () => {
    await nodes[2]!.set('{votes}minority', 'planted', 'PX', 60_000);
    const lock = await newRedlock({ retryCount: 0 }).acquire(['{votes}minority'], 5_000);
    expect(lock.attempts.length).toBe(1);
    const votes = await votesByNode(lock.attempts[0]!);
    expect(votes.slice(0, 2)).toEqual(['for', 'for']);
    expect(votes[2]).toBeInstanceOf(ResourceLockedError);
    expect(votes[2]).toEqual(lockedVote(0, 1));
    expect(await nodes[2]!.get('{votes}minority')).toBe('planted');
    await lock.release();
    await nodes[2]!.del('{votes}minority');
  });

  it('a refused acquire lists the node that granted in votesFor, the two holding another value against', async () => {
    await nodes[1]!.set('{votes}majority', 'planted-1', 'PX', 60_000);
    await nodes[2]!.set('{votes}majority', 'planted-2', 'PX', 60_000);
    const error: unknown = await newRedlock({ retryCount: 1, retryDelay: 10, retryJitter: 0 })
      .acquire(['{votes}majority'], 5_000)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ExecutionError);
    const attempts = (error as ExecutionError).attempts;
    expect(attempts.length).toBe(2);
    for (const attempt of attempts) {
      const votes = await votesByNode(attempt);
      expect(votes[0]).toBe('for');
      expect(votes[1]).toEqual(lockedVote(0, 1));
      expect(votes[2]).toEqual(lockedVote(0, 1));
    }
    // As redlock: the grant on the first node was released before giving up.
    expect(await nodes[0]!.get('{votes}majority')).toBeNull();
    for (const node of nodes.slice(1)) await node.del('{votes}majority');
  });

  it('a multi-resource acquire blocked on one node by one resource lists that node against', async () => {
    await nodes[0]!.set('{votes}multi-b', 'planted', 'PX', 60_000);
    const lock = await newRedlock({ retryCount: 0 }).acquire(['{votes}multi-a', '{votes}multi-b'], 5_000);
    const votes = await votesByNode(lock.attempts[0]!);
    expect(votes).toEqual([lockedVote(0, 2), 'for', 'for']);
    await lock.release();
    await nodes[0]!.del('{votes}multi-b');
  });

  it('extend lists a node whose key no longer holds the lock value against, the others for', async () => {
    const lock = await newRedlock().acquire(['{votes}extend'], 5_000);
    await nodes[1]!.set('{votes}extend', 'taken', 'PX', 60_000);
    const extended = await lock.extend(5_000);
    expect(extended.attempts.length).toBe(1);
    expect(await votesByNode(extended.attempts[0]!)).toEqual(['for', lockedVote(0, 1), 'for']);
    expect(await nodes[1]!.get('{votes}extend')).toBe('taken');
    await extended.release();
    await nodes[1]!.del('{votes}extend');
  });

  it('a lost extension reports the nodes that refused it', async () => {
    const lock = await newRedlock().acquire(['{votes}lost'], 5_000);
    for (const node of nodes.slice(1)) await node.set('{votes}lost', 'taken', 'PX', 60_000);
    const error: unknown = await lock.extend(5_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ExecutionError);
    expect((error as ExecutionError).cause).toBeInstanceOf(LeaseLostError);
    expect((error as ExecutionError).attempts.length).toBe(1);
    const votes = await votesByNode((error as ExecutionError).attempts[0]!);
    expect(votes).toEqual(['for', lockedVote(0, 1), lockedVote(0, 1)]);
    for (const node of nodes) await node.del('{votes}lost');
  });

  it('release lists a node that no longer held every resource against, with how many it released', async () => {
    const lock = await newRedlock().acquire(['{votes}release-a', '{votes}release-b'], 5_000);
    await nodes[2]!.del('{votes}release-b');
    const { attempts } = await lock.release();
    expect(attempts.length).toBe(1);
    expect(await votesByNode(attempts[0]!)).toEqual(['for', 'for', lockedVote(1, 2)]);
    for (const node of nodes) expect(await node.exists('{votes}release-a', '{votes}release-b')).toBe(0);
  });
});

describe('@fenced/redlock locks longer than maxTtlMs', () => {
  it('emits an `error` (ExecutionError caused by LeaseLostError) and zeroes expiration when the keeper loses the lock', async () => {
    const maxTtlMs = 1_000;
    // Its own key prefix: the maximum TTL is the cluster's setting under a prefix, and the other tests share the nodes.
    const keyPrefix = 'fenced-max-ttl';
    const redlock = newRedlock({ maxTtlMs, keyPrefix });
    const errors: Error[] = [];
    redlock.on('error', (error: Error) => errors.push(error));
    const lock = await redlock.acquire(['{attempts}kept'], 10 * maxTtlMs);
    expect(await lockValue(nodes[0]!, '{attempts}kept')).toBe(lock.value);
    // Another holder on every node: the keeper's next extension finds it.
    for (const node of nodes) await node.set('{attempts}kept', 'successor', 'PX', 60_000);
    for (let i = 0; i < 200 && errors.length === 0; i++) await sleep(20);
    const lost = errors.find((e) => e instanceof ExecutionError);
    expect(lost).toBeInstanceOf(ExecutionError);
    expect(lost!.cause).toBeInstanceOf(LeaseLostError);
    expect(lock.expiration).toBe(0);
    // The successor's keys are untouched.
    for (const node of nodes) expect(await node.get('{attempts}kept')).toBe('successor');
    for (const node of nodes) await node.del('{attempts}kept');
  });
});
