// F28: a process starts while the nodes are unreachable, configured with another key layout than the cluster's —
// the review's schedule, on real processes (DESIGN §3, "settings checked by the nodes, not once by each process"):
//
// A Coordinator on its defaults (layout 'fenced') initializes the cluster and grants `acct` (registers seeded far
// above every time floor, so no clock hides a token going backwards); its holder keeps the lease and waits. Every
// node stops answering (SIGSTOP). Then a process starts in the 'redlock' layout: a `@fenced/redlock` Redlock on its
// defaults, or a Coordinator that sets keyLayout 'redlock'. Its start-up check reads no recorded settings. The nodes
// answer again; A's lease expires; the new process locks `acct`, fences in, and A — paused all along — tries its write.
//
// The nodes check the key layout of every acquire against the recorded one (include/settings-check.lua) and refuse
// a call in another layout: the Redlock, which did not choose its layout, re-reads the settings, adopts 'fenced' and
// gets a token above A's (A's write is then refused); the Coordinator that set 'redlock' is refused with a
// ClusterSettingsError and writes no second register. The negative control takes the nodes' check away (the
// recorded layout and node count deleted by hand once the new process started: as a start-up-only check, nothing
// on the nodes then stops it): the Redlock keeps its own layout, keeps a second token register for `acct` beside
// the first, gets a lower token, and A's write commits after it fenced in (G2, G3). The mutation table's row 26
// switches the check off in the Lua and this test kills it.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClusterSettingsError } from '@fenced/coordinator';
import { Redlock } from '@fenced/redlock';
import { History } from '@fenced/test-utils/history';
import { resourceKeys, settingsKey } from '../../packages/coordinator/src/keys/key-layout.js';
import { holderIncrement, recordedIncrement } from '../fixtures/fault/counter-ops.js';
import { FaultWorld, leaseRef, seedRegistersAhead, unique } from '../fixtures/fault/fault-world.js';
import { judge, recordedAcquire, until, type Verdict } from '../fixtures/fault/verdict.js';

let world: FaultWorld;
const clients: Redis[] = [];

beforeAll(async () => {
  world = await FaultWorld.start({ nodes: 3, initialize: false });
});

afterAll(async () => {
  for (const node of world?.redis.nodes ?? []) node.resume();
  for (const client of clients) client.disconnect();
  await world?.close();
});

function pauseAll(): void {
  for (const node of world.redis.nodes) node.pause();
}

async function resumeAll(raw: readonly Redis[]): Promise<void> {
  for (const node of world.redis.nodes) node.resume();
  await world.nodesAnswer(raw);
}

interface Outcome {
  readonly verdict: Verdict;
  readonly notes: string;
  readonly refusal?: unknown;
}

