// The 'redlock' key layout (keys/key-layout.ts) on real nodes: the lease key is the resource name holding exactly the
// lease id, and every script that reads a lease (acquire, extend, release, inspect, the repair's copy, fold) finds
// the lease's record and token register beside it. The layout is one of the cluster's settings: a process in the
// other layout refuses to start on the same nodes, since it would keep a second token register per resource.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ClusterSettingsError, type Coordinator } from '@fenced/coordinator';
import { InvalidRequestError } from '@fenced/shared';
import {
  eventually,
  keysOf,
  nodeKeysOf,
  settingsKey,
  startCoordinatorFixture,
  unique,
  type CoordinatorFixture,
} from '../../../fixtures/coordinator-fixture.js';

const PREFIX = 'fenced-layout';
let fx: CoordinatorFixture;
let coordinator: Coordinator;

beforeAll(async () => {
  fx = await startCoordinatorFixture(3, { coordinator: false });
  coordinator = fx.another({ keyPrefix: PREFIX, keyLayout: 'redlock' });
  await coordinator.ready();
});

afterAll(async () => {
  await fx?.close();
});

describe("keyLayout 'redlock'", () => {
  it('keeps the lease under the resource name, holding exactly the lease id, and the token in its record', async () => {
    const resource = `{redlock}${unique('plain')}`;
    const keys = keysOf(resource, PREFIX, 'redlock');
    const lease = await coordinator.acquire(resource, { ttlMs: 30_000 });
    for (const node of fx.raw) {
      expect(await node.get(resource)).toBe(lease.id);
      expect(await node.get(keys.record)).toBe(`${lease.id}|${lease.token}`);
      expect(await node.pttl(resource)).toBeGreaterThan(29_000);
    }
    expect(await coordinator.inspect(resource)).toEqual({ held: true, token: lease.token });

    await lease.extend(60_000);
    for (const node of fx.raw) {
      expect(await node.pttl(resource)).toBeGreaterThan(59_000);
      expect(await node.pttl(keys.record)).toBeGreaterThan(59_000);
    }

    await lease.release();
    for (const node of fx.raw) {
      expect(await node.exists(resource, keys.record)).toBe(0);
      // The token register stays: the next grant's token goes above it.
      expect(await node.get(keys.token)).toBe(lease.token.toString());
    }
    const next = await coordinator.acquire(resource, { ttlMs: 1_000 });
    expect(next.token > lease.token).toBe(true);
    await next.release();
  });

  it('puts the record, register and channel in the lease key’s cluster slot', () => {
    const resource = '{user:7}/orders';
    const keys = keysOf(resource, PREFIX, 'redlock');
    const tag = (key: string): string => key.slice(key.indexOf('{') + 1, key.indexOf('}'));
    expect(keys.lease).toBe(resource);
    // Different hash tags, same slot: checked against Redis' own CLUSTER KEYSLOT in the slots unit tests.
    expect(tag(keys.record)).toBe(tag(keys.token));
    expect(tag(keys.record)).toBe(tag(keys.channel));
    expect(tag(keys.record)).not.toBe('user:7');
  });

  it('counts a key another program set under the resource name as another holder, and leaves it alone', async () => {
    const resource = `{redlock}${unique('planted')}`;
    await fx.raw[1]!.set(resource, 'other');
    await fx.raw[2]!.set(resource, 'other');
    await expect(coordinator.acquire(resource, { ttlMs: 5_000 })).rejects.toMatchObject({ code: 'LOCKED' });
    expect(await fx.raw[0]!.get(resource)).toBeNull();
    expect(await fx.raw[1]!.get(resource)).toBe('other');
    expect(await fx.raw[1]!.pttl(resource)).toBe(-1);
    // Held, with no token of fenced's to report for it.
    expect(await coordinator.inspect(resource)).toEqual({ held: true });

    // A minority of such keys does not stop a grant, and is not touched by it or by the release.
    await fx.raw[2]!.del(resource);
    const lease = await coordinator.acquire(resource, { ttlMs: 5_000 });
    expect(await fx.raw[0]!.get(resource)).toBe(lease.id);
    await lease.release();
    expect(await fx.raw[1]!.get(resource)).toBe('other');
    await fx.raw[1]!.del(resource);
  });

  it('refuses a resource name inside its own namespace', async () => {
    await expect(coordinator.acquire(`${PREFIX}:{x}:token`, { ttlMs: 1_000 })).rejects.toBeInstanceOf(
      InvalidRequestError,
    );
  });

  it("copies a live lease's key and record onto a flushed node (the sealed repair)", async () => {
    const resource = `{redlock}${unique('repaired')}`;
    const keys = keysOf(resource, PREFIX, 'redlock');
    const lease = await coordinator.acquire(resource, { ttlMs: 60_000 });
    await fx.raw[0]!.flushall();
    // Any call that reaches the node finds it empty; the repair then copies from the other two.
    await eventually(
      async () => {
        await coordinator.nodeStatus();
        return (await fx.raw[0]!.exists(nodeKeysOf(PREFIX).incarnation)) === 1;
      },
      { what: 'node 0 repaired' },
    );
    expect(await fx.raw[0]!.get(resource)).toBe(lease.id);
    expect(await fx.raw[0]!.get(keys.record)).toBe(`${lease.id}|${lease.token}`);
    expect(await fx.raw[0]!.get(keys.token)).toBe(lease.token.toString());
    expect(await fx.raw[0]!.pttl(resource)).toBeGreaterThan(0);
    await lease.release();
  });
});

