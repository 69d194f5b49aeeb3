// F3, F8, F9, F10: what the network does to requests — holds them past a lease, partitions the nodes, loses
// replies of requests that were applied, delays and reorders. Every run is judged from its history.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Coordinator } from '@fenced/coordinator';
import { ConnectionLostError } from '@fenced/guarded-store';
import { QuorumUnavailableError } from '@fenced/shared';
import { FaultProxy, proxyEach, type FaultProxies } from '@fenced/test-utils/fault-proxy';
import { History } from '@fenced/test-utils/history';
import {
  GUARD_PATHS,
  holderIncrement,
  readCounter,
  readOutside,
  recordedIncrement,
  writeCounter,
} from '../fixtures/fault/counter-ops.js';
import { FaultWorld, leaseRef, seedRegistersAhead, unique } from '../fixtures/fault/fault-world.js';
import { NaiveTokenSource } from '../fixtures/fault/naive-token-source.js';
import {
  judge,
  recordedAcquire,
  recordedRelease,
  sleep,
  until,
  type Verdict,
} from '../fixtures/fault/verdict.js';
import { runClients, type Protection, type WorkloadClient } from '../fixtures/fault/workload.js';

let world: FaultWorld;
const proxies: (FaultProxies | FaultProxy)[] = [];

beforeAll(async () => {
  world = await FaultWorld.start();
});

afterAll(async () => {
  await Promise.allSettled(proxies.map((p) => p.stop()));
  await world?.close();
});

async function links(): Promise<FaultProxies> {
  const set = await proxyEach(world.urls);
  proxies.push(set);
  return set;
}

async function postgresLink(): Promise<FaultProxy> {
  const proxy = await FaultProxy.start({ target: world.postgres.url });
  proxies.push(proxy);
  return proxy;
}

/** A workload client whose Redis traffic (coordinator and naive tokens) goes through its own proxies. */
async function proxiedClient(
  name: string,
  store = world.store,
): Promise<WorkloadClient & { links: FaultProxies }> {
  const set = await links();
  const coordinator = world.coordinator({ nodes: set.urls });
  await coordinator.ready();
  const naiveClients = await world.connectedClients(set.urls);
  return { name, coordinator, store, naive: new NaiveTokenSource(naiveClients), links: set };
}

/** After a heal, the links that lost bytes were reset: waits until the coordinator has reconnected to all. */
async function everyNodeVotes(coordinator: Coordinator): Promise<void> {
  await until('every node reachable and voting again', async () =>
    (await coordinator.nodeStatus()).every((s) => s.reachable && s.voting),
  );
}

describe.each(GUARD_PATHS)(
  'a guarded write held in the network past the ttl (F3), through the %s guard path',
  (path) => {
    // A and B write through `path` (test/fixtures/fault/guard-paths.ts); A's single connection goes through a Postgres proxy.
    async function writeHeldPastTtl(protection: 'protected' | 'no-guard'): Promise<Verdict> {
      const resource = unique('f3');
      await world.ensureCounter(resource);
      const history = new History();
      const mode = protection === 'protected' ? 'guarded' : 'unguarded';
      const pgLink = await postgresLink();
      const aStore = await world.counterStore(path, { connectionString: pgLink.url, maxConnections: 1 });
      const bStore = await world.counterStore(path);
      const coordinator = world.coordinator();
      const a = await recordedAcquire(history, 'A', coordinator, resource, { ttlMs: 500 });
      if (!a) throw new Error('A did not get the lease');
      // A's critical section reads (this also opens A's connection), then sends its write, which the network holds.
      const readBefore = await readOutside(aStore, resource);
      pgLink.setMode('hold');
      const aWrite = recordedIncrement(
        history,
        aStore,
        holderIncrement('A', a, mode, mode === 'unguarded' ? { readBefore } : {}),
      ).catch(() => undefined);
      await until('A’s write waiting in the network', () => pgLink.stats.queuedBytes > 0);
      await sleep(700);
      const b = await recordedAcquire(history, 'B', coordinator, resource, { ttlMs: 3_000, waitMs: 10_000 });
      if (!b) throw new Error('B did not get the lease');
      await recordedIncrement(history, bStore, holderIncrement('B', b, mode));
      await recordedRelease(history, 'B', b);
      pgLink.release();
      await aWrite;
      return judge(world, history, [resource]);
    }

    it('is refused when it finally arrives after the successor fenced in', async () => {
      const verdict = await writeHeldPastTtl('protected');
      expect(verdict.violations).toEqual([]);
      expect(verdict.info.join('\n')).toMatch(/final 1, 1 increments ok/);
    });

    it('negative control: without the guard the late write lands and overwrites the successor', async () => {
      const verdict = await writeHeldPastTtl('no-guard');
      expect(verdict.ok).toBe(false);
      expect(verdict.violations.join('\n')).toMatch(/below the high-water mark/);
      expect(verdict.violations.join('\n')).toMatch(/lost update/);
    });
  },
);

