// F23: processes with different settings share the nodes, and a node restarts empty while one process's grant is
// held in the network — the schedule reproduced by the review of the sit-out repair (DESIGN §3), on real processes:
//
//   Three nodes, quorum 2. A repairs with maxTtlMs 3000 (the old repair sat out about 3 s). B runs with
//   maxTtlMs 60000 and nodeTimeoutMs 30000, and its link to node 3 holds what it is sent. B acquires `acct` with a
//   60 s ttl: node 1 grants and promises g at once, node 3's call waits in the network. Node 1 is killed and
//   restarted with its data directory wiped; A repairs it. The network then delivers B's call to node 3. C, a child
//   process whose clock runs an hour behind, acquires on nodes 1 and 2, fences in; then B tries its guarded write.
//
// The package either refuses B (its maxTtlMs differs from the cluster's recorded one), or — with the cluster's
// settings B's, and A adopting them — seals node 3 when A reads it, so B's held call is refused and B is never
// granted g: C's token can be anything, and no write of B commits. The negative control repairs node 1 the old way,
// by hand (sit out A's 3 s, then copy without a seal, then vote): B is granted g after the copy, C gets a token below
// it (G2), and B's write commits after C fenced in (G3). Guarded writes go to a real Postgres (guarded-store).
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClusterSettingsError } from '@fenced/coordinator';
import { ClockShim } from '@fenced/test-utils/clock-shim';
import { proxyEach, type FaultProxies } from '@fenced/test-utils/fault-proxy';
import { History } from '@fenced/test-utils/history';
import { holderIncrement, recordedIncrement } from '../fixtures/fault/counter-ops.js';
import { FaultWorld, unique } from '../fixtures/fault/fault-world.js';
import {
  judge,
  recordedAcquire,
  recordedRelease,
  sleep,
  until,
  type Verdict,
} from '../fixtures/fault/verdict.js';
import { WorkerProcess } from '../fixtures/fault/worker-process.js';

/** A's maxTtlMs: what the old repair sat out. */
const A_MAX_TTL_MS = 3_000;
/** B's settings, as in the review. */
const B_MAX_TTL_MS = 60_000;
const B_NODE_TIMEOUT_MS = 30_000;
/** Nodes 1, 2, 3 of the review are nodes 0, 1, 2 here. */
const N1 = 0;
const N2 = 1;
const N3 = 2;

let world: FaultWorld;
let behind: ClockShim;
const linkSets: FaultProxies[] = [];
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  behind = await ClockShim.create();
  await behind.set(-3_600_000, { clocks: 'realtime' });
  world = await FaultWorld.start({ nodes: 3, initialize: false });
});

afterAll(async () => {
  await Promise.allSettled(workers.map((w) => w.stop()));
  await Promise.allSettled(linkSets.map((l) => l.stop()));
  await world?.close();
  await behind?.dispose();
});

async function links(): Promise<FaultProxies> {
  const set = await proxyEach(world.urls);
  linkSets.push(set);
  return set;
}

const incarnationKey = (prefix: string): string => `${prefix}:node:incarnation`;
const leaseKey = (prefix: string, resource: string): string => `${prefix}:{${resource}}:lease`;

/** A fresh namespace whose first coordinator records `maxTtlMs` as the cluster's. */
async function freshCluster(maxTtlMs: number): Promise<{ prefix: string; raw: Redis[] }> {
  const prefix = `f23-${randomUUID().slice(0, 8)}`;
  const raw = await world.connectedClients(world.urls);
  const init = world.coordinator({ keyPrefix: prefix, maxTtlMs });
  await init.ready();
  // A grant on a throw-away resource: every node holds a register (the cluster has a history) and the scripts.
  const warm = await init.acquire(`warm-${prefix}`, { ttlMs: 1_000 });
  await warm.release();
  await world.closeCoordinator(init);
  return { prefix, raw };
}

/**
 * The old repair (before the seal), by hand with raw clients: sit out A's maxTtlMs from the moment node 1 is found
 * empty, then copy every register from nodes 2 and 3 (no seal), then let node 1 vote.
 */
async function sitOutRepairByHand(raw: readonly Redis[], prefix: string): Promise<void> {
  await sleep(A_MAX_TTL_MS + 100);
  for (const source of [raw[N2]!, raw[N3]!]) {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, found] = await source.scan(cursor, 'MATCH', `${prefix}:{*}:token`, 'COUNT', 1000);
      keys.push(...found);
      cursor = next;
    } while (cursor !== '0');
    for (const key of keys) {
      const value = await source.get(key);
      const mine = await raw[N1]!.get(key);
      if (value !== null && (mine === null || BigInt(value) > BigInt(mine))) await raw[N1]!.set(key, value);
    }
  }
  await raw[N1]!.set(incarnationKey(prefix), `by-hand-${randomUUID()}`);
}

