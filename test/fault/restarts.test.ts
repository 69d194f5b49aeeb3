// F6, F7, F13, F17: servers that die, come back empty or late. Redis nodes are killed and restarted with or
// without their data (and with persistence switched off), paused past the ttl; Postgres crashes mid-traffic.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Coordinator } from '@fenced/coordinator';
import { proxyEach, type FaultProxies } from '@fenced/test-utils/fault-proxy';
import { History } from '@fenced/test-utils/history';
import { nodeKeysOf } from '../fixtures/keys.js';
import { holderIncrement, recordedIncrement } from '../fixtures/fault/counter-ops.js';
import { FaultWorld, seedRegistersAhead, unique } from '../fixtures/fault/fault-world.js';
import { crashPostgres, restartPostgres } from '../fixtures/fault/postgres-crash.js';
import {
  guardedCriticalSections,
  judge,
  recordedAcquire,
  recordedRelease,
  sleep,
  until,
  type Verdict,
} from '../fixtures/fault/verdict.js';
import { runClients, type Protection, type WorkloadClient } from '../fixtures/fault/workload.js';

let world: FaultWorld;
const linkSets: FaultProxies[] = [];

beforeAll(async () => {
  // A Postgres cluster of our own: F13 crashes it.
  world = await FaultWorld.start({ ownPostgres: true });
});

afterAll(async () => {
  await Promise.allSettled(linkSets.map((l) => l.stop()));
  await world?.close();
});

async function linksCutFrom(nodes: number[]): Promise<FaultProxies> {
  const set = await proxyEach(world.urls);
  linkSets.push(set);
  for (const i of nodes) set.proxies[i]!.setMode('blackhole');
  return set;
}

interface RestartCase {
  /** How node 2 keeps its data while it runs. */
  readonly persistence: 'fsync-always' | 'none';
  /** Whether its data directory survives the restart (false: a disk loss). */
  readonly keepData: boolean;
  /** Restart detection: off re-creates the incarnation key right after the restart, as if nothing happened. */
  readonly detection: boolean;
}

/**
 * A grants three times while cut off from nodes 3 and 4: only nodes 0-2 hold its tokens. Node 2 is killed and
 * restarted. B — a fresh process, cut off from nodes 0 and 1 — then asks for the lease, so the majority it sees
 * (2, 3, 4) holds A's tokens only if node 2 kept them. If B cannot get a majority it is healed and waits. Each
 * run has its own key prefix: a fresh cluster namespace, initialized by its first coordinator.
 */
async function restartedNode(c: RestartCase): Promise<{ verdict: Verdict; grantedWhileCut: boolean }> {
  const keyPrefix = `restart-${randomUUID().slice(0, 8)}`;
  const resource = unique('restart');
  await world.ensureCounter(resource);
  const history = new History();
  const target = world.redis.nodes[2]!;
  const unsafe = c.persistence !== 'fsync-always';
  const options = { keyPrefix, unsafeAllowUnsafeNodes: unsafe };
  const raw = await world.connectedClients(world.urls);
  let grantedWhileCut = false;
  try {
    if (unsafe) await target.restart({ keepData: true, options: { persistence: c.persistence } });
    await world.nodesAnswer(raw);
    const init = world.coordinator(options);
    await init.ready();
    await world.closeCoordinator(init);
    await seedRegistersAhead(raw, resource, keyPrefix);

    const aLinks = await linksCutFrom([3, 4]);
    const a = world.coordinator({ ...options, nodes: aLinks.urls });
    await guardedCriticalSections(world, history, 'A', a, resource, 3);
    await world.closeCoordinator(a);

    await target.restart({ keepData: c.keepData });
    await world.nodesAnswer(raw);
    if (!c.detection) {
      const incarnation = nodeKeysOf(keyPrefix).incarnation;
      await raw[2]!.set(incarnation, 'pretend-nothing-happened', 'NX');
    }

    const bLinks = await linksCutFrom([0, 1]);
    const b = world.coordinator({ ...options, nodes: bLinks.urls });
    let lease = await recordedAcquire(history, 'B', b, resource, { ttlMs: 2_000, waitMs: 2_000 });
    grantedWhileCut = lease !== null;
    if (!lease) {
      bLinks.release(); // healed: B now reaches nodes 0 and 1, which hold A's tokens
      await until('B granted after the heal', async () => {
        lease = await recordedAcquire(history, 'B', b, resource, { ttlMs: 2_000, waitMs: 2_000 });
        return lease !== null;
      });
    }
    if (lease) {
      await recordedIncrement(history, world.store, holderIncrement('B', lease, 'guarded')).catch(
        () => undefined,
      );
      await recordedRelease(history, 'B', lease);
    }
    await world.closeCoordinator(b);
  } finally {
    if (unsafe) await target.restart({ keepData: true, options: { persistence: 'fsync-always' } });
  }
  return { verdict: await judge(world, history, [resource]), grantedWhileCut };
}

describe('a Redis node killed and restarted at once without its data (F6)', () => {
  it('does not vote until it is repaired, so the next grant still gets a larger token', async () => {
    const { verdict, grantedWhileCut } = await restartedNode({
      persistence: 'fsync-always',
      keepData: false,
      detection: true,
    });
    expect(verdict.violations).toEqual([]);
    expect(grantedWhileCut).toBe(false); // refused while only the empty node and two others were reachable
    expect(verdict.info.join('\n')).toMatch(/final 4, 4 increments ok/);
  });

  it('negative control: with restart detection off the empty node votes and a token is granted twice', async () => {
    const { verdict } = await restartedNode({
      persistence: 'fsync-always',
      keepData: false,
      detection: false,
    });
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/tokens: /);
  });
});