describe('partitions: minority, shifting minorities, majority, an isolated client, flapping (F8)', () => {
  /**
   * Three clients, each with its own links to the five nodes, run critical sections through a fixed schedule of
   * partitions. Each phase runs a fixed number of rounds (every client one critical section per round), so the
   * phases are defined by the work done in them, not by time.
   */
  async function partitionSchedule(protection: Protection): Promise<Verdict> {
    const resource = unique('f8');
    await world.ensureCounter(resource);
    await seedRegistersAhead(await world.connectedClients(world.urls), resource);
    const history = new History();
    const clients = await Promise.all(['A', 'B', 'C'].map((name) => proxiedClient(name)));
    const cut = (nodes: number[], who = clients): void => {
      for (const client of clients) client.links.release();
      for (const client of who) for (const i of nodes) client.links.proxies[i]!.setMode('blackhole');
    };
    const rounds = (n: number, who = clients): Promise<void> =>
      runClients(history, who, { resource, protection, ttlMs: 500, waitMs: 2_000, maxCycles: n });
    try {
      cut([3, 4]); // a minority: nodes 0-2 carry every grant
      await rounds(2);
      cut([1, 2]); // another minority: 0, 3, 4 — nodes 3 and 4 missed phase one
      await rounds(2);
      cut([0, 4]); // 1, 2, 3: none of them saw all of phase two
      await rounds(1);
      cut([0, 1, 2], [clients[2]!]); // C alone loses a majority: it must fail, not wait or guess
      await rounds(1);
      cut([0, 1, 2, 3, 4], [clients[1]!]); // B isolated from every node
      await rounds(1);
      cut([]);
      let flapping = true;
      const flapper = (async () => {
        for (let i = 0; flapping && i < 200; i++) {
          for (const client of clients) {
            const link = client.links.proxies[i % 2]!; // nodes 0 and 1 come and go
            link.setMode(link.mode === 'blackhole' ? 'pass' : 'blackhole');
          }
          await sleep(60);
        }
      })();
      await rounds(2);
      flapping = false;
      await flapper;
    } finally {
      cut([]);
    }
    return judge(world, history, [resource]);
  }

  it('keeps tokens unique and increasing and every commit in token order', async () => {
    const verdict = await partitionSchedule('protected');
    expect(verdict.violations).toEqual([]);
    expect(verdict.info.join('\n')).toMatch(/grants/);
  });

  it('negative control: naive INCR-max tokens go backwards across the shifting minorities', async () => {
    const verdict = await partitionSchedule('naive-tokens');
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/tokens: .*yet its token is not larger/);
  });
});

describe('a client cut off from a majority while the resource is held (F8)', () => {
  // The reachable minority's "held" replies arrive before the unreachable nodes time out, so the vote is lost
  // while a majority is still silent. The attempt is classified from every node's final reply (not the
  // snapshot at the decision), so the caller sees QUORUM_UNAVAILABLE (after retrying within waitMs, since
  // timed-out nodes may answer again), never LOCKED: nobody showed that another holder has a majority.
  it('fails with QuorumUnavailableError, not LockedError after waiting', async () => {
    const resource = unique('f8-majority-held');
    const holder = world.coordinator();
    const lease = await holder.acquire(resource, { ttlMs: 3_000 });
    const cut = await links();
    const c = world.coordinator({ nodes: cut.urls });
    await c.ready(); // C has seen every node voting; then it loses nodes 0-2
    for (const i of [0, 1, 2]) cut.proxies[i]!.setMode('blackhole');
    try {
      const error: unknown = await c
        .acquire(resource, { ttlMs: 1_000, waitMs: 1_500 })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(QuorumUnavailableError);
    } finally {
      cut.release();
      await lease.release();
    }
  });
});

