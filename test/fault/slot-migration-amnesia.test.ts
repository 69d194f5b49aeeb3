// F29: resharding a Cluster member while a shard restarts empty (DESIGN §3c, "a slot votes only while it provably
// holds everything it promised"). The review's schedule, on a real Redis Cluster and real standalone nodes:
//
// The quorum is a 3-master Cluster member M and two standalone nodes S0 and S1. A resource's slot s lives on M's
// master X. Its registers are seeded far above every time floor on M (the slot's floor: on a member, every resource of
// a slot is promised in the slot's floor) and on S0 and S1. P1, which cannot reach S1, is granted the resource on M
// and S0 (token t) and fences in. Then s is migrated by hand with MIGRATE, key by key in the order the schedule says,
// while a shard restarts empty (its nodes.conf kept):
//
// - importing: the floor moves to Y first; Y restarts empty; the incarnation, seal and settings follow; SETSLOT NODE.
// - exporting: the incarnation and settings move to Y first; X restarts empty (losing the floor and the seal); the
//   migration completes with what is left (nothing); SETSLOT NODE.
// - cancelled: the floor moves to Y; the operator cancels with SETSLOT STABLE on both: s stays on X without its floor.
// - register-moved: the resource's own register moves to Y, and the operator cancels: s stays on X, whole but for that
//   register — harmless only because a slot keeps no register of its own (its floor is every resource's register).
//
// Either way the shard that serves s now holds an incarnation key for s but not everything s promised. With the
// slot's witnesses and stamp (include/node-state.lua), s refuses to vote (another shard's stamp, or a witness key
// missing) until a repairer R re-proves it from S0 and S1; B, which cannot reach S0, then gets a token above t on M
// and S1. The negative control writes s's incarnation back unstamped after the migration (the incarnation key as the
// only proof): s votes with its floor missing, and B's token repeats t (G2). The mutation table switches
// the witnesses (row 27, cancelled) and the slot's floor as its register (row 28, register-moved) off, and this test kills both; the stamp (a slot that
// arrives whole on another shard, or sits on a promoted replica, is re-proven) is shown by slot-migration.test.ts (F26).
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Coordinator } from '@fenced/coordinator';
import { History } from '@fenced/test-utils/history';
import { proxyEach, type FaultProxies } from '@fenced/test-utils/fault-proxy';
import { RedisClusterMember } from '@fenced/test-utils/redis-cluster-member';
import type { RedisNode } from '@fenced/test-utils/redis-node';
import { keySlot, keysOf, nodeStateKeys } from '../fixtures/keys.js';
import { holderIncrement, recordedIncrement } from '../fixtures/fault/counter-ops.js';
import { FaultWorld, seedRegistersAhead } from '../fixtures/fault/fault-world.js';
import { judge, recordedAcquire, recordedRelease, until, type Verdict } from '../fixtures/fault/verdict.js';

let world: FaultWorld;
let member: RedisClusterMember;
const linkSets: FaultProxies[] = [];

beforeAll(async () => {
  world = await FaultWorld.start({ nodes: 2, initialize: false });
  member = await RedisClusterMember.start({ masters: 3 });
}, 180_000);

afterAll(async () => {
  await Promise.allSettled(linkSets.map((l) => l.stop()));
  await world?.close();
  await member?.stop();
});

/** The standalone nodes' URLs with node `cut` (0 or 1) unreachable. */
async function standaloneWithout(cut: number): Promise<string[]> {
  const set = await proxyEach(world.urls);
  linkSets.push(set);
  set.proxies[cut]!.setMode('blackhole');
  return set.urls;
}

type Schedule = 'importing' | 'exporting' | 'cancelled' | 'register-moved';

interface Outcome {
  readonly verdict: Verdict;
  readonly notes: string;
}

