// F19 and F22: nodes that restart empty while the token protocol is in motion. A promise still in flight to
// another node, a repair that copies before it sits out, a repair that copies from a node that is itself empty
// or under repair, a fresh-cluster initialisation that mistakes an in-flight first grant for an empty cluster.
//
// These scenarios are the referee of the sealed repair of DESIGN §3 (claim, then seal and read N − quorum + 1
// nodes verified initialised and not under repair, then finish only if the repair marker is still ours; a fresh
// cluster only when no node is initialised at all). With the seal, the held promise is refused when it lands on a
// sealed source, so A is not granted at all — or, had it landed before the seal, the read saw it. Against a
// coordinator whose repair copies without sealing, picks its sources from a cached "voting" view, or re-initialises
// a node when a SCAN finds nothing, the protected runs here FAIL: that is the bug they reproduce. Tokens never
// lean on the proposal's time floor: the later client runs on a clock an hour behind (its own LD_PRELOAD
// clock shim, in a child process), or the registers are seeded far above the floor.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Coordinator, Lease } from '@fenced/coordinator';
import { ClockShim } from '@fenced/test-utils/clock-shim';
import { proxyEach, type FaultProxies } from '@fenced/test-utils/fault-proxy';
import { History } from '@fenced/test-utils/history';
import { incarnationKey, resourceKeys, tokenKeyPattern } from '../fixtures/keys.js';
import { holderIncrement, recordedIncrement } from '../fixtures/fault/counter-ops.js';
import { FaultWorld, seedRegistersAhead, tokenKey, unique } from '../fixtures/fault/fault-world.js';
import {
  judge,
  recordedAcquire,
  recordedRelease,
  sleep,
  until,
  type Verdict,
} from '../fixtures/fault/verdict.js';
import { WorkerProcess } from '../fixtures/fault/worker-process.js';

/** The longest lease anyone here takes (what the old repair sat out). */
const MAX_TTL_MS = 3_000;
/** F19's three-node cluster: nodes 0, 1, 2 of the world, called R, X and Y as in the issue. */
const R = 0;
const X = 1;
const Y = 2;

let world: FaultWorld;
let behind: ClockShim;
const linkSets: FaultProxies[] = [];
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  behind = await ClockShim.create();
  await behind.set(-3_600_000, { clocks: 'realtime' }); // an hour behind, as F5's client
  world = await FaultWorld.start({ nodes: 5 });
});

afterAll(async () => {
  await Promise.allSettled(workers.map((w) => w.stop()));
  await Promise.allSettled(linkSets.map((l) => l.stop()));
  await world?.close();
  await behind?.dispose();
});

async function links(urls: readonly string[]): Promise<FaultProxies> {
  const set = await proxyEach(urls);
  linkSets.push(set);
  return set;
}

const leaseKey = (prefix: string, resource: string): string => resourceKeys(prefix, resource).lease;

/** A fresh key namespace over `urls`, initialised as a brand-new cluster by its first coordinator. */
async function freshCluster(urls: readonly string[]): Promise<{ prefix: string; raw: Redis[] }> {
  const prefix = `amnesia-${randomUUID().slice(0, 8)}`;
  const raw = await world.connectedClients(urls);
  const init = world.coordinator({ nodes: [...urls], keyPrefix: prefix });
  await init.ready();
  await world.closeCoordinator(init);
  return { prefix, raw };
}

async function keysOf(client: Redis, pattern: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    found.push(...keys);
    cursor = next;
  } while (cursor !== '0');
  return found;
}

/** Whether the node holds any token register under the prefix (a repair has copied into it). */
async function hasRegisters(client: Redis, prefix: string): Promise<boolean> {
  return (await keysOf(client, tokenKeyPattern(prefix)).catch(() => [])).length > 0;
}

async function votesAgain(client: Redis, prefix: string): Promise<boolean> {
  return (await client.exists(incarnationKey(prefix)).catch(() => 0)) === 1;
}