describe('requests applied whose replies were lost (F9)', () => {
  /**
   * Registers seeded above the time floor, so every token comes from the registers alone. A's acquire is applied
   * on every node with every reply lost (A holds nothing); B grants and writes. A gets the lease, extends it once
   * (recorded with the token the nodes returned), then extends and releases with every reply lost, so it never
   * learns whether either happened. B takes over and writes; A, still unsure, writes late — from the value it
   * read while it held the lease, in the negative control's unguarded read-modify-write.
   */
  async function repliesLost(protection: 'protected' | 'no-guard'): Promise<Verdict> {
    const resource = unique('f9-redis');
    await world.ensureCounter(resource);
    await seedRegistersAhead(await world.connectedClients(world.urls), resource);
    const history = new History();
    const a = await proxiedClient('A');
    const b = world.coordinator();
    const ttlMs = 600;
    const mode = protection === 'protected' ? 'guarded' : 'unguarded';
    const extend = (note: string) =>
      history
        .run(
          'A',
          'extend',
          resource,
          // By id: the token comes back from the nodes (extend.lua), not from the lease object.
          () => a.coordinator.extend(resource, aLease.id, ttlMs),
          (extended) => ({ token: extended.token, validityMs: extended.validityMs }),
          { fields: { leaseId: leaseRef(aLease.id), value: note } },
        )
        .catch(() => undefined);

    // Acquire applied on every node (lease keys set, token promised), every reply lost: A holds nothing.
    a.links.setMode('drop-responses');
    await recordedAcquire(history, 'A', a.coordinator, resource, { ttlMs });
    a.links.release();
    await everyNodeVotes(a.coordinator);
    const bLease = await recordedAcquire(history, 'B', b, resource, { ttlMs: 3_000, waitMs: 10_000 });
    if (!bLease) throw new Error('B did not get the lease');
    await recordedIncrement(
      history,
      world.store,
      holderIncrement('B', bLease, mode, { opId: `B1-${resource}` }),
    );
    await recordedRelease(history, 'B', bLease);

    // A gets a lease and extends it once for real; then an extend applied with the replies lost.
    const granted = await recordedAcquire(history, 'A', a.coordinator, resource, { ttlMs, waitMs: 10_000 });
    if (!granted) throw new Error('A did not get the lease');
    const aLease = granted;
    const aRead = await readOutside(world.store, resource);
    await extend('answered');
    a.links.setMode('drop-responses');
    await extend('reply lost');
    // And its release is applied with the reply lost too: B may take over at once.
    await recordedRelease(history, 'A', aLease);
    a.links.release();
    await everyNodeVotes(a.coordinator);
    const bAgain = await recordedAcquire(history, 'B', b, resource, { ttlMs: 3_000, waitMs: 10_000 });
    if (!bAgain) throw new Error('B did not get the lease again');
    await recordedIncrement(
      history,
      world.store,
      holderIncrement('B', bAgain, mode, { opId: `B2-${resource}` }),
    );
    // A, which never learnt whether its extend or release happened, writes late: the fence refuses it.
    await recordedIncrement(
      history,
      world.store,
      holderIncrement('A', aLease, mode, mode === 'unguarded' ? { readBefore: aRead } : {}),
    ).catch(() => undefined);
    await recordedRelease(history, 'B', bAgain);
    return judge(world, history, [resource]);
  }

  it('an acquire, extend and release whose replies are lost never give two grants one token nor reorder commits', async () => {
    const verdict = await repliesLost('protected');
    expect(verdict.violations).toEqual([]);
    expect(verdict.info.join('\n')).toMatch(/final 2, 2 increments ok/);
  });

  it('negative control: without the guard, A’s late write after the lost replies lands below B’s and loses its update', async () => {
    const verdict = await repliesLost('no-guard');
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/below the high-water mark/);
    expect(verdict.violations.join('\n')).toMatch(/lost update/);
  });

  /**
   * A guarded increment whose COMMIT reaches Postgres and commits, but whose reply is lost: the client sees a
   * lost connection (outcome unknown) and retries with the same operation id.
   */
  async function commitReplyLost(protection: 'protected' | 'no-guard'): Promise<Verdict> {
    const resource = unique('f9-pg');
    await world.ensureCounter(resource);
    const history = new History();
    const pgLink = await postgresLink();
    const aStore = world.anotherStore({ connectionString: pgLink.url, maxConnections: 1 });
    const lease = await recordedAcquire(history, 'A', world.coordinator(), resource, { ttlMs: 3_000 });
    if (!lease) throw new Error('A did not get the lease');
    const input = {
      resource,
      token: lease.token,
      leaseRef: leaseRef(lease.id),
      process: 'A',
      opId: `A-${resource}`,
    };
    let slowNext = true;
    const body = async (trx: Parameters<Parameters<typeof aStore.dangerouslyRunUnguarded>[0]>[0]) => {
      const next = (await readCounter(trx, resource)) + 1n;
      await writeCounter(trx, input, next);
      // From here on replies come back slowly, the COMMIT's included; once the COMMIT has landed, its reply is
      // dropped from the queue — a reply lost after the request was applied.
      if (slowNext) pgLink.setMode('delay', { direction: 'to-client', delayMs: 2_000 });
      slowNext = false;
      return Number(next);
    };
    const attempt = (): Promise<number> =>
      protection === 'protected'
        ? aStore.run(lease, body, { opId: input.opId })
        : aStore.dangerouslyRunUnguarded(body);
    const first = history.invoke('A', 'increment', resource, {
      token: input.token,
      leaseId: input.leaseRef,
      opId: input.opId,
    });
    const outcome = attempt().then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    );
    await until('the COMMIT to land', async () => (await world.counterValue(resource)) === 1n);
    pgLink.setMode('drop-responses');
    pgLink.release(); // the connection that lost a reply is reset now
    const result = await outcome;
    if ('value' in result) first.ok({ value: result.value });
    else first.unknown({ error: String(result.error) });
    // The store says what happened: the connection died with the COMMIT in flight, outcome unknown.
    expect(
      'error' in result && result.error instanceof ConnectionLostError && result.error.indeterminate,
    ).toBe(true);
    const retry = history.invoke('A', 'increment', resource, {
      token: input.token,
      leaseId: input.leaseRef,
      opId: input.opId,
    });
    retry.ok({ value: await attempt() });
    await recordedRelease(history, 'A', lease);
    return judge(world, history, [resource]);
  }

  it('a guarded write retried after its commit reply was lost takes effect once (G5)', async () => {
    const verdict = await commitReplyLost('protected');
    expect(verdict.violations).toEqual([]);
    expect(verdict.info.join('\n')).toMatch(/1 operation ids, 1 retried, 1 applied/);
  });

  it('negative control: the same retry without the guard’s operation id applies twice', async () => {
    const verdict = await commitReplyLost('no-guard');
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/took effect 2 times/);
  });
});

