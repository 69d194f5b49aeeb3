// F26 (a first cut): a slot of a Redis Cluster member migrates to another shard (CLUSTER SETSLOT MIGRATING /
// IMPORTING, MIGRATE of every key, SETSLOT NODE) while grants on it run. Scripts that meet ASK, TRYAGAIN or MOVED are
// sent where the slot lives (they never run on half a slot); the slot's node state moves with its other keys, so the
// slot keeps its incarnation and its registers on the new shard and tokens keep rising. Recorded, then judged: every
// grant's token above the previous one (one client, one resource), the node state on the new shard afterwards.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Coordinator } from '@fenced/coordinator';
import { RedisClusterMember } from '@fenced/test-utils/redis-cluster-member';
import { keySlot, keysOf, nodeStateKeys } from '../../../fixtures/keys.js';

const members: RedisClusterMember[] = [];

beforeAll(async () => {
  for (let i = 0; i < 3; i++) members.push(await RedisClusterMember.start({ masters: 3 }));
}, 120_000);

afterAll(async () => {
  await Promise.allSettled(members.map((m) => m.stop()));
});

describe('F26: a slot migrates between shards of a member while grants on it run', () => {
  it('follows the slot, keeps its node state with it, and tokens keep rising', async () => {
    const prefix = 'f26';
    const resource = 'f26-res';
    const slot = keySlot(keysOf(resource, prefix).lease);
    const coordinator = new Coordinator({ nodes: members.map((m) => m.member), keyPrefix: prefix });
    coordinator.on('nodeError', () => undefined);
    await coordinator.ready();
    const a = members[0]!;
    const from = await a.masterOf(slot);
    const to = a.masters.find((m) => m !== from)!;

    const tokens: bigint[] = [];
    let failures = 0;
    let running = true;
    const load = (async () => {
      while (running) {
        try {
          const lease = await coordinator.acquire(resource, { ttlMs: 2_000, waitMs: 5_000 });
          tokens.push(lease.token);
          await lease.release();
        } catch {
          failures++;
        }
      }
    })();
    await a.migrateSlot(slot, to);
    // Grants after the migration, on the new shard.
    const after = tokens.length;
    while (tokens.length < after + 20) await new Promise((resolve) => setTimeout(resolve, 20));
    running = false;
    await load;

    for (let i = 1; i < tokens.length; i++) expect(tokens[i]! > tokens[i - 1]!).toBe(true);
    expect(tokens.length).toBeGreaterThan(20);
    expect(failures).toBeLessThan(tokens.length);
    expect(await a.masterOf(slot)).toBe(to);
    const target = new Redis(to.port, '127.0.0.1');
    try {
      // The slot arrived with the old shard's stamp, was re-proven from the other members and stamped anew here
      // (include/node-state.lua); its floor — every resource's register on a member — came with it.
      expect(await target.get(nodeStateKeys(prefix, slot).incarnation)).toMatch(
        new RegExp(`@${await target.cluster('MYID')}$`),
      );
      expect(await target.exists(nodeStateKeys(prefix, slot).floor)).toBe(1);
      expect(await target.exists(keysOf(resource, prefix).token)).toBe(0);
    } finally {
      target.disconnect();
    }
    expect((await coordinator.nodeStatus())[0]!.shards!.every((s) => s.votingSlots === s.slots)).toBe(true);
    await coordinator.close();
  }, 90_000);
});