/**
 * The repair order the issue describes, done by hand with raw clients (the negative control): copy the maximum
 * of every decimal key under the prefix (token registers, and a node floor if there is one) from `sources` into
 * the empty node at once; let it vote again only after the sit-out.
 */
async function repairByHandBeforeSitOut(
  empty: Redis,
  sources: readonly Redis[],
  prefix: string,
): Promise<{ votesAfterSitOut: Promise<void> }> {
  const maxima = new Map<string, bigint>();
  for (const source of sources) {
    const keys = (await keysOf(source, `${prefix}:*`)).filter(
      (k) => !k.endsWith(':lease') && !k.startsWith(incarnationKey(prefix)) && !k.endsWith(':repair'),
    );
    if (keys.length === 0) continue;
    const values = await source.mget(...keys);
    keys.forEach((key, i) => {
      const value = values[i];
      if (typeof value !== 'string' || !/^[0-9]{1,19}$/.test(value)) return;
      const known = maxima.get(key);
      if (known === undefined || BigInt(value) > known) maxima.set(key, BigInt(value));
    });
  }
  for (const [key, value] of maxima) await empty.set(key, value.toString());
  const votesAfterSitOut = (async () => {
    await sleep(MAX_TTL_MS);
    await empty.set(incarnationKey(prefix), `by-hand-${randomUUID()}`);
  })();
  return { votesAfterSitOut };
}

/**
 * Another process notices the restart the way `/readyz` does: it probes every node (and so starts whatever
 * repair or initialisation its coordinator does). Probes until its client has reconnected to the node.
 */
async function noticesRestart(coordinator: Coordinator, node: number): Promise<void> {
  await until(
    'the probe reaches the restarted node',
    async () => (await coordinator.nodeStatus())[node]?.reachable === true,
  );
}

/** The later client B: a child process on a clock an hour behind, or an in-process coordinator. */
interface LaterClient {
  acquire(): Promise<{ token: bigint } | null>;
  increment(): Promise<void>;
  release(): Promise<void>;
}

async function laterClient(
  kind: 'clock-behind' | 'in-process',
  history: History,
  resource: string,
  prefix: string,
  urls: readonly string[],
  warmUp: boolean,
): Promise<LaterClient> {
  if (kind === 'clock-behind') {
    const worker = await WorkerProcess.start(
      'B',
      history,
      {
        redisUrls: urls,
        nodeTimeoutMs: 400,
        maxTtlMs: MAX_TTL_MS,
        databaseUrl: world.postgres.url,
        schema: world.schema.schema,
        keyPrefix: prefix,
        warmUp,
      },
      behind.env,
    );
    workers.push(worker);
    // The fault is in place: B's wall clock (and so its time floor) runs an hour behind ours.
    expect(await worker.now()).toBeLessThan(Date.now() - 3_000_000);
    return {
      acquire: () => worker.acquire(resource, { ttlMs: MAX_TTL_MS, waitMs: 10_000 }),
      increment: async () => {
        await worker.increment(resource, { mode: 'guarded', opId: `B-${resource}` });
      },
      release: () => worker.release(),
    };
  }
  const coordinator = world.coordinator({ nodes: [...urls], keyPrefix: prefix });
  await coordinator.ready();
  let lease: Lease | null = null;
  return {
    acquire: async () => {
      lease = await recordedAcquire(history, 'B', coordinator, resource, {
        ttlMs: MAX_TTL_MS,
        waitMs: 10_000,
      });
      return lease;
    },
    increment: async () => {
      if (lease) await recordedIncrement(history, world.store, holderIncrement('B', lease, 'guarded'));
    },
    release: async () => {
      if (lease) await recordedRelease(history, 'B', lease);
    },
  };
}

