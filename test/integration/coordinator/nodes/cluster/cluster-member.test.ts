// Redis Cluster members (DESIGN §3c) on real clusters: leases and tokens through the library with three cluster
// members, and with a mixed quorum (two standalone masters and one cluster); per-slot node state.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Command } from 'ioredis';
import { Cluster, Redis } from 'ioredis';
import { Cluster as CopyCluster } from 'ioredis-copy';
import V4Redis from 'ioredis-v4';
import { Coordinator } from '@fenced/coordinator';
import { eventually } from '@fenced/test-utils/eventually';
import { RedisClusterMember } from '@fenced/test-utils/redis-cluster-member';
import { RedisNode } from '@fenced/test-utils/redis-node';
import { freshMarkKey, keySlot, nodeStateKeys, slotKeyTemplate, slotTag } from '../../../../fixtures/keys.js';
import { interpretReply } from '../../../../../packages/coordinator/src/scripts/script-results.js';
import { loadScripts, runScript } from '../../../../../packages/coordinator/src/scripts/scripts.js';

const members: RedisClusterMember[] = [];
const standalone: RedisNode[] = [];

beforeAll(async () => {
  for (let i = 0; i < 3; i++) members.push(await RedisClusterMember.start({ masters: 3 }));
  for (let i = 0; i < 2; i++) standalone.push(await RedisNode.start());
}, 120_000);

afterAll(async () => {
  await Promise.all([...members.map((m) => m.stop()), ...standalone.map((n) => n.stop())]);
});

/** Resources spread over many slots (hence every shard). */
const resources = Array.from({ length: 40 }, (_, i) => `cluster-res-${i}`);

describe('three Redis Cluster members', () => {
  let coordinator: Coordinator;
  beforeAll(async () => {
    coordinator = new Coordinator({ nodes: members.map((m) => m.member), keyPrefix: 'c3' });
    await coordinator.ready();
  }, 60_000);
  afterAll(async () => {
    await coordinator?.close();
  });

  it('covers every shard with the test resources', () => {
    const slots = new Set(resources.map((r) => keySlot(`c3:{${r}}:lease`)));
    expect([...slots].some((s) => s < 5461)).toBe(true);
    expect([...slots].some((s) => s >= 5461 && s < 10923)).toBe(true);
    expect([...slots].some((s) => s >= 10923)).toBe(true);
  });

  it('acquires, extends and releases leases with rising tokens on resources across every shard', async () => {
    for (const resource of resources) {
      const first = await coordinator.acquire(resource, { ttlMs: 5_000 });
      await first.extend(5_000);
      await first.release();
      const second = await coordinator.acquire(resource, { ttlMs: 5_000 });
      expect(second.token > first.token).toBe(true);
      await expect(coordinator.tryAcquire(resource, { ttlMs: 5_000 })).resolves.toBeNull();
      await second.release();
    }
  });

  it('grants one multi-resource lease over resources in different slots and shards', async () => {
    const lease = await coordinator.acquire(resources.slice(0, 12), { ttlMs: 5_000 });
    for (const resource of resources.slice(0, 12)) {
      await expect(coordinator.tryAcquire(resource, { ttlMs: 5_000 })).resolves.toBeNull();
    }
    await lease.release();
    const again = await coordinator.tryAcquire(resources[3]!, { ttlMs: 5_000 });
    expect(again).not.toBeNull();
    await again!.release();
  });

  it('keeps every node-state key in the slot of the resources it serves', async () => {
    const slot = keySlot('c3:{cluster-res-0}:lease');
    const master = await members[0]!.masterOf(slot);
    const client = new Redis(master.port, '127.0.0.1');
    try {
      const keys = await client.cluster('GETKEYSINSLOT', slot, 100);
      // On a member, the slot's floor is the token register of every resource of the slot: no register of its own.
      expect(keys).not.toContain('c3:{cluster-res-0}:token');
      const state = keys.filter((k) => k.startsWith('c3:node:')).sort();
      expect(state).toEqual([
        expect.stringMatching(/^c3:node:\{[a-z0-9]+\}:floor$/),
        expect.stringMatching(/^c3:node:\{[a-z0-9]+\}:incarnation$/),
        expect.stringMatching(/^c3:node:\{[a-z0-9]+\}:seal$/),
        expect.stringMatching(/^c3:node:\{[a-z0-9]+\}:settings$/),
      ]);
      // The slot's incarnation is stamped with the id of the shard that serves it (include/node-state.lua).
      const incarnation = await client.get(state.find((k) => k.endsWith(':incarnation'))!);
      expect(incarnation).toMatch(new RegExp(`@${await client.cluster('MYID')}$`));
    } finally {
      client.disconnect();
    }
  });

  it("reports each member's shards in nodeStatus()", async () => {
    const status = await coordinator.nodeStatus();
    expect(status.every((s) => s.voting)).toBe(true);
    for (const node of status) {
      expect(node.shards).toHaveLength(3);
      expect(node.shards!.reduce((n, s) => n + s.votingSlots, 0)).toBe(16384);
    }
  });
});

