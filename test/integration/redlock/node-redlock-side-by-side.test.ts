import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import NodeRedlock, { ExecutionError as NodeExecutionError } from 'redlock';
import FencedRedlock, { ExecutionError, type Lock as FencedLock } from '@fenced/redlock';
import { ClusterSettingsError, Coordinator, type CoordinatorOptions } from '@fenced/coordinator';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { eventually } from '@fenced/test-utils/eventually';
import { keysOf, settingsKey } from '../../fixtures/keys.js';
import { lockValue } from './redlock-fixture.js';

// A rolling migration from node-redlock v5 to @fenced/redlock: old and new workers run side by side on the same nodes
// and must exclude each other, whoever initialized the nodes. A Coordinator on its defaults records the 'fenced' key
// layout; a @fenced/redlock Redlock on its defaults records 'redlock'. On 'fenced' nodes the drop-in keeps the
// cluster's one token register and record and also holds node-redlock's key, the resource name (the coordinator's
// `holdRedlockKey`, keys/key-layout.ts); on 'redlock' nodes that key is its lease key anyway. The negative control runs
// the drop-in with `holdRedlockKey: false` on 'fenced' nodes and must show both sides granted at once.

const DURATION = 30_000;

interface NodeSet {
  readonly env: RedisNodes;
  readonly clients: Redis[];
}

const started: NodeSet[] = [];
const closers: (() => Promise<unknown>)[] = [];
let unique = 0;

async function startNodes(): Promise<NodeSet> {
  const env = await startRedisNodes(3);
  const set = { env, clients: env.urls.map((url) => new Redis(url)) };
  started.push(set);
  return set;
}

/** A fresh client per product, as separate worker processes would have. */
function clientsOf(set: NodeSet): Redis[] {
  const clients = set.env.urls.map((url) => new Redis(url));
  closers.push(() => Promise.resolve(clients.forEach((client) => client.disconnect())));
  return clients;
}

/** An old worker: node-redlock v5 itself, one attempt per call. */
function oldWorker(set: NodeSet): NodeRedlock {
  return new NodeRedlock(clientsOf(set), { retryCount: 0 });
}

/** A new worker: @fenced/redlock on its defaults (one attempt per call), or with `extra` fenced settings. */
function newWorker(set: NodeSet, extra: Partial<CoordinatorOptions> = {}): FencedRedlock {
  const redlock = new FencedRedlock(clientsOf(set), { retryCount: 0, ...extra });
  closers.push(() => redlock.coordinator.close());
  return redlock;
}

function coordinatorOn(set: NodeSet): Coordinator {
  const coordinator = new Coordinator({ nodes: set.env.urls });
  closers.push(() => coordinator.close());
  return coordinator;
}

/** Whether `acquire` is refused (either product's ExecutionError); a grant is released at once. */
async function refused(acquire: () => Promise<{ release(): Promise<unknown> }>): Promise<boolean> {
  try {
    const lock = await acquire();
    await lock.release();
    return false;
  } catch (error) {
    if (error instanceof ExecutionError || error instanceof NodeExecutionError) return true;
    throw error;
  }
}

/**
 * The checker: while `holder` holds the resource, `other` is refused; once the holder released, `other` is granted.
 * Returns whether the two excluded each other.
 */
async function excludes(
  hold: () => Promise<{ release(): Promise<unknown> }>,
  other: () => Promise<{ release(): Promise<unknown> }>,
): Promise<boolean> {
  const held = await hold();
  const excluded = await refused(other);
  await held.release();
  // The other side is granted once the holder is gone: the refusal was the holder's doing, not a broken node.
  expect(await refused(other)).toBe(false);
  return excluded;
}

beforeAll(async () => {
  const [byCoordinator, byRedlock] = await Promise.all([startNodes(), startNodes()]);
  // (a) a Coordinator on its defaults initializes one set (the README's first example)...
  await coordinatorOn(byCoordinator).ready();
  // (b) ...a @fenced/redlock Redlock on its defaults the other.
  await newWorker(byRedlock).coordinator.ready();
  initializedBy.coordinator = byCoordinator;
  initializedBy.redlock = byRedlock;
});

afterAll(async () => {
  await Promise.all(closers.map((close) => close().catch(() => undefined)));
  for (const set of started) for (const client of set.clients) client.disconnect();
  await Promise.all(started.map((set) => set.env.stop()));
});

const initializedBy: Record<'coordinator' | 'redlock', NodeSet> = {} as never;