describe('token registers across a crash (F7)', () => {
  it('with appendfsync always a killed node comes back with every register it promised', async () => {
    const { verdict, grantedWhileCut } = await restartedNode({
      persistence: 'fsync-always',
      keepData: true,
      detection: true,
    });
    expect(verdict.violations).toEqual([]);
    expect(grantedWhileCut).toBe(true); // it votes at once, and its registers push B's token up
    expect(verdict.info.join('\n')).toMatch(/final 4, 4 increments ok/);
  });

  it('with persistence off the restart is detected and the node repaired before it votes', async () => {
    const { verdict, grantedWhileCut } = await restartedNode({
      persistence: 'none',
      keepData: true,
      detection: true,
    });
    expect(verdict.violations).toEqual([]);
    expect(grantedWhileCut).toBe(false);
    expect(verdict.info.join('\n')).toMatch(/final 4, 4 increments ok/);
  });

  it('negative control: persistence off and restart detection off let the tokens go backwards', async () => {
    const { verdict } = await restartedNode({ persistence: 'none', keepData: true, detection: false });
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/tokens: /);
  });
});

describe('a Redis node paused past the ttl that applies its queued commands late (F17)', () => {
  /**
   * Three clients run critical sections while node 0 is stopped (SIGSTOP) for three ttls, then nodes 1 and 2
   * together (no majority) for three ttls; everything sent to them meanwhile runs when they resume. Critical
   * sections last two ttls between read and write, so leases expire mid-write and the next holder reads first.
   */
  async function pausedNodes(protection: Protection): Promise<Verdict> {
    const resource = unique('f17');
    await world.ensureCounter(resource);
    const history = new History();
    const clients: WorkloadClient[] = [];
    const coordinators: Coordinator[] = [];
    for (const name of ['A', 'B', 'C']) {
      const coordinator = world.coordinator();
      await coordinator.ready();
      coordinators.push(coordinator);
      clients.push({ name, coordinator, store: world.store });
    }
    const ttlMs = 300;
    let done = false;
    const work = runClients(history, clients, {
      resource,
      protection,
      ttlMs,
      holdMs: ttlMs * 2,
      waitMs: 5_000,
      maxCycles: 4,
      stop: () => done,
    });
    const nodes = world.redis.nodes;
    try {
      nodes[0]!.pause();
      await sleep(ttlMs * 3);
      nodes[0]!.resume();
      nodes[1]!.pause();
      nodes[2]!.pause();
      await sleep(ttlMs * 3);
    } finally {
      for (const node of nodes) node.resume();
    }
    await work;
    done = true;
    for (const c of coordinators) await world.closeCoordinator(c);
    return judge(world, history, [resource]);
  }

  it('keeps every checker green while the late commands land', async () => {
    const verdict = await pausedNodes('protected');
    expect(verdict.violations).toEqual([]);
  });

  it('negative control: without the guard the overlapping holders lose updates', async () => {
    const verdict = await pausedNodes('no-guard');
    expect(verdict.ok).toBe(false);
  });
});

describe('Postgres crashing during guarded traffic (F13)', () => {
  beforeAll(async () => {
    // Make the server itself unsafe: asynchronous commits by default (the role's setting wins over the command
    // line), and a WAL writer that writes at most every 10 s. Only what forces synchronous_commit on survives.
    await world.admin.query(`alter role postgres set synchronous_commit = off`);
    await world.admin.query(`alter system set wal_writer_delay = '10s'`);
    await world.admin.query(`select pg_reload_conf()`);
  });

  /**
   * Three clients increment; once every client has had at least two increments acknowledged, the server is
   * crashed (immediate shutdown: no checkpoint, no WAL flush) while traffic runs, then started again; the clients
   * retry what failed with the same operation ids.
   */
  async function crashDuringTraffic(protection: Protection): Promise<Verdict> {
    const resource = unique('f13');
    await world.ensureCounter(resource);
    const history = new History();
    const coordinator = world.coordinator();
    const clients: WorkloadClient[] = ['A', 'B', 'C'].map((name) => ({
      name,
      coordinator,
      store: world.anotherStore({ maxConnections: 2 }),
    }));
    let crashed = false;
    const acked = (): number =>
      history.events.filter((e) => e.op === 'increment' && e.kind === 'ok' && e.resource === resource).length;
    const work = runClients(history, clients, {
      resource,
      protection,
      ttlMs: 2_000,
      waitMs: 5_000,
      maxCycles: 30,
      stop: () => crashed,
    });
    await until('six increments acknowledged', () => acked() >= 6);
    crashed = true;
    await crashPostgres(world.postgres);
    await work;
    await restartPostgres(world.postgres);
    const high = await world.fenceToken(resource);
    const verdict = await judge(world, history, [resource]);
    if (protection === 'protected') {
      // The fence never went below a token whose write was acknowledged.
      const ackedTokens = history.events
        .filter((e) => e.op === 'increment' && e.kind === 'ok' && e.resource === resource)
        .map((e) => history.events.find((i) => i.call === e.call && i.kind === 'invoke')!.token!);
      for (const token of ackedTokens) expect(high).toBeGreaterThanOrEqual(token);
    }
    return verdict;
  }

  it('loses no acknowledged write and no fence goes back: the guard forces synchronous commits', async () => {
    const verdict = await crashDuringTraffic('protected');
    expect(verdict.violations).toEqual([]);
  });

  it('negative control: unguarded writes under the server’s asynchronous commits are lost in the crash', async () => {
    const verdict = await crashDuringTraffic('no-guard');
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/lost update|acknowledged but never took effect/);
  });
});
