import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import type { Coordinator, Lease } from '@fenced/coordinator';
import { QuorumUnavailableError } from '@fenced/shared';
import { NodeConnection } from '../../../../packages/coordinator/src/nodes/node-connection.js';
import { loadScriptSource, SCRIPT_NAMES } from '../../../../packages/coordinator/src/scripts/scripts.js';
import type { RedisNodes } from '@fenced/test-utils/redis-cluster';
import {
  DEFAULT_KEY_PREFIX,
  eventually,
  keysOf,
  nodeStateKeys,
  startCoordinatorFixture,
  unique,
  type CoordinatorFixture,
} from '../../../fixtures/coordinator-fixture.js';

// The coordinator sends the acquires (and the releases) issued in one event-loop turn to each node as one
// script call. These tests check, on real nodes, that a batch decides each call exactly as if it ran alone.

let env: RedisNodes;
let coordinator: Coordinator;
let raw: Redis[];
let cluster: CoordinatorFixture;

beforeAll(async () => {
  cluster = await startCoordinatorFixture(5);
  ({ env, coordinator, raw } = cluster);
});

afterAll(async () => {
  await cluster?.close();
});

const sha1 = (text: string): string => createHash('sha1').update(text).digest('hex');

/** EVALSHA + EVAL calls each node has run so far. */
async function scriptCalls(): Promise<number[]> {
  const stats = await Promise.all(raw.map((r) => r.info('commandstats')));
  return stats.map((s) =>
    ['evalsha', 'eval'].reduce(
      (sum, cmd) => sum + Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(s)?.[1] ?? 0),
      0,
    ),
  );
}