describe("folding in the 'redlock' layout", () => {
  it("folds an idle register into the floor, never one whose lease is live (found by the lease's record)", async () => {
    const prefix = 'fenced-layout-fold';
    const folding = fx.another({
      keyPrefix: prefix,
      keyLayout: 'redlock',
      maxTtlMs: 2_000,
      tokenRetentionMs: 2_000,
    });
    await folding.ready();
    const live = `{redlock}${unique('live')}`;
    const idle = `{redlock}${unique('idle')}`;
    const held = await folding.acquire(live, { ttlMs: 2_000, autoExtend: true });
    const released = await folding.acquire(idle, { ttlMs: 2_000 });
    await released.release();
    await eventually(
      async () => {
        const left = await Promise.all(fx.raw.map((n) => n.exists(keysOf(idle, prefix, 'redlock').token)));
        return left.every((n) => n === 0);
      },
      { what: 'the idle register to be folded', intervalMs: 200 },
    );
    for (const node of fx.raw) {
      // Untouched for longer than the retention too, but its lease is live: kept.
      expect(await node.get(keysOf(live, prefix, 'redlock').token)).toBe(held.token.toString());
      expect(BigInt((await node.get(nodeKeysOf(prefix).floor))!) >= released.token).toBe(true);
    }
    await held.release();
    const again = await folding.acquire(idle, { ttlMs: 1_000 });
    expect(again.token > released.token).toBe(true);
    await again.release();
  }, 60_000);
});

describe('the key layout is a setting of the cluster', () => {
  afterEach(async () => {
    await fx.closeOthers();
    coordinator = fx.another({ keyPrefix: PREFIX, keyLayout: 'redlock' });
    await coordinator.ready();
  });

  it('is recorded on the nodes, and a process configured with the other layout refuses to start on them', async () => {
    for (const node of fx.raw) expect(await node.hget(settingsKey(PREFIX), 'keyLayout')).toBe('redlock');
    const other = fx.another({ keyPrefix: PREFIX, keyLayout: 'fenced' });
    const error: unknown = await other.ready().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ClusterSettingsError);
    expect((error as ClusterSettingsError).setting).toBe('keyLayout');
    expect((error as Error).message).toContain(
      "this process is configured with keyLayout 'fenced', but the cluster's keyLayout recorded on the nodes is 'redlock'",
    );
  });

  it('is adopted by a process that did not set a layout (defaults agree)', async () => {
    const onDefaults = fx.another({ keyPrefix: PREFIX });
    await onDefaults.ready();
    expect(onDefaults.settings.keyLayout).toBe('redlock');
  });

  it("runs with the recorded layout under clusterSettings 'adopt'", async () => {
    const adopting = fx.another({ keyPrefix: PREFIX, clusterSettings: 'adopt' });
    await adopting.ready();
    expect(adopting.settings.keyLayout).toBe('redlock');
  });

  it("reads a node initialized before layouts were recorded as the 'fenced' layout", async () => {
    const prefix = 'fenced-layout-upgrade';
    const old = fx.another({ keyPrefix: prefix });
    await old.ready();
    for (const node of fx.raw) await node.hdel(settingsKey(prefix), 'keyLayout');
    const redlockLayout = fx.another({ keyPrefix: prefix, keyLayout: 'redlock' });
    await expect(redlockLayout.ready()).rejects.toBeInstanceOf(ClusterSettingsError);
    for (const node of fx.raw) expect(await node.hget(settingsKey(prefix), 'keyLayout')).toBe('fenced');
  });
});