async function issueSchedule(
  repair: 'sealed' | 'sit-out-by-hand',
): Promise<{ verdict: Verdict; notes: string }> {
  const { prefix, raw } = await freshCluster(B_MAX_TTL_MS);
  const resource = unique('acct');
  await world.ensureCounter(resource);
  const history = new History();
  const notes: string[] = [];

  // C: a child process an hour behind, configured as the cluster is; its link to node 3 is cut.
  const cLinks = await links();
  cLinks.proxies[N3]!.setMode('blackhole');
  const c = await WorkerProcess.start(
    'C',
    history,
    {
      redisUrls: cLinks.urls,
      // Generous: C's own timeouts play no part in the schedule, and a busy machine must not fail its votes.
      nodeTimeoutMs: 5_000,
      maxTtlMs: B_MAX_TTL_MS,
      databaseUrl: world.postgres.url,
      schema: world.schema.schema,
      keyPrefix: prefix,
    },
    behind.env,
  );
  workers.push(c);
  expect(await c.now()).toBeLessThan(Date.now() - 3_000_000);

  // A: the repairer, configured with the short maxTtlMs; it runs with the cluster's (adopts it). In the negative
  // control the repair is done by hand instead, and no coordinator that could notice node 1 runs besides B and C.
  const a =
    repair === 'sealed'
      ? world.coordinator({ keyPrefix: prefix, maxTtlMs: A_MAX_TTL_MS, clusterSettings: 'adopt' })
      : undefined;
  if (a !== undefined) {
    await a.ready();
    expect(a.settings.maxTtlMs).toBe(B_MAX_TTL_MS);
  }

  // B: the long node timeout; node 2 refuses its connections, node 3 holds what B sends.
  const bLinks = await links();
  const b = world.coordinator({
    nodes: bLinks.urls,
    keyPrefix: prefix,
    maxTtlMs: B_MAX_TTL_MS,
    nodeTimeoutMs: B_NODE_TIMEOUT_MS,
  });
  await b.ready();
  bLinks.proxies[N2]!.setMode('reset');
  bLinks.proxies[N3]!.setMode('hold', { direction: 'to-server' });
  const bGrant = recordedAcquire(history, 'B', b, resource, { ttlMs: B_MAX_TTL_MS });
  await until('B’s acquire granted on node 1 and waiting on its way to node 3', async () => {
    const onN1 = (await raw[N1]!.get(leaseKey(prefix, resource))) !== null;
    return onN1 && bLinks.proxies[N3]!.stats.queuedBytes > 0;
  });

  await world.redis.nodes[N1]!.restart({ keepData: false });
  await world.nodesAnswer([raw[N1]!]);
  const repairedAt = performance.now();
  if (a !== undefined) {
    // A notices the empty node the way /readyz does (a probe), which starts its repair; then waits for it.
    await until('A reaches the restarted node', async () => (await a.nodeStatus())[N1]!.reachable);
    await a.repairNode(N1);
  } else {
    await sitOutRepairByHand(raw, prefix);
  }
  await until('node 1 votes again', async () => (await raw[N1]!.exists(incarnationKey(prefix))) === 1);
  notes.push(`node 1 voted again ${(performance.now() - repairedAt).toFixed(0)} ms after its restart`);

  // The network delivers B's call to node 3, after the repair read node 3.
  bLinks.proxies[N3]!.release();
  const bLease = await bGrant;
  notes.push(bLease ? `B granted token ${bLease.token}` : 'B not granted (its held call was refused)');

  const cLease = await c.acquire(resource, { ttlMs: A_MAX_TTL_MS, waitMs: 60_000 });
  if (!cLease) throw new Error(`C did not get the lease; ${notes.join('; ')}`);
  notes.push(`C's token ${cLease.token}`);
  await c.increment(resource, { mode: 'guarded', opId: `C-${resource}` }); // C fences in
  if (bLease) {
    // The zombie: B's guarded write after C fenced in.
    await recordedIncrement(history, world.store, holderIncrement('B', bLease, 'guarded')).catch(
      () => undefined,
    );
    await recordedRelease(history, 'B', bLease);
  }
  await c.release();
  bLinks.release();
  if (a !== undefined) await world.closeCoordinator(a);
  await world.closeCoordinator(b);
  return { verdict: await judge(world, history, [resource]), notes: notes.join('\n') };
}

describe('processes with different settings share the nodes; a node restarts empty under a held grant (F23)', () => {
  it('refuses to start a process whose maxTtlMs differs from the cluster’s, naming both values', async () => {
    const { prefix } = await freshCluster(A_MAX_TTL_MS);
    const b = world.coordinator({
      keyPrefix: prefix,
      maxTtlMs: B_MAX_TTL_MS,
      nodeTimeoutMs: B_NODE_TIMEOUT_MS,
    });
    const error: unknown = await b.ready().catch((e: unknown) => e);
    await world.closeCoordinator(b);
    expect(error).toBeInstanceOf(ClusterSettingsError);
    expect((error as Error).message).toMatch(/maxTtlMs 60000, .* recorded on the nodes is 3000/);
  });

  it('with B’s settings the cluster’s, the seal refuses B’s held call: no token goes backwards and no zombie write commits', async () => {
    const { verdict, notes } = await issueSchedule('sealed');
    expect(verdict.violations, notes).toEqual([]);
    expect(notes).toMatch(/B not granted/);
    expect(verdict.info.join('\n')).toMatch(/final 1, 1 increments ok/);
  });

  it('negative control: the old sit-out repair (by hand, no seal) lets B be granted after the copy, C’s token goes below it and B’s write commits after C fenced in', async () => {
    const { verdict, notes } = await issueSchedule('sit-out-by-hand');
    expect(verdict.ok, notes).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/tokens: .*yet its token is not larger/);
    expect(verdict.violations.join('\n')).toMatch(/commits: .*committed after that grant had fenced in/);
  });
});