describe('batched acquire and release', () => {
  it('grants 300 acquires issued at once, each with its own lease and token, in far fewer script calls than acquires', async () => {
    const resources = Array.from({ length: 300 }, () => unique('batch'));
    // Warm up: the first call of a script on a node is EVALSHA, NOSCRIPT, then EVAL.
    await (await coordinator.acquire(unique('warm-up'), { ttlMs: 10_000 })).release();
    const before = await scriptCalls();
    const leases = await Promise.all(resources.map((r) => coordinator.acquire(r, { ttlMs: 10_000 })));
    const afterAcquire = await scriptCalls();
    // Tokens are per resource (their registers are independent), so leases of different resources may share one.
    expect(new Set(leases.map((l) => l.id)).size).toBe(300);
    for (const [i, lease] of leases.entries()) {
      expect(lease.resource).toBe(resources[i]);
      expect(await coordinator.inspect(lease.resource)).toEqual({ held: true, token: lease.token });
    }
    // 300 acquires in one turn: batches of at most 128, so 3 script calls per node (the INFO calls above are not
    // scripts). One call per acquire would be 300.
    for (const [node, calls] of afterAcquire.entries()) expect(calls - before[node]!).toBeLessThanOrEqual(3);
    await Promise.all(leases.map((l) => l.release()));
    for (const r of resources.slice(0, 20)) expect((await coordinator.inspect(r)).held).toBe(false);
  });

  it('lets exactly one of two acquires of the same resource in one batch win', async () => {
    const resource = unique('same-batch');
    const results = await Promise.all([
      coordinator.tryAcquire(resource, { ttlMs: 10_000 }),
      coordinator.tryAcquire(resource, { ttlMs: 10_000 }),
    ]);
    const winners = results.filter((r): r is Lease => r !== null);
    expect(winners).toHaveLength(1);
    await winners[0]!.release();
  });

  it('never sends a release ahead of an acquire queued before it on the same node', async () => {
    // An attempt can be decided lost before its votes are sent (nodes that do not vote count against at once);
    // its release is then queued in the same tick as its acquire and must still reach the node after it.
    const node = new NodeConnection(0, env.urls[0]!, DEFAULT_KEY_PREFIX, () => undefined, 1_000);
    node.nodeCount = env.urls.length;
    try {
      await node.waitUntilConnected(5_000);
      const resource = unique('order');
      const keys = keysOf(resource);
      const [acquired, released] = await Promise.all([
        node.acquire(1_000, keys, 'lease-id-0123456789abcd', 60_000, 123n),
        node.release(1_000, keys, 'lease-id-0123456789abcd'),
      ]);
      expect(acquired).toEqual({ kind: 'granted', promised: true });
      expect(released).toEqual({ kind: 'released' });
      expect(await raw[0]!.get(keys.lease)).toBeNull();
    } finally {
      await node.close();
    }
  });

  it('sends each node the seal epoch it last saw, where the same batch to the others is encoded once', async () => {
    // One batch of the same acquires to five nodes is encoded once (scripts.ts, runScript); a node whose epoch
    // differs must still receive its own, or it refuses the acquire as sealed and records nothing.
    const conns = env.urls.map(
      (url, i) => new NodeConnection(i, url, DEFAULT_KEY_PREFIX, () => undefined, 1_000),
    );
    const sealKey = nodeStateKeys(DEFAULT_KEY_PREFIX).seal;
    const before = await Promise.all(raw.map((r) => r.get(sealKey)));
    const epoch = `epoch-${unique('seal')}`;
    try {
      await Promise.all(conns.map((c) => c.waitUntilConnected(5_000)));
      conns.forEach((c, i) => {
        c.nodeCount = env.urls.length;
        c.sealEpoch = before[i] ?? '';
      });
      // Node 2 was sealed since (a repair read it), and this process knows its new epoch.
      await raw[2]!.set(sealKey, epoch);
      conns[2]!.sealEpoch = epoch;
      const resources = Array.from({ length: 3 }, () => unique('epochs'));
      const replies = await Promise.all(
        conns.flatMap((c) =>
          resources.map((r) => c.acquire(1_000, keysOf(r), 'lease-id-0123456789abcd', 60_000, 123n)),
        ),
      );
      expect(replies).toEqual(replies.map(() => ({ kind: 'granted', promised: true })));
      for (const r of raw) {
        for (const resource of resources) expect(await r.get(keysOf(resource).lease)).not.toBeNull();
      }
      await Promise.all(
        conns.flatMap((c) => resources.map((r) => c.release(1_000, keysOf(r), 'lease-id-0123456789abcd'))),
      );
    } finally {
      const old = before[2];
      await (old === null || old === undefined ? raw[2]!.del(sealKey) : raw[2]!.set(sealKey, old));
      await Promise.all(conns.map((c) => c.close()));
    }
  });

  it('fails a call whose script the node lost instead of running it late, then reloads the scripts', async () => {
    // The node lost its script cache (SCRIPT FLUSH, or a restart) and has since cached only release.lua. An
    // EVAL fallback would run the acquire a round trip late, after the release queued behind it, and leave its
    // key for the whole ttl.
    const node = new NodeConnection(0, env.urls[0]!, DEFAULT_KEY_PREFIX, () => undefined, 1_000);
    node.nodeCount = env.urls.length;
    try {
      await node.waitUntilConnected(5_000);
      // The connection's own SCRIPT LOADs (sent on 'ready') must all have run before the flush: a node reads a
      // long pipeline in pieces, so under load a flush from another connection can land between them and leave
      // acquire.lua cached after it.
      const shas = SCRIPT_NAMES.map((name) => sha1(loadScriptSource(name)));
      await eventually(async () =>
        ((await raw[0]!.script('EXISTS', ...shas)) as number[]).every((cached) => cached === 1),
      );
      await raw[0]!.script('FLUSH');
      await raw[0]!.script('LOAD', loadScriptSource('release'));
      const keys = keysOf(unique('noscript'));
      const [acquired, released] = await Promise.allSettled([
        node.acquire(1_000, keys, 'lease-id-0123456789abcd', 60_000, 123n),
        node.release(1_000, keys, 'lease-id-0123456789abcd'),
      ]);
      expect(acquired.status).toBe('rejected');
      expect(String((acquired as PromiseRejectedResult).reason)).toMatch(/NOSCRIPT/);
      expect(released).toEqual({ status: 'fulfilled', value: { kind: 'not-held' } });
      expect(await raw[0]!.get(keys.lease)).toBeNull();
      // The NOSCRIPT reloaded every script: the next acquire runs.
      await eventually(
        async () =>
          ((await raw[0]!.script('EXISTS', sha1(loadScriptSource('acquire')))) as number[])[0] === 1,
      );
      expect(await node.acquire(1_000, keys, 'lease-id-0123456789abcd', 60_000, 124n)).toEqual({
        kind: 'granted',
        promised: true,
      });
      await node.release(1_000, keys, 'lease-id-0123456789abcd');
    } finally {
      await node.close();
    }
  });

  it('fails only the call whose key is broken; the rest of its batch is granted', async () => {
    const broken = unique('wrong-type');
    // A token register that is a hash, not a string: GET on it is a Redis error (WRONGTYPE) on every node.
    await Promise.all(raw.map((r) => r.hset(keysOf(broken).token, 'x', '1')));
    const healthy = Array.from({ length: 10 }, () => unique('healthy'));
    const errors: unknown[] = [];
    coordinator.on('nodeError', (event: { error: unknown }) => errors.push(event.error));
    const settled = await Promise.allSettled([
      coordinator.acquire(broken, { ttlMs: 10_000 }),
      ...healthy.map((r) => coordinator.acquire(r, { ttlMs: 10_000 })),
    ]);
    const [first, ...rest] = settled;
    expect(first.status).toBe('rejected');
    const reason = (first as PromiseRejectedResult).reason as Error;
    expect(reason).toBeInstanceOf(QuorumUnavailableError);
    expect(reason.message).toMatch(/WRONGTYPE/);
    expect(rest.every((r) => r.status === 'fulfilled')).toBe(true);
    expect(errors.some((e) => e instanceof Error && e.name === 'NodeCallError')).toBe(true);
    await Promise.all(rest.map((r) => (r as PromiseFulfilledResult<Lease>).value.release()));
    await Promise.all(raw.map((r) => r.del(keysOf(broken).token)));
  });
});