interface InFlightCase {
  /** Who comes later: a client whose clock is an hour behind, or one in-process with registers seeded ahead. */
  readonly later: 'clock-behind' | 'registers-ahead';
  /** Who repairs R: another coordinator (the product), or the old repair order done by hand (negative control). */
  readonly repair: 'coordinator' | 'copy-before-sit-out';
}

/**
 * F19, the schedule of the issue. A cannot reach Y; its requests to X are held in the network. A's acquire
 * reaches R (granted, promised tA) and waits on its way to X. R is killed and restarted empty. Another
 * coordinator C notices at once (its /readyz probe) and repairs R. A's request is let through to X once the
 * repair has copied into R (at the latest 2 s after A sent it, inside A's node timeout): X promises tA and A
 * is granted tA. After R votes again, B — cut off from X — reaches R and Y, acquires and fences in; then A,
 * a zombie now, tries its write.
 */
async function inFlightAcrossRestart(c: InFlightCase): Promise<{ verdict: Verdict; notes: string }> {
  const urls = world.urls.slice(0, 3);
  const { prefix, raw } = await freshCluster(urls);
  const resource = unique('f19');
  await world.ensureCounter(resource);
  const history = new History();
  const notes: string[] = [];
  const began = performance.now();
  const phase = (what: string): void => {
    notes.push(`${((performance.now() - began) / 1000).toFixed(1)}s ${what}`);
  };

  // A: its own links; a throw-away grant loads the scripts and leaves registers on every node (a cluster with
  // a history, so a repair has something to copy and nobody takes it for a fresh cluster).
  const aLinks = await links(urls);
  const a = world.coordinator({ nodes: aLinks.urls, keyPrefix: prefix, nodeTimeoutMs: 2_500 });
  await a.ready();
  const warm = await a.acquire(`warm-${resource}`, { ttlMs: 1_000 });
  await warm.release();
  if (c.later === 'registers-ahead') {
    await seedRegistersAhead(raw, resource, prefix);
    // One completed grant on the resource: A now knows the registers, so its next proposal is promised in one round.
    const first = await recordedAcquire(history, 'A', a, resource, { ttlMs: MAX_TTL_MS });
    if (!first) throw new Error('A’s first grant failed');
    await recordedRelease(history, 'A', first);
  }
  await until('every node holds registers', async () => {
    for (const client of raw) if (!(await hasRegisters(client, prefix))) return false;
    return true;
  });

  const bLinks = await links(urls);
  const b = await laterClient(
    c.later === 'clock-behind' ? 'clock-behind' : 'in-process',
    history,
    resource,
    prefix,
    bLinks.urls,
    true,
  );
  bLinks.proxies[X]!.setMode('blackhole'); // B reaches R and Y only
  phase('B ready');

  const repairer = world.coordinator({ nodes: urls, keyPrefix: prefix });
  await repairer.ready();

  aLinks.proxies[Y]!.setMode('blackhole');
  aLinks.proxies[X]!.setMode('hold', { direction: 'to-server' });
  const sentAt = performance.now();
  const aGrant = recordedAcquire(history, 'A', a, resource, { ttlMs: MAX_TTL_MS });
  await until('A’s acquire applied on R and waiting on its way to X', async () => {
    const onR = (await raw[R]!.get(leaseKey(prefix, resource))) !== null;
    return onR && aLinks.proxies[X]!.stats.queuedBytes > 0;
  });

  await world.redis.nodes[R]!.restart({ keepData: false });
  await world.nodesAnswer([raw[R]!]);
  let handRepair: Promise<void> | undefined;
  if (c.repair === 'coordinator') await noticesRestart(repairer, R);
  else handRepair = (await repairByHandBeforeSitOut(raw[R]!, [raw[X]!, raw[Y]!], prefix)).votesAfterSitOut;

  // A's request to X lands once R has registers again (the copy happened), or 2 s after A sent it.
  while (performance.now() - sentAt < 2_000 && !(await hasRegisters(raw[R]!, prefix))) await sleep(10);
  notes.push(
    `A's promise released to X ${(performance.now() - sentAt).toFixed(0)} ms after A sent it; ` +
      `R held copied registers by then: ${await hasRegisters(raw[R]!, prefix)}`,
  );
  aLinks.proxies[X]!.release();
  const aLease = await aGrant;
  // With the sealed repair, A's held promise lands on a sealed X and is refused: A is not granted. The old order
  // (the negative control) grants it.
  if (!aLease && c.repair !== 'coordinator') {
    throw new Error(`A was not granted (precondition of the negative control); ${notes.join('; ')}`);
  }
  phase(aLease ? 'A granted' : 'A not granted: its held promise was refused by the seal');

  await handRepair;
  await until('R votes again', () => votesAgain(raw[R]!, prefix), 30_000);
  phase('R votes again');

  const bLease = await b.acquire();
  if (!bLease) throw new Error('B did not get the lease');
  notes.push(`A's token ${aLease?.token ?? '(none)'}, B's token ${bLease.token}`);
  await b.increment(); // B fences in
  if (aLease) {
    await recordedIncrement(history, world.store, holderIncrement('A', aLease, 'guarded')).catch(
      () => undefined,
    ); // the zombie
  }
  await b.release();
  if (aLease) await recordedRelease(history, 'A', aLease);
  aLinks.release();
  await world.closeCoordinator(repairer);
  await world.closeCoordinator(a);
  return { verdict: await judge(world, history, [resource]), notes: notes.join('\n') };
}