async function startedDuringOutage(
  late: 'redlock-on-defaults' | 'coordinator-set-to-redlock',
  control: 'protected' | 'nodes-do-not-check',
): Promise<Outcome> {
  const keyPrefix = `f28-${randomUUID().slice(0, 8)}`;
  const resource = unique('f28-acct');
  const raw = await world.connectedClients(world.urls);
  await world.ensureCounter(resource);
  const history = new History();

  // A, on its defaults: initializes the cluster ('fenced' layout) and holds the lease without writing yet.
  const a = world.coordinator({ keyPrefix });
  await a.ready();
  await seedRegistersAhead(raw, resource, keyPrefix);
  const aLease = await recordedAcquire(history, 'A', a, resource, { ttlMs: 1_500, waitMs: 5_000 });
  if (!aLease) throw new Error('A did not get the lease');

  // Every node stops answering; the late process starts now, and reads nothing at start-up.
  pauseAll();
  let refusal: unknown;
  let lateToken: bigint | undefined;
  const lateClients = world.urls.map((url) => {
    const client = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    client.on('error', () => undefined);
    clients.push(client);
    return client;
  });
  const redlock =
    late === 'redlock-on-defaults'
      ? new Redlock(lateClients, { keyPrefix, nodeTimeoutMs: 300, retryCount: 40, retryDelay: 100 })
      : undefined;
  const coordinator =
    late === 'coordinator-set-to-redlock'
      ? world.coordinator({ keyPrefix, keyLayout: 'redlock', nodeTimeoutMs: 300 })
      : undefined;
  // Its start-up runs into the outage: every probe times out, so it reads no recorded settings (ready() then
  // refuses: no quorum).
  const started = await (redlock?.coordinator ?? coordinator!).ready().then(
    () => 'ready',
    (error: unknown) => (error as Error).name,
  );
  if (started === 'ready') throw new Error('the late process started with the nodes paused (precondition)');
  if (control === 'nodes-do-not-check') {
    for (const node of world.redis.nodes) node.resume();
    await world.nodesAnswer(raw);
    await Promise.all(raw.map((c) => c.hdel(settingsKey(keyPrefix), 'keyLayout', 'nodeCount')));
  } else {
    await resumeAll(raw);
  }
  // The late process reconnects (its start-up, with what it read then, is over); A's lease runs out; the late
  // process locks, and fences in.
  const lateCoordinator = redlock?.coordinator ?? coordinator!;
  await until(
    'the late process sees a quorum again',
    () =>
      lateCoordinator.ready().then(
        () => true,
        () => false,
      ),
    20_000,
  );
  await until('A’s lease expired', () => aLease.remainingMs() < 0, 10_000);
  try {
    if (redlock !== undefined) {
      const lock = await history.run(
        'L',
        'acquire',
        resource,
        () => redlock.acquire([resource], 2_000),
        (l) => ({ token: l.token!, leaseId: leaseRef(l.value) }),
      );
      lateToken = lock.token;
      await recordedIncrement(
        history,
        world.store,
        holderIncrement('L', { resource, token: lock.token!, id: lock.value }, 'guarded'),
      ).catch(() => undefined);
      await redlock.release(lock).catch(() => undefined);
    } else {
      const lease = await recordedAcquire(history, 'L', coordinator!, resource, {
        ttlMs: 2_000,
        waitMs: 5_000,
      });
      if (lease) {
        lateToken = lease.token;
        await recordedIncrement(history, world.store, holderIncrement('L', lease, 'guarded')).catch(
          () => undefined,
        );
        await lease.release();
      }
    }
  } catch (error) {
    refusal = error;
  }
  // A, paused all along, writes with the lease it held.
  await recordedIncrement(history, world.store, holderIncrement('A', aLease, 'guarded')).catch(
    () => undefined,
  );
  const registers = await Promise.all(
    ['fenced', 'redlock'].map(async (layout) =>
      raw[0]!.exists(resourceKeys(keyPrefix, resource, layout as 'fenced' | 'redlock').token),
    ),
  );
  await redlock?.quit().catch(() => undefined);
  if (coordinator !== undefined) await world.closeCoordinator(coordinator);
  await world.closeCoordinator(a);
  const notes =
    `${late}, ${control}: A's token ${aLease.token}, the late process's ${lateToken ?? 'none'}, ` +
    `registers on node 0 ('fenced', 'redlock'): ${registers.join(', ')}` +
    (refusal === undefined ? '' : `, refused: ${(refusal as Error).message}`);
  console.log(`F28 ${notes}`);
  return { verdict: await judge(world, history, [resource]), notes, refusal };
}

describe('a process started while the nodes were unreachable, in another key layout (F28)', () => {
  it('a Redlock on its defaults is refused by the nodes, adopts the recorded layout, and gets a larger token', async () => {
    const outcome = await startedDuringOutage('redlock-on-defaults', 'protected');
    expect(outcome.refusal, outcome.notes).toBeUndefined();
    expect(outcome.notes).toMatch(/registers on node 0 \('fenced', 'redlock'\): 1, 0/);
    expect(outcome.verdict.violations, outcome.notes).toEqual([]);
  });

  it('a Coordinator that set the other layout is refused with a ClusterSettingsError and writes nothing', async () => {
    const outcome = await startedDuringOutage('coordinator-set-to-redlock', 'protected');
    expect(outcome.refusal, outcome.notes).toBeInstanceOf(ClusterSettingsError);
    expect((outcome.refusal as ClusterSettingsError).setting).toBe('keyLayout');
    expect(outcome.notes).toMatch(/registers on node 0 \('fenced', 'redlock'\): 1, 0/);
    expect(outcome.verdict.violations, outcome.notes).toEqual([]);
  });

  it('negative control: the nodes do not check the settings, the Redlock keeps its layout, and its token goes backwards', async () => {
    const outcome = await startedDuringOutage('redlock-on-defaults', 'nodes-do-not-check');
    expect(outcome.notes).toMatch(/registers on node 0 \('fenced', 'redlock'\): 1, 1/);
    expect(outcome.verdict.ok, outcome.notes).toBe(false);
    expect(outcome.verdict.violations.join('\n')).toMatch(/tokens: /);
  });
});