describe('initializing fresh Cluster members', () => {
  /** `read` on a connection of its own to each master of `member`, one after another; each result in turn. */
  async function eachMaster<T>(
    member: RedisClusterMember,
    read: (client: Redis) => Promise<T>,
  ): Promise<T[]> {
    const results: T[] = [];
    for (const master of member.masters) {
      const client = new Redis(master.port, '127.0.0.1');
      try {
        results.push(await read(client));
      } finally {
        client.disconnect();
      }
    }
    return results;
  }

  const sum = (counts: number[]): number => counts.reduce((a, b) => a + b, 0);

  /** The EVALSHA calls each master of `member` ran since its last CONFIG RESETSTAT. */
  const scriptCalls = async (member: RedisClusterMember): Promise<number> =>
    sum(
      await eachMaster(member, async (client) =>
        Number(/cmdstat_evalsha:calls=(\d+)/.exec(await client.info('commandstats'))?.[1] ?? 0),
      ),
    );

  /** The keys matching `pattern` on every master of `member`. */
  const keyCount = async (member: RedisClusterMember, pattern: string): Promise<number> =>
    sum(
      await eachMaster(member, async (client) => {
        let count = 0;
        let cursor = '0';
        do {
          const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 5000);
          count += keys.length;
          cursor = next;
        } while (cursor !== '0');
        return count;
      }),
    );

  it('initializes every slot of every member with a few scripts per shard, not one per slot', async () => {
    for (const member of members) await eachMaster(member, (client) => client.config('RESETSTAT'));
    const coordinator = new Coordinator({ nodes: members.map((m) => m.member), keyPrefix: 'fresh-shards' });
    try {
      await coordinator.ready();
      const status = await coordinator.nodeStatus();
      for (const node of status) {
        expect(node.shards!.reduce((n, s) => n + s.votingSlots, 0)).toBe(16384);
      }
      for (const member of members) {
        // Every slot holds its own incarnation key, on the master serving it.
        expect(await keyCount(member, 'fresh-shards:node:*:incarnation')).toBe(16384);
        // Mark, check and initialize are one call per 1 024 slots of a master each: 54 (one per slot would be 3 × 16 384).
        expect(await scriptCalls(member)).toBeLessThan(100);
      }
      const lease = await coordinator.acquire(resources[5]!, { ttlMs: 5_000 });
      await lease.release();
    } finally {
      await coordinator.close();
    }
  }, 60_000);
});

describe('initializing a fresh member one shard call at a time', () => {
  it("keeps one fresh-init-shard.lua call in flight per member, so the member's other clients wait for one call at most", async () => {
    const clusters = members.map(
      (m) => new Cluster(m.urls.map((u) => ({ host: '127.0.0.1', port: Number(new URL(u).port) }))),
    );
    const inFlight = clusters.map(() => 0);
    const most = clusters.map(() => 0);
    const calls = clusters.map(() => 0);
    try {
      await Promise.all(clusters.map((c) => c.ping()));
      await eventually(() => clusters.every((c) => c.nodes('master').length === 3), {
        timeoutMs: 10_000,
        what: "every cluster client's three masters",
      });
      clusters.forEach((cluster, i) => {
        for (const master of cluster.nodes('master')) {
          const send = master.sendCommand.bind(master);
          master.sendCommand = (command: Command, stream?: unknown) => {
            // fresh-init-shard.lua: EVALSHA <sha> 0 mark|check|init …
            const args = command.args;
            if (
              command.name === 'evalsha' &&
              String(args[1]) === '0' &&
              ['mark', 'check', 'init'].includes(String(args[2]))
            ) {
              calls[i]! += 1;
              inFlight[i]! += 1;
              most[i] = Math.max(most[i]!, inFlight[i]!);
              void command.promise.finally(() => (inFlight[i]! -= 1)).catch(() => undefined);
            }
            return send(command, stream as never);
          };
        }
      });
      const coordinator = new Coordinator({ nodes: clusters, keyPrefix: 'fresh-one-at-a-time' });
      try {
        await coordinator.ready();
        const status = await coordinator.nodeStatus();
        expect(status.map((s) => s.voting)).toEqual([true, true, true]);
      } finally {
        await coordinator.close();
      }
      // Three steps over 16 384 slots in calls of at most 1 024 per master: at least 3 × 16 calls per member.
      for (const count of calls) expect(count).toBeGreaterThanOrEqual(48);
      // Sent together, every master's calls would be in flight at once (18 per member here).
      expect(most).toEqual([1, 1, 1]);
    } finally {
      clusters.forEach((c) => c.disconnect());
    }
  }, 60_000);
});

