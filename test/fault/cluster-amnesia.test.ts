// F25: a shard of a Redis Cluster member restarted empty under load (DESIGN §3c, "amnesia is per slot").
//
// Three members, each a real 3-shard Redis Cluster: A, B and C. Some resources ("hit") live in the slots of one
// shard X of A; the others ("spared") in A's other shards. The hit resources' registers are seeded far above the
// proposal's time floor on A and C, and a first coordinator (P1, which cannot reach B at all) is granted each hit
// resource through A and C: token T1 above the seed sits on A and C only. Then X restarts without its data and a
// second coordinator (P2, a fresh process state) runs guarded critical sections on the spared resources while X's
// slots are repaired, then on the hit resources with C's shard of their slots paused for a moment: P2's first votes
// on a hit resource then come from A and B, and B never saw T1, so A's repaired registers are all that keeps the
// token above T1.
//
// Protected run: X's slots refuse (their incarnation keys are gone) while the rest of A keeps voting (every status
// sample shows A's other shards voting in full); X's slots are repaired from the same slots of B and C (the sealed
// repair per slot), which copies T1 from C; the hit resources' grants then stay above T1 and every checker is green.
// Negative control: the per-slot incarnation check is switched off (X's incarnation keys are put back at once
// after the restart, as F6 does for a standalone node): empty A votes with B, which never saw T1, and a later
// grant's token goes below T1 — the token checker must fail. A repair that lost the registers fails the same way.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Coordinator } from '@fenced/coordinator';
import { History } from '@fenced/test-utils/history';
import { RedisClusterMember } from '@fenced/test-utils/redis-cluster-member';
import { keySlot, keysOf, nodeStateKeys } from '../fixtures/keys.js';
import { holderIncrement, recordedIncrement } from '../fixtures/fault/counter-ops.js';
import { FaultWorld } from '../fixtures/fault/fault-world.js';
import {
  judge,
  recordedAcquire,
  recordedRelease,
  sleep,
  until,
  type Verdict,
} from '../fixtures/fault/verdict.js';

let world: FaultWorld;
const members: RedisClusterMember[] = [];

beforeAll(async () => {
  // The world's own Redis node is not used: the members below are clusters.
  world = await FaultWorld.start({ nodes: 1, initialize: false });
  for (let i = 0; i < 3; i++) members.push(await RedisClusterMember.start({ masters: 3 }));
}, 180_000);

afterAll(async () => {
  await world?.close();
  await Promise.allSettled(members.map((m) => m.stop()));
});

/** A seed far above any time-derived first proposal, so that only the registers can keep tokens ordered. */
const AHEAD = BigInt(Date.now() + 35 * 365 * 24 * 3_600_000) << 20n;

interface Outcome {
  readonly verdict: Verdict;
  /** Per status sample: whether A's shards other than X had every slot voting. */
  readonly othersVoting: boolean[];
  /** Whether X's slots all voted again at the end. */
  readonly repaired: boolean;
}

/** Resources whose slots are on `shard` (`hit`) or on A's other shards (`spared`). */
async function pickResources(prefix: string, a: RedisClusterMember, shardPort: number) {
  const ranges = await a.clusterSlots();
  const onShard = (slot: number) =>
    ranges.some(([start, end, port]) => port === shardPort && slot >= start && slot <= end);
  const hit: string[] = [];
  const spared: string[] = [];
  for (let i = 0; hit.length < 4 || spared.length < 4; i++) {
    const resource = `f25-${i}`;
    const slot = keySlot(keysOf(resource, prefix).lease);
    if (onShard(slot) ? hit.length < 4 : spared.length < 4) (onShard(slot) ? hit : spared).push(resource);
  }
  return { hit, spared };
}