describe.each([
  ['a Coordinator', 'coordinator', 'fenced'],
  ['a @fenced/redlock Redlock', 'redlock', 'redlock'],
] as const)('on nodes initialized by %s on its defaults', (_name, by, layout) => {
  const resource = (): string => `account:frank-${by}-${++unique}`;

  it(`records the '${layout}' key layout`, async () => {
    for (const client of initializedBy[by].clients) {
      expect(await client.hget(settingsKey('fenced'), 'keyLayout')).toBe(layout);
    }
  });

  it('a node-redlock lock refuses @fenced/redlock until it is released', async () => {
    const set = initializedBy[by];
    const name = resource();
    const old = oldWorker(set);
    const fenced = newWorker(set);
    expect(
      await excludes(
        () => old.acquire([name], DURATION),
        () => fenced.acquire([name], DURATION),
      ),
    ).toBe(true);
  });

  it('a @fenced/redlock lock refuses node-redlock until it is released', async () => {
    const set = initializedBy[by];
    const name = resource();
    const old = oldWorker(set);
    const fenced = newWorker(set);
    expect(
      await excludes(
        () => fenced.acquire([name], DURATION),
        () => old.acquire([name], DURATION),
      ),
    ).toBe(true);
  });

  it('a node-redlock lock that expires lets @fenced/redlock in', async () => {
    const set = initializedBy[by];
    const name = resource();
    const old = oldWorker(set);
    // Never released: only its expiry frees the resource; the new worker retries until then.
    await old.acquire([name], 300);
    const fenced = new FencedRedlock(clientsOf(set), { retryCount: -1, retryDelay: 50, retryJitter: 10 });
    closers.push(() => fenced.coordinator.close());
    const lock = await fenced.acquire([name], DURATION);
    for (const client of set.clients) expect(await lockValue(client, name)).toBe(lock.value);
    await lock.release();
  });

  it('keeps node-redlock’s key under the resource name, holding the lock’s value, and one token register', async () => {
    const set = initializedBy[by];
    const name = resource();
    const fenced = newWorker(set);
    const coordinator = coordinatorOn(set);
    const lock: FencedLock = await fenced.acquire([name], DURATION);
    const keys = keysOf(name, 'fenced', layout);
    for (const client of set.clients) {
      expect(await lockValue(client, name)).toBe(lock.value);
      expect(await client.get(keys.record)).toBe(`${lock.value}|${lock.token}`);
    }
    // A Coordinator on its defaults adopts the recorded layout and is excluded too (the record is held).
    expect(await coordinator.tryAcquire(name, { ttlMs: 1_000 })).toBeNull();
    expect(await coordinator.inspect(name)).toEqual({ held: true, token: lock.token });
    await lock.release();
    for (const client of set.clients) expect(await client.exists(name, keys.record)).toBe(0);
    // One register per resource: each product's token goes above the other's.
    const lease = await coordinator.acquire(name, { ttlMs: 1_000 });
    expect(lease.token > lock.token!).toBe(true);
    // The drop-in sees the Coordinator's lease, which holds the record and not the resource name.
    expect(await fenced.coordinator.inspect(name)).toEqual({ held: true, token: lease.token });
    expect(await refused(() => fenced.acquire([name], DURATION))).toBe(true);
    await lease.release();
    const next = await fenced.acquire([name], DURATION);
    expect(next.token! > lease.token).toBe(true);
    await next.release();
  });
});

describe("a Redlock that names maxTtlMs on 'fenced' nodes", () => {
  it("is refused for its 'redlock' layout unless it names keyLayout 'fenced', and then excludes node-redlock", async () => {
    const set = initializedBy.coordinator;
    const name = `account:frank-max-${++unique}`;
    const strict = newWorker(set, { maxTtlMs: 3_600_000 });
    await expect(strict.coordinator.ready()).rejects.toBeInstanceOf(ClusterSettingsError);
    const fenced = newWorker(set, { maxTtlMs: 3_600_000, keyLayout: 'fenced' });
    const old = oldWorker(set);
    expect(
      await excludes(
        () => old.acquire([name], DURATION),
        () => fenced.acquire([name], DURATION),
      ),
    ).toBe(true);
  });
});

describe("negative control: @fenced/redlock without node-redlock's key on 'fenced' nodes", () => {
  it('is granted while node-redlock holds the resource, and node-redlock while it does', async () => {
    const set = initializedBy.coordinator;
    const old = oldWorker(set);
    const fenced = newWorker(set, { holdRedlockKey: false });
    const first = `account:frank-off-${++unique}`;
    expect(
      await excludes(
        () => old.acquire([first], DURATION),
        () => fenced.acquire([first], DURATION),
      ),
    ).toBe(false);
    const second = `account:frank-off-${++unique}`;
    expect(
      await excludes(
        () => fenced.acquire([second], DURATION),
        () => old.acquire([second], DURATION),
      ),
    ).toBe(false);
  });
});

// Last: it flushes a node of the shared set.
describe("a node of 'fenced' nodes that lost its data while @fenced/redlock holds a lock", () => {
  it('gets the record back from the repair and node-redlock’s key back from the next extension', async () => {
    const set = initializedBy.coordinator;
    const name = `account:frank-repair-${++unique}`;
    const keys = keysOf(name);
    const fenced = newWorker(set);
    const old = oldWorker(set);
    let lock = await fenced.acquire([name], DURATION);
    const lost = set.clients[0]!;
    await lost.flushall();
    // A call that meets the empty node starts its repair (nodes/repair.ts), which copies the live lease's record.
    await fenced.coordinator.inspect(name);
    await eventually(async () => (await lost.get(keys.record)) === `${lock.value}|${lock.token}`, {
      what: 'the repaired record',
      timeoutMs: 20_000,
    });
    // A repair copies records only: the name is not back yet on that node...
    expect(await lost.get(name)).toBeNull();
    // ...until the holder's next extension takes it again there.
    lock = await lock.extend(DURATION);
    for (const client of set.clients) expect(await lockValue(client, name)).toBe(lock.value);
    expect(await refused(() => old.acquire([name], DURATION))).toBe(true);
    await lock.release();
    for (const client of set.clients) expect(await client.exists(name, keys.record)).toBe(0);
  }, 30_000);
});