describe('the scripts over a whole shard, on a real cluster', () => {
  it("run each slot's step on the master serving it, and fail on a key of a slot the master does not serve", async () => {
    const member = members[0]!;
    const master = await member.masterOf(0);
    const other = (await member.masterOf(16383)).port;
    expect(other).not.toBe(master.port);
    const client = new Redis(master.port, '127.0.0.1');
    const { head, tails } = slotKeyTemplate('shard-script');
    const tags = (slots: number[]) => slots.map(slotTag).join(',');
    try {
      await loadScripts(client);
      const step = (name: string, argument: string | number, slots: number[], settings: string[] = []) =>
        runScript(
          client,
          'fresh-init-shard',
          [],
          [
            name,
            'n1',
            argument,
            head,
            tails.incarnation,
            freshMarkKey(tails.fresh, 'n1'),
            tails.settings,
            tails.floor,
            tails.seal,
            settings.length,
            ...settings,
            tags(slots),
          ],
        );
      const probe = async (slots: number[]) =>
        interpretReply(
          'probe-shard',
          await runScript(
            client,
            'probe-shard',
            [],
            [head, tails.incarnation, tails.seal, tags(slots), tails.floor, tails.settings],
          ),
        );
      expect(await probe([0, 1, 2])).toEqual({ kind: 'probed', flags: '000', epochs: new Map() });
      expect(await step('mark', 30_000, [0, 1, 2])).toEqual([1, '111']);
      expect(await step('check', '', [0, 1, 2])).toEqual([1, '111']);
      expect(await step('init', 'inc-1@', [0, 2], ['maxTtlMs', '3000'])).toEqual([1, '11']);
      expect(await client.get(nodeStateKeys('shard-script', 2).incarnation)).toBe(
        `inc-1@${await client.cluster('MYID')}`,
      );
      expect(await client.get(nodeStateKeys('shard-script', 2).floor)).toBe('0');
      expect(await client.hget(nodeStateKeys('shard-script', 2).settings, 'maxTtlMs')).toBe('3000');
      // One character per slot, fresh-init.lua's code in base 36: 'a' is INITIALIZED (10).
      expect(await step('mark', 30_000, [0, 1, 2])).toEqual([1, 'a1a']);
      await client.set(nodeStateKeys('shard-script', 2).seal, 'epoch-2');
      expect(await probe([0, 1, 2])).toEqual({
        kind: 'probed',
        flags: '101',
        // Slot 0's seal is its witness, written as the empty epoch at its initialization (include/node-state.lua).
        epochs: new Map([
          [1, ''],
          [3, 'epoch-2'],
        ]),
      });
      // A slot of another master: Redis refuses the undeclared key instead of reading or writing it here.
      await expect(step('mark', 30_000, [16383])).rejects.toThrow(/non local key/);
      await expect(probe([0, 16383])).rejects.toThrow(/non local key/);
      const owner = new Redis(other, '127.0.0.1');
      await expect(owner.exists(freshMarkKey(nodeStateKeys('shard-script', 16383).fresh, 'n1')))
        .resolves.toBe(0)
        .finally(() => owner.disconnect());
    } finally {
      client.disconnect();
    }
  });
});