async function run(detectionOff: boolean): Promise<Outcome> {
  const prefix = `f25-${randomUUID().slice(0, 8)}`;
  const [a, b, c] = members as [RedisClusterMember, RedisClusterMember, RedisClusterMember];
  const x = a.masters[1]!;
  const { hit, spared } = await pickResources(prefix, a, x.port);
  const resources = [...hit, ...spared];
  for (const resource of resources) await world.ensureCounter(resource);
  const history = new History();

  const init = world.coordinator({ nodes: members.map((m) => m.member), keyPrefix: prefix });
  // A fresh initialization of 16 384 slots per member: a loaded machine can time a first probe out, so ask again.
  await until(
    'the members are initialized',
    () =>
      init.ready().then(
        () => true,
        () => false,
      ),
    120_000,
  );
  await world.closeCoordinator(init);

  // Seed the hit resources' registers far ahead on A and C (raw writes through Cluster clients). On a member, every
  // resource of a slot is promised in the slot's floor (include/node-state.lua): that is the register to seed.
  for (const member of [a, c]) {
    const raw = new Redis.Cluster([{ host: '127.0.0.1', port: member.masters[0]!.port }]);
    try {
      for (const resource of hit) {
        await raw.set(nodeStateKeys(prefix, keySlot(keysOf(resource, prefix).lease)).floor, AHEAD.toString());
      }
    } finally {
      raw.disconnect();
    }
  }

  // P1 reaches A and C only (B is a member it cannot connect to): token T1 > AHEAD on A and C, never on B.
  const unreachable = { cluster: ['redis://127.0.0.1:1'] };
  const p1 = world.coordinator({ nodes: [a.member, c.member, unreachable], keyPrefix: prefix });
  await p1.ready();
  for (const resource of hit) {
    const lease = await recordedAcquire(history, 'p1', p1, resource, { ttlMs: 2_000, waitMs: 5_000 });
    if (lease === null) throw new Error(`P1 was not granted ${resource} (precondition)`);
    await recordedIncrement(history, world.store, holderIncrement('p1', lease, 'guarded'));
    await recordedRelease(history, 'p1', lease);
  }
  await world.closeCoordinator(p1);

  // X restarts without its data (its cluster config kept): A loses X's slots' state only.
  await a.restartShardWithoutData(x);
  if (detectionOff) {
    // Negative control: X's slots get their incarnation keys back at once, so they vote though empty.
    const raw = new Redis(x.port, '127.0.0.1');
    try {
      for (const [start, end] of await a.slotsOf(x)) {
        const pipeline = raw.pipeline();
        // Unstamped, so only its presence is checked (include/node-state.lua): the incarnation key as the only proof.
        for (let slot = start; slot <= end; slot++)
          pipeline.set(nodeStateKeys(prefix, slot).incarnation, 'back');
        await pipeline.exec();
      }
    } finally {
      raw.disconnect();
    }
  }

  // P2, a fresh process state: guarded critical sections on the spared resources while X's slots are repaired.
  const p2: Coordinator = world.coordinator({ nodes: [a.member, b.member, c.member], keyPrefix: prefix });
  await p2.ready();
  const othersVoting: boolean[] = [];
  const sample = async (): Promise<void> => {
    const shards = (await p2.nodeStatus())[0]?.shards ?? [];
    othersVoting.push(
      shards
        .filter((s) => s.address !== `127.0.0.1:${x.port}`)
        .every((s) => s.up && s.votingSlots === s.slots),
    );
  };
  const sections = async (resource: string, rounds: number, tag: string): Promise<void> => {
    for (let i = 0; i < rounds; i++) {
      const lease = await recordedAcquire(history, 'p2', p2, resource, { ttlMs: 2_000, waitMs: 8_000 });
      if (lease === null) continue;
      await recordedIncrement(
        history,
        world.store,
        holderIncrement('p2', lease, 'guarded', { opId: `p2${tag}${i}-${resource}` }),
      );
      await recordedRelease(history, 'p2', lease);
      await sample();
    }
  };
  await Promise.all(spared.map((resource) => sections(resource, 3, 'a')));
  let repaired = false;
  if (!detectionOff) {
    await until(
      "X's slots repaired",
      async () => {
        const shard = (await p2.nodeStatus())[0]?.shards?.find((s) => s.address === `127.0.0.1:${x.port}`);
        return shard !== undefined && shard.votingSlots === shard.slots;
      },
      // 5 461 slots, each claimed, sealed on two members, raised and finished: generous, for a loaded machine.
      150_000,
    );
    repaired = true;
  }

  // Then the hit resources, with C's shard of their slots paused for a moment (in both runs): P2's first votes on a
  // hit resource come from A and B only, so A's answer decides: T1 when repaired from C, the time floor when empty.
  const cShards = [
    ...new Set(await Promise.all(hit.map((r) => c.masterOf(keySlot(keysOf(r, prefix).lease))))),
  ];
  for (const shard of cShards) shard.pause();
  const resumed = sleep(1_500).then(() => {
    for (const shard of cShards) shard.resume();
  });
  await Promise.all(hit.map((resource) => sections(resource, 2, 'b')));
  await resumed;
  const verdict = await judge(world, history, resources);
  await world.closeCoordinator(p2);
  return { verdict, othersVoting, repaired };
}

describe('F25: a shard of a cluster member restarted empty under load', () => {
  it('stops voting for its own slots only, is repaired from the same slots of the other members, and tokens keep rising', async () => {
    const outcome = await run(false);
    expect(outcome.verdict.violations).toEqual([]);
    expect(outcome.verdict.ok).toBe(true);
    expect(outcome.othersVoting.length).toBeGreaterThan(0);
    expect(outcome.othersVoting.every(Boolean)).toBe(true);
    expect(outcome.repaired).toBe(true);
  }, 300_000);

  it('negative control: with the per-slot incarnation check off, the empty slots vote and a token goes backwards', async () => {
    const outcome = await run(true);
    expect(outcome.verdict.ok).toBe(false);
    expect(outcome.verdict.violations.join('\n')).toMatch(/token is not larger|granted \d+ times/);
  }, 180_000);
});