describe('latency, jitter and reordering on the Redis and Postgres paths (F10)', () => {
  /**
   * Three clients; every Redis link delays each chunk 5-35 ms (nodes answer out of order), every Postgres link
   * 40-60 ms each way, and each critical section also spends a ttl between its read and its write (a call to
   * another service), so every write outlives its 300 ms lease by far: the next holder starts while the last one is
   * still writing.
   */
  async function slowNetwork(protection: Protection): Promise<Verdict> {
    const resource = unique('f10');
    await world.ensureCounter(resource);
    const history = new History();
    const clients: WorkloadClient[] = [];
    for (const name of ['A', 'B', 'C']) {
      const pgLink = await postgresLink();
      const store = world.anotherStore({ connectionString: pgLink.url, maxConnections: 2 });
      await store.read((trx) => readCounter(trx, resource)); // connect before the delays
      const client = await proxiedClient(name, store);
      client.links.setMode('delay', { delayMs: 5, jitterMs: 30 });
      pgLink.setMode('delay', { delayMs: 40, jitterMs: 20 });
      clients.push(client);
    }
    await runClients(history, clients, {
      resource,
      protection,
      ttlMs: 300,
      holdMs: 450,
      waitMs: 10_000,
      maxCycles: 2,
    });
    return judge(world, history, [resource]);
  }

  it('loses no update and keeps commits in token order when every write outlives its lease', async () => {
    const verdict = await slowNetwork('protected');
    expect(verdict.violations).toEqual([]);
  });

  it('negative control: without the guard the overlapping holders lose updates', async () => {
    const verdict = await slowNetwork('no-guard');
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/lost update|wrote .* after|below the high-water mark/);
  });
});