describe('a node restarted empty while a grant that counted its promise is in flight (F19)', () => {
  // Fails on a coordinator whose repair reads its sources without sealing them (the held promise then lands after
  // the read); passes with the sealed read.
  it('B, on a clock an hour behind, still gets a larger token than A, and the zombie A cannot commit after B fenced in', async () => {
    const { verdict, notes } = await inFlightAcrossRestart({ later: 'clock-behind', repair: 'coordinator' });
    expect(verdict.violations, notes).toEqual([]);
    expect(verdict.info.join('\n')).toMatch(/final 1, 1 increments ok/);
  });

  // Same, with every register seeded far above the time floor: the old order hands B A's token a second time.
  it('with registers above the time floor, B never gets A’s token again', async () => {
    const { verdict, notes } = await inFlightAcrossRestart({
      later: 'registers-ahead',
      repair: 'coordinator',
    });
    expect(verdict.violations, notes).toEqual([]);
    expect(verdict.info.join('\n')).toMatch(/final 1, 1 increments ok/);
  });

  it('negative control: the old repair order (copy at once, sit out afterwards) done by hand sends B’s token backwards and lets the zombie commit', async () => {
    const { verdict, notes } = await inFlightAcrossRestart({
      later: 'clock-behind',
      repair: 'copy-before-sit-out',
    });
    expect(verdict.ok, notes).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/tokens: .*yet its token is not larger/);
    expect(verdict.violations.join('\n')).toMatch(/commits: .*committed after that grant had fenced in/);
  });
});

