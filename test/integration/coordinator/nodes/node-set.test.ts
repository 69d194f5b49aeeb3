// The node set (nodes/node-set.ts) on real redis-server processes: it initializes fresh nodes at start and counts
// them voting, names each node that does not vote (and why) when the quorum is out of reach, and reads the cluster's
// settings again when a node refused a call for them: it adopts a recorded value its caller did not set, and refuses
// one its caller set. Fresh initialization, repair and folding have tests of their own (fresh-cluster, repair, fold).
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedisNode } from '@fenced/test-utils/redis-node';
import { resolveOptions } from '../../../../packages/coordinator/src/options.js';
import { ClusterSettingsError } from '../../../../packages/coordinator/src/nodes/cluster-settings.js';
import { NodeSet } from '../../../../packages/coordinator/src/nodes/node-set.js';
import { nodeStateKeys } from '../../../fixtures/coordinator-fixture.js';

let nodes: RedisNode[];
let raw: Redis[];
const sets: NodeSet[] = [];

beforeAll(async () => {
  nodes = await Promise.all([0, 1, 2].map(() => RedisNode.start()));
  raw = nodes.map((node) => new Redis(node.url));
});

afterEach(async () => {
  await Promise.all(sets.splice(0).map((set) => set.close()));
});

afterAll(async () => {
  for (const client of raw ?? []) client.disconnect();
  await Promise.all((nodes ?? []).map((node) => node.stop()));
});

/** A node set over `urls` with its own key prefix, as a Coordinator makes it. */
function nodeSet(urls: readonly string[], options: { maxTtlMs?: number; keyPrefix?: string } = {}) {
  const keyPrefix = options.keyPrefix ?? `ns-${randomUUID().slice(0, 8)}`;
  const settings = resolveOptions({ nodes: [...urls], keyPrefix, ...options });
  const errors: string[] = [];
  const set = new NodeSet(
    urls,
    settings,
    (node, operation, error) => errors.push(`${node} ${operation}: ${String(error)}`),
    new AbortController().signal,
  );
  sets.push(set);
  return { set, keyPrefix, errors };
}

describe('a node set', () => {
  it('initializes fresh nodes at start, and counts every node voting', async () => {
    const { set, keyPrefix } = nodeSet(nodes.map((n) => n.url));
    expect(set.quorum).toBe(2);
    expect(set.votingCount()).toBe(0);
    await set.started();
    expect(set.votingCount()).toBe(3);
    expect([0, 1, 2].map((i) => set.isVoting(i))).toEqual([true, true, true]);
    const incarnations = await Promise.all(raw.map((r) => r.exists(nodeStateKeys(keyPrefix).incarnation)));
    expect(incarnations).toEqual([1, 1, 1]);
  });

  it('names each node that failed or does not vote, and why, when a quorum is out of reach', async () => {
    const gone = await RedisNode.start();
    const unsafe = await RedisNode.start({ persistence: 'fsync-everysec' });
    const { set } = nodeSet([nodes[0]!.url, gone.url, unsafe.url]);
    await set.started();
    await gone.stop();
    await unsafe.stop();
    await set.nodeStatus();
    // Every voting node is asked (a node that was reachable at its last probe still votes: it may answer again);
    // the replies of one round, as a fan-out collects them.
    const replies = await Promise.all(
      set.nodes.map((node) =>
        set.isVoting(node.index)
          ? node
              .call('ping', 1_000, (c) => c.ping())
              .then(
                (value) => ({ state: 'ok', value: { kind: value } }) as const,
                (error: unknown) => ({ state: 'error', error }) as const,
              )
          : Promise.resolve({ state: 'pending' } as const),
      ),
    );
    const error = set.unavailable('no majority of nodes could vote', replies);
    expect(error.message).toMatch(
      /^quorum unavailable: no majority of nodes could vote \(quorum is 2 of 3\): node 1 \(127\.0\.0\.1:\d+\): .+; node 2 \(127\.0\.0\.1:\d+\): .*appendfsync is 'everysec'; it must be 'always'/,
    );
    expect(error.message).not.toMatch(/node 0/);
  });

  it('adopts a maxTtlMs recorded after it started, when its caller did not set one', async () => {
    const { set, keyPrefix } = nodeSet(nodes.map((n) => n.url));
    await set.started();
    const configured = set.settings.maxTtlMs;
    // Another process (the operator's `settings set max-ttl`) changed the cluster's maxTtlMs on every node.
    await Promise.all(raw.map((r) => r.hset(nodeStateKeys(keyPrefix).settings, 'maxTtlMs', configured * 2)));
    expect(await set.refreshSettings()).toBe(true);
    expect(set.settings.maxTtlMs).toBe(configured * 2);
    expect(await set.refreshSettings()).toBe(false);
  });

  it('refuses a recorded maxTtlMs other than the one its caller set', async () => {
    const { set, keyPrefix } = nodeSet(
      nodes.map((n) => n.url),
      { maxTtlMs: 90_000 },
    );
    await set.started();
    await Promise.all(raw.map((r) => r.hset(nodeStateKeys(keyPrefix).settings, 'maxTtlMs', 45_000)));
    await expect(set.refreshSettings()).rejects.toBeInstanceOf(ClusterSettingsError);
    await expect(set.refreshSettings()).rejects.toThrow(
      /configured with maxTtlMs 90000, but the cluster's maxTtlMs recorded on the nodes is 45000/,
    );
    expect(set.settings.maxTtlMs).toBe(90_000);
  });

  it('refuses to start over nodes recorded as a cluster of another size', async () => {
    const { set: three, keyPrefix } = nodeSet(nodes.map((n) => n.url));
    await three.started();
    const { set: two } = nodeSet([nodes[0]!.url, nodes[1]!.url], { keyPrefix });
    await expect(two.started()).rejects.toThrow(
      /configured with 2 nodes, but node 0 \(.*\) records a cluster of 3 nodes/,
    );
  });
});