describe('a mixed quorum: two standalone masters and one cluster member', () => {
  it('grants leases with rising tokens, and an ioredis Cluster client is accepted as a member', async () => {
    const cluster = new Cluster(
      members[0]!.urls.map((u) => ({ host: '127.0.0.1', port: Number(new URL(u).port) })),
    );
    const coordinator = new Coordinator({
      nodes: [standalone[0]!.url, standalone[1]!.url, cluster],
      keyPrefix: 'mixed',
    });
    try {
      await coordinator.ready();
      // Tokens rise per resource (G2 orders the grants of one resource, not of different ones).
      for (const resource of resources.slice(0, 10)) {
        let last = 0n;
        for (let round = 0; round < 2; round++) {
          const lease = await coordinator.acquire(resource, { ttlMs: 5_000 });
          expect(lease.token > last).toBe(true);
          last = lease.token;
          await lease.release();
        }
      }
      const status = await coordinator.nodeStatus();
      expect(status.map((s) => s.voting)).toEqual([true, true, true]);
      expect(status[2]!.shards).toHaveLength(3);
    } finally {
      await coordinator.close();
      cluster.disconnect();
    }
  });
});

describe('folding per shard', () => {
  it("folds idle registers into their slot's floor on every shard, and later tokens still rise", async () => {
    const coordinator = new Coordinator({
      nodes: members.map((m) => m.member),
      keyPrefix: 'fold',
      maxTtlMs: 1_000,
      tokenRetentionMs: 1_000,
      // Generous: on a saturated machine a shard may take seconds to answer; this test is about folding.
      nodeTimeoutMs: 30_000,
    });
    try {
      await coordinator.ready();
      // Registers far above any time-derived first proposal: a fold that lost one (instead of raising its slot's floor)
      // shows as a later token below the earlier one.
      const ahead = (BigInt(Date.now() + 35 * 365 * 24 * 3_600_000) << 20n).toString();
      for (const member of members) {
        const raw = new Cluster([{ host: '127.0.0.1', port: member.masters[0]!.port }]);
        try {
          for (const resource of resources) await raw.set(`fold:{${resource}}:token`, ahead);
        } finally {
          raw.disconnect();
        }
      }
      const before = new Map<string, bigint>();
      for (const resource of resources) {
        const lease = await coordinator.acquire(resource, { ttlMs: 1_000, waitMs: 60_000 });
        before.set(resource, lease.token);
        await lease.release();
      }
      // The background fold pass (every second here) removes the registers once they are idle for the retention.
      const registers = async (): Promise<number> => {
        let found = 0;
        for (const master of members[0]!.masters) {
          const client = new Redis(master.port, '127.0.0.1');
          try {
            found += (await client.keys('fold:{*}:token')).length;
          } finally {
            client.disconnect();
          }
        }
        return found;
      };
      // The seeded registers are what an earlier version left (a stamped slot promises in its floor, and the acquires
      // above read them without writing them): the background pass may fold some already, never more than these.
      expect(await registers()).toBeLessThanOrEqual(resources.length);
      await eventually(async () => (await registers()) === 0, {
        what: 'the idle registers to be folded',
        timeoutMs: 150_000,
        intervalMs: 500,
      });
      // A fresh process (no last token remembered) reads only what the nodes answer: the slots' floors.
      const fresh = new Coordinator({
        nodes: members.map((m) => m.member),
        keyPrefix: 'fold',
        maxTtlMs: 1_000,
        nodeTimeoutMs: 30_000,
      });
      try {
        for (const resource of resources) {
          const lease = await fresh.acquire(resource, { ttlMs: 1_000, waitMs: 60_000 });
          expect(lease.token > before.get(resource)!).toBe(true);
          await lease.release();
        }
      } finally {
        await fresh.close();
      }
    } finally {
      await coordinator.close();
    }
  }, 300_000);
});

describe('Cluster clients of other copies of ioredis', () => {
  it('serves leases with an ioredis 5 Cluster of another copy and an ioredis 4 Cluster as members', async () => {
    const seed = (m: RedisClusterMember) => [{ host: '127.0.0.1', port: m.masters[0]!.port }];
    const copy = new CopyCluster(seed(members[1]!), { retryDelayOnFailover: 0 });
    const v4 = new V4Redis.Cluster(seed(members[2]!), { retryDelayOnFailover: 0 });
    const coordinator = new Coordinator({
      nodes: [members[0]!.member, copy, v4 as never],
      keyPrefix: 'copies',
    });
    try {
      await coordinator.ready();
      let last = 0n;
      for (const resource of resources.slice(0, 8)) {
        const lease = await coordinator.acquire(resource, { ttlMs: 5_000 });
        expect(lease.token > last).toBe(true);
        last = lease.token;
        await lease.extend(5_000);
        await lease.release();
      }
      expect((await coordinator.nodeStatus()).map((s) => s.voting)).toEqual([true, true, true]);
    } finally {
      await coordinator.close();
      copy.disconnect();
      v4.disconnect();
    }
  }, 60_000);
});