describe('two nodes restarted empty at once in a five-node cluster, other processes’ views stale (F22)', () => {
  /**
   * A, cut off from nodes 3 and 4, is granted T (registers seeded above the floor) on nodes 0-2 and fences in.
   * Nodes 0 and 1 restart empty together. Two other coordinators, P and Q, each notice one of them (repairNode,
   * what their detection calls) while their cached view still counts the other as voting; both are cut off from
   * node 2, the only node that still holds T. A repair that takes its sources from that view copies from the
   * other empty node and goes ahead without node 2. After the partition heals (and, if they gave up, P and Q
   * probe again), B — reaching nodes 0, 1 and 3 only — acquires.
   */
  async function twoEmptyNodes(): Promise<{ verdict: Verdict; notes: string }> {
    const { prefix, raw } = await freshCluster(world.urls);
    const resource = unique('f22');
    await world.ensureCounter(resource);
    const ahead = await seedRegistersAhead(raw, resource, prefix);
    const history = new History();

    const pLinks = await links(world.urls);
    const qLinks = await links(world.urls);
    const bLinks = await links(world.urls);
    const aLinks = await links(world.urls);
    const p = world.coordinator({ nodes: pLinks.urls, keyPrefix: prefix });
    const q = world.coordinator({ nodes: qLinks.urls, keyPrefix: prefix });
    const b = world.coordinator({ nodes: bLinks.urls, keyPrefix: prefix });
    const a = world.coordinator({ nodes: aLinks.urls, keyPrefix: prefix });
    await Promise.all([p.ready(), q.ready(), b.ready(), a.ready()]);

    for (const i of [3, 4]) aLinks.proxies[i]!.setMode('blackhole');
    const aLease = await recordedAcquire(history, 'A', a, resource, { ttlMs: MAX_TTL_MS });
    if (!aLease) throw new Error('A did not get the lease');
    await recordedIncrement(history, world.store, holderIncrement('A', aLease, 'guarded'));
    await recordedRelease(history, 'A', aLease);
    await until('T on nodes 0-2 only', async () => {
      const values = await Promise.all(raw.map((r) => r.get(tokenKey(resource, prefix))));
      return values.slice(0, 3).every((v) => v === aLease.token.toString()) && values[3] === ahead.toString();
    });

    await Promise.all([0, 1].map((i) => world.redis.nodes[i]!.restart({ keepData: false })));
    await world.nodesAnswer(raw);
    await sleep(1_000); // P's and Q's clients reconnect to the restarted nodes (their views stay stale)
    pLinks.proxies[2]!.setMode('blackhole');
    qLinks.proxies[2]!.setMode('blackhole');
    const repairs = [p.repairNode(0), q.repairNode(1)].map((r) => r.catch((e: unknown) => String(e)));

    await sleep(MAX_TTL_MS + 1_500);
    pLinks.release();
    qLinks.release();
    const outcomes = await Promise.all(repairs);
    await until(
      'nodes 0 and 1 vote again',
      async () => {
        if ((await votesAgain(raw[0]!, prefix)) && (await votesAgain(raw[1]!, prefix))) return true;
        await Promise.all([p.nodeStatus(), q.nodeStatus()]); // probe: repairs whatever is still empty
        await sleep(500);
        return false;
      },
      40_000,
    );
    const registers = await Promise.all(raw.map((r) => r.get(tokenKey(resource, prefix))));

    for (const i of [2, 4]) bLinks.proxies[i]!.setMode('blackhole');
    const bLease = await recordedAcquire(history, 'B', b, resource, { ttlMs: MAX_TTL_MS, waitMs: 10_000 });
    if (!bLease) throw new Error('B did not get the lease');
    await recordedIncrement(history, world.store, holderIncrement('B', bLease, 'guarded')).catch(
      () => undefined,
    );
    await recordedRelease(history, 'B', bLease);
    bLinks.release();
    for (const c of [p, q, a, b]) await world.closeCoordinator(c);
    const notes =
      `seeded ${ahead}; A's token ${aLease.token}; B's token ${bLease.token}; ` +
      `registers after the repairs: ${registers.join(', ')}; first repairs: ${outcomes.map(String).join(' | ')}`;
    return { verdict: await judge(world, history, [resource]), notes };
  }

  // Fails on a repair that takes its sources from a cached "voting" view (node 0 repaired from node 1, which is
  // empty, without node 2); passes once each source is verified initialised and not under repair.
  it('never repairs a node from one that is itself empty or under repair: B’s token is still larger than A’s', async () => {
    const { verdict, notes } = await twoEmptyNodes();
    expect(verdict.violations, notes).toEqual([]);
  });

  /**
   * The fresh-cluster hole. A fresh namespace on nodes 0-2 (R, X, Y): no resource keys anywhere. A's first-ever
   * grant reaches R and waits on its way to X (held), Y unreachable. R restarts empty; C's probe finds every node
   * reachable and no resource key anywhere — A's promise is still in the network — so it takes the cluster for
   * a fresh one. A's promise then lands on X: A is granted tA. B, on a clock an hour behind, reaches R and Y.
   */
  async function inFlightFirstGrant(): Promise<{ verdict: Verdict; notes: string }> {
    const urls = world.urls.slice(0, 3);
    const { prefix, raw } = await freshCluster(urls);
    const resource = unique('f22-fresh');
    await world.ensureCounter(resource);
    const history = new History();

    const bLinks = await links(urls);
    const b = await laterClient('clock-behind', history, resource, prefix, bLinks.urls, false);
    bLinks.proxies[X]!.setMode('blackhole');
    const aLinks = await links(urls);
    const a = world.coordinator({ nodes: aLinks.urls, keyPrefix: prefix, nodeTimeoutMs: 2_500 });
    const c = world.coordinator({ nodes: urls, keyPrefix: prefix });
    await Promise.all([a.ready(), c.ready()]);
    for (const client of raw) expect(await keysOf(client, `${prefix}:{*`)).toEqual([]); // a fresh cluster

    aLinks.proxies[Y]!.setMode('blackhole');
    aLinks.proxies[X]!.setMode('hold', { direction: 'to-server' });
    const sentAt = performance.now();
    const aGrant = recordedAcquire(history, 'A', a, resource, { ttlMs: MAX_TTL_MS });
    await until('A’s first grant applied on R and waiting on its way to X', async () => {
      const onR = (await raw[R]!.get(leaseKey(prefix, resource))) !== null;
      return onR && aLinks.proxies[X]!.stats.queuedBytes > 0;
    });
    await world.redis.nodes[R]!.restart({ keepData: false });
    await world.nodesAnswer([raw[R]!]);
    await noticesRestart(c, R);
    while (performance.now() - sentAt < 2_000 && !(await votesAgain(raw[R]!, prefix))) await sleep(10);
    const notes = [
      `A's promise released to X ${(performance.now() - sentAt).toFixed(0)} ms after A sent it; ` +
        `R voted again by then: ${await votesAgain(raw[R]!, prefix)}`,
    ];
    aLinks.proxies[X]!.release();
    // A's held first grant lands on X after the repair sealed it (refused: A is not granted), or before (the repair
    // read it): either way B's token is larger than any token A holds.
    const aLease = await aGrant;
    await until('R votes again', () => votesAgain(raw[R]!, prefix), 30_000);

    const bLease = await b.acquire();
    if (!bLease) throw new Error('B did not get the lease');
    notes.push(`A's token ${aLease?.token ?? '(none: refused by the seal)'}, B's token ${bLease.token}`);
    await b.increment();
    if (aLease) {
      await recordedIncrement(history, world.store, holderIncrement('A', aLease, 'guarded')).catch(
        () => undefined,
      );
    }
    await b.release();
    if (aLease) await recordedRelease(history, 'A', aLease);
    aLinks.release();
    await world.closeCoordinator(c);
    await world.closeCoordinator(a);
    return { verdict: await judge(world, history, [resource]), notes: notes.join('\n') };
  }

  // Fails on a coordinator that initialises a node whenever a SCAN of every node finds no resource key (an
  // in-flight first grant looks like an empty cluster); passes once a fresh cluster is initialised only when no
  // node is initialised at all.
  it('an in-flight first grant is not mistaken for a fresh cluster when one node restarts', async () => {
    const { verdict, notes } = await inFlightFirstGrant();
    expect(verdict.violations, notes).toEqual([]);
    expect(verdict.info.join('\n')).toMatch(/final 1, 1 increments ok/);
  });
});