async function run(schedule: Schedule, proofOff: boolean): Promise<Outcome> {
  const prefix = `f29-${randomUUID().slice(0, 8)}`;
  const resource = `f29-${schedule}-${randomUUID().slice(0, 6)}`;
  const slot = keySlot(keysOf(resource, prefix).lease);
  const state = nodeStateKeys(prefix, slot);
  await world.ensureCounter(resource);
  const history = new History();
  const raw = await world.connectedClients(world.urls);

  const init = world.coordinator({ nodes: [member.member, ...world.urls], keyPrefix: prefix });
  // A fresh initialization of 16 384 slots: a loaded machine can time a first probe out, so ask again.
  await until(
    'the nodes are initialized',
    () =>
      init.ready().then(
        () => true,
        () => false,
      ),
    120_000,
  );
  await world.closeCoordinator(init);

  // Seeds: the slot's floor on M, the resource's registers on S0 and S1.
  const x = await member.masterOf(slot);
  const y = member.masters.find((m) => m !== x)!;
  const ahead = await seedRegistersAhead(raw, resource, prefix);
  await client(x).set(state.floor, ahead.toString());

  // P1 on M and S0: token t on M's slot floor and on S0.
  const p1 = world.coordinator({
    nodes: [member.member, ...(await standaloneWithout(1))],
    keyPrefix: prefix,
  });
  const p1Lease = await recordedAcquire(history, 'P1', p1, resource, { ttlMs: 2_000, waitMs: 30_000 });
  if (!p1Lease) throw new Error('P1 was not granted (precondition)');
  await recordedIncrement(history, world.store, holderIncrement('P1', p1Lease, 'guarded'));
  await recordedRelease(history, 'P1', p1Lease);
  await world.closeCoordinator(p1);

  // The migration, cut by a restart.
  const from = client(x);
  const to = client(y);
  const fromId = String(await from.cluster('MYID'));
  const toId = String(await to.cluster('MYID'));
  await to.cluster('SETSLOT', slot, 'IMPORTING', fromId);
  await from.cluster('SETSLOT', slot, 'MIGRATING', toId);
  const migrate = async (keys: string[]): Promise<void> => {
    const present: string[] = [];
    // A key already gone from a migrating slot answers ASK: it is not here to move.
    for (const key of keys) if ((await from.exists(key).catch(() => 0)) === 1) present.push(key);
    if (present.length > 0) await from.call('MIGRATE', '127.0.0.1', y.port, '', 0, 5_000, 'KEYS', ...present);
  };
  const rest = async (): Promise<string[]> => await from.cluster('GETKEYSINSLOT', slot, 100);
  // The resource's own register first, as the review's schedule moves it (on a member there is none: the slot's floor
  // is every resource's register).
  const register = keysOf(resource, prefix).token;
  if (schedule === 'importing') {
    await migrate([register, state.floor]);
    await member.restartShardWithoutData(y);
    await until(
      'Y answers again',
      () =>
        to.ping().then(
          () => true,
          () => false,
        ),
      30_000,
    );
    await migrate(await rest());
    await finish(slot, toId);
  } else if (schedule === 'exporting') {
    await migrate([state.incarnation, state.settings]);
    await member.restartShardWithoutData(x);
    await until(
      'X answers again',
      () =>
        from.ping().then(
          () => true,
          () => false,
        ),
      30_000,
    );
    await migrate(await rest());
    await finish(slot, toId);
  } else {
    await migrate(schedule === 'cancelled' ? [register, state.floor] : [register]);
    await client(y).cluster('SETSLOT', slot, 'STABLE');
    await client(x).cluster('SETSLOT', slot, 'STABLE');
  }
  const serving = await member.masterOf(slot);
  const left = await client(serving).mget(state.incarnation, state.floor, state.seal);
  if (proofOff) await client(serving).set(state.incarnation, 'back');

  // R, reaching everything, re-proves s where it must; then B on M and S1 only.
  const r = world.coordinator({ nodes: [member.member, ...world.urls], keyPrefix: prefix });
  await everySlotVotes(r);
  await world.closeCoordinator(r);
  const b = world.coordinator({ nodes: [member.member, ...(await standaloneWithout(0))], keyPrefix: prefix });
  const bLease = await recordedAcquire(history, 'B', b, resource, { ttlMs: 2_000, waitMs: 30_000 });
  if (bLease) {
    await recordedIncrement(history, world.store, holderIncrement('B', bLease, 'guarded')).catch(
      () => undefined,
    );
    await recordedRelease(history, 'B', bLease);
  }
  await world.closeCoordinator(b);
  const notes =
    `${schedule}${proofOff ? ', proof off' : ''}: slot ${slot} on ${serving.port} held ` +
    `(incarnation, floor, seal) ${JSON.stringify(left)} after the migration; P1's token ${p1Lease.token}, ` +
    `B's ${bLease?.token ?? 'none'}`;
  console.log(`F29 ${notes}`);
  return { verdict: await judge(world, history, [resource]), notes };
}

const clients = new Map<number, Redis>();
function client(node: RedisNode): Redis {
  let c = clients.get(node.port);
  if (c === undefined || c.status === 'end') {
    c = new Redis(node.port, '127.0.0.1', { maxRetriesPerRequest: 2 });
    c.on('error', () => undefined);
    clients.set(node.port, c);
  }
  return c;
}

/** Waits until `coordinator` sees every slot of M vote (a slot that cannot prove its state is re-proven first). */
async function everySlotVotes(coordinator: Coordinator): Promise<void> {
  await coordinator.ready();
  await until(
    'every slot of M votes',
    async () => (await coordinator.nodeStatus())[0]!.shards!.every((s) => s.votingSlots === s.slots),
    // A shard restarted empty has 5 461 slots to re-prove: generous, for a loaded machine.
    150_000,
  );
}

/** SETSLOT NODE on every master: the slot now lives on `toId`. */
async function finish(slot: number, toId: string): Promise<void> {
  for (const master of member.masters) await client(master).cluster('SETSLOT', slot, 'NODE', toId);
}

afterAll(() => {
  for (const c of clients.values()) c.disconnect();
});

describe('a slot migration meets a shard that restarts empty (F29)', () => {
  it.each<Schedule>(['importing', 'exporting', 'cancelled', 'register-moved'])(
    '%s: the slot refuses until it is re-proven, and B’s token stays above P1’s',
    async (schedule) => {
      const outcome = await run(schedule, false);
      expect(outcome.verdict.violations, outcome.notes).toEqual([]);
    },
    300_000,
  );

  it('negative control: the incarnation key as the only proof — the slot votes without its floor, B’s token repeats P1’s', async () => {
    const outcome = await run('importing', true);
    expect(outcome.verdict.ok, outcome.notes).toBe(false);
    expect(outcome.verdict.violations.join('\n')).toMatch(/tokens: /);
  }, 300_000);
});
