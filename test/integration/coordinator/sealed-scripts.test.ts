// The seal and the recorded settings, on a real Redis node, script by script (DESIGN §3; the argument is in
// packages/coordinator/src/nodes/repair.ts): the first batch of a repair read changes the source's seal epoch in the
// same call; acquire.lua and promise.lua refuse — recording nothing — a call that carries another epoch, and tell
// the current one; acquire.lua and extend.lua refuse a ttl above the cluster's recorded maxTtlMs.
//
// Also, script by script: a node never answers below its floor (a register left below it by a repair attempt that
// stopped, F27), and the nodes check the caller's node count and key layout on every call that records a promise or
// a lease (F28).
//
// Kills the seal rows of test/mutants/ (docs/mutation-testing.md): the seal skipped in repair-read.lua, the epoch
// not checked by acquire.lua, the epoch not checked by promise.lua; and the rows of the floor rule and of the
// settings checked on every call.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { interpretReply } from '../../../packages/coordinator/src/scripts/script-results.js';
import { loadScripts, runScript } from '../../../packages/coordinator/src/scripts/scripts.js';
import {
  nodeStateKeys,
  resourceKeyPattern,
  resourceKeys,
  tokenKeyPattern,
} from '../../../packages/coordinator/src/keys/key-layout.js';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';

let env: RedisNodes;
let redis: Redis;

beforeAll(async () => {
  env = await startRedisNodes(1);
  redis = new Redis(env.urls[0]!);
  await loadScripts(redis);
});

afterAll(async () => {
  redis?.disconnect();
  await env?.stop();
});

/** A fresh prefix whose node is initialized (holds its incarnation key), with one resource. */
async function initializedNode() {
  const prefix = `sealed-${randomUUID().slice(0, 8)}`;
  const node = nodeStateKeys(prefix);
  const keys = resourceKeys(prefix, 'acct');
  await redis.set(node.incarnation, 'incarnation-1');
  return { prefix, node, keys };
}

async function acquire(
  ctx: Awaited<ReturnType<typeof initializedNode>>,
  leaseId: string,
  ttlMs: number,
  proposal: bigint,
  epoch: string,
  nodeCount = 1,
  keys = ctx.keys,
) {
  const { node } = ctx;
  const [reply] = (await runScript(
    redis,
    'acquire',
    [node.incarnation, node.floor, node.seal, node.settings, keys.lease, keys.record, keys.token],
    [leaseId, ttlMs, proposal.toString(), epoch, nodeCount],
  )) as unknown[];
  return interpretReply('acquire', reply);
}

async function promise(
  ctx: Awaited<ReturnType<typeof initializedNode>>,
  leaseId: string,
  proposal: bigint,
  epoch: string,
  nodeCount = 1,
  layout: 'fenced' | 'redlock' = 'fenced',
) {
  const { node, keys } = ctx;
  return interpretReply(
    'promise',
    await runScript(
      redis,
      'promise',
      [node.incarnation, node.floor, node.seal, node.settings, keys.record, keys.token],
      [leaseId, proposal.toString(), epoch, layout, nodeCount],
    ),
  );
}

async function repairRead(ctx: Awaited<ReturnType<typeof initializedNode>>, seal: string) {
  const { node, prefix } = ctx;
  return interpretReply(
    'repair-read',
    await runScript(
      redis,
      'repair-read',
      [node.incarnation, node.repair, node.floor, node.seal, node.settings],
      ['0', 1000, resourceKeyPattern(prefix), '', seal],
    ),
  );
}

describe('the seal on a real node', () => {
  it('a repair read seals the source in the same call, and returns its registers and live leases', async () => {
    const ctx = await initializedNode();
    expect(await acquire(ctx, 'lease-a', 30_000, 10n, '')).toEqual({ kind: 'granted', promised: true });
    expect(await redis.get(ctx.node.seal)).toBeNull();

    const read = await repairRead(ctx, 'epoch-1');

    expect(await redis.get(ctx.node.seal)).toBe('epoch-1');
    if (read.kind !== 'read') throw new Error(`expected a read, got ${read.kind}`);
    expect(read.registers).toEqual([[ctx.keys.token, 10n]]);
    expect(read.leases.map(([key, value]) => [key, value])).toEqual([[ctx.keys.lease, 'lease-a|10']]);
    expect(read.leases[0]![2]).toBeGreaterThan(0);
    // A later batch (no seal argument) leaves the epoch alone.
    await repairRead(ctx, '');
    expect(await redis.get(ctx.node.seal)).toBe('epoch-1');
  });

  it('acquire.lua refuses a call with an old epoch, records nothing, and tells the current one', async () => {
    const ctx = await initializedNode();
    await repairRead(ctx, 'epoch-1');

    expect(await acquire(ctx, 'lease-b', 30_000, 20n, '')).toEqual({ kind: 'sealed', epoch: 'epoch-1' });
    expect(await redis.exists(ctx.keys.lease, ctx.keys.token)).toBe(0);
    // The next round carries the epoch it learned, and is granted.
    expect(await acquire(ctx, 'lease-b', 30_000, 20n, 'epoch-1')).toEqual({
      kind: 'granted',
      promised: true,
    });
  });

  it('promise.lua refuses a call with an old epoch, records nothing, and tells the current one', async () => {
    const ctx = await initializedNode();
    await redis.set(ctx.keys.token, '5');
    await repairRead(ctx, 'epoch-1');

    expect(await promise(ctx, 'lease-c', 30n, '')).toEqual({ kind: 'sealed', epoch: 'epoch-1' });
    expect(await redis.get(ctx.keys.token)).toBe('5');
    expect(await promise(ctx, 'lease-c', 30n, 'epoch-1')).toEqual({ kind: 'promised', cur: 30n });
  });

  it('acquire.lua and extend.lua refuse a ttl above the recorded maxTtlMs', async () => {
    const ctx = await initializedNode();
    await redis.hset(ctx.node.settings, 'maxTtlMs', '3000');
    expect(await acquire(ctx, 'lease-d', 3_001, 40n, '')).toEqual({ kind: 'ttl-above-max', maxTtlMs: 3000 });
    expect(await redis.exists(ctx.keys.lease)).toBe(0);
    expect(await acquire(ctx, 'lease-d', 3_000, 40n, '')).toEqual({ kind: 'granted', promised: true });
    const extend = (ttlMs: number) =>
      runScript(
        redis,
        'extend',
        [ctx.node.incarnation, ctx.node.settings, ctx.keys.lease, ctx.keys.record],
        ['lease-d', ttlMs, 1],
      ).then((r) => interpretReply('extend', r));
    expect(await extend(60_000)).toEqual({ kind: 'ttl-above-max', maxTtlMs: 3000 });
    expect(await redis.pttl(ctx.keys.lease)).toBeLessThanOrEqual(3_000);
    expect(await extend(2_000)).toEqual({ kind: 'extended', token: 40n });
  });
});

describe('a node never answers below its floor', () => {
  it('reads a register left below the floor as the floor, in acquire.lua and promise.lua, and repair reads skip it', async () => {
    const ctx = await initializedNode();
    // What a repair attempt that stopped after part of its copy can leave: a register below the floor raised later.
    await redis.set(ctx.keys.token, '5');
    await redis.set(ctx.node.floor, '9');
    expect(await acquire(ctx, 'lease-f', 30_000, 7n, '')).toEqual({
      kind: 'granted',
      promised: false,
      cur: 9n,
    });
    expect(await promise(ctx, 'lease-f', 9n, '')).toEqual({ kind: 'refused', cur: 9n });
    expect(await promise(ctx, 'lease-f', 10n, '')).toEqual({ kind: 'promised', cur: 10n });
    await redis.set(ctx.keys.token, '5');
    const read = await repairRead(ctx, 'epoch-f');
    if (read.kind !== 'read') throw new Error(`expected a read, got ${read.kind}`);
    expect(read.floor).toBe(9n);
    expect(read.registers).toEqual([]);
  });
});

describe('the settings, checked by the node on every call that records a promise or a lease', () => {
  it('refuses an acquire, a promise and an extend whose node count or key layout is not the recorded one', async () => {
    const ctx = await initializedNode();
    await redis.hset(ctx.node.settings, 'nodeCount', '3', 'keyLayout', 'fenced');
    expect(await acquire(ctx, 'lease-s', 30_000, 40n, '', 5)).toEqual({
      kind: 'settings-mismatch',
      field: 'nodeCount',
      recorded: '3',
    });
    const redlockKeys = resourceKeys(ctx.prefix, 'acct', 'redlock');
    expect(await acquire(ctx, 'lease-s', 30_000, 40n, '', 3, redlockKeys)).toEqual({
      kind: 'settings-mismatch',
      field: 'keyLayout',
      recorded: 'fenced',
    });
    expect(await redis.exists(ctx.keys.lease, redlockKeys.lease, redlockKeys.token, ctx.keys.token)).toBe(0);
    expect(await promise(ctx, 'lease-s', 40n, '', 3, 'redlock')).toEqual({
      kind: 'settings-mismatch',
      field: 'keyLayout',
      recorded: 'fenced',
    });
    expect(await redis.exists(ctx.keys.token)).toBe(0);
    expect(await acquire(ctx, 'lease-s', 30_000, 40n, '', 3)).toEqual({ kind: 'granted', promised: true });
    const extend = (nodeCount: number) =>
      runScript(
        redis,
        'extend',
        [ctx.node.incarnation, ctx.node.settings, ctx.keys.lease, ctx.keys.record],
        ['lease-s', 10_000, nodeCount],
      ).then((r) => interpretReply('extend', r));
    expect(await extend(4)).toEqual({ kind: 'settings-mismatch', field: 'nodeCount', recorded: '3' });
    expect(await extend(3)).toEqual({ kind: 'extended', token: 40n });
  });

  it("classifies node-redlock's key beside a 'fenced' record as the 'fenced' layout, and grants only when both are free", async () => {
    const ctx = await initializedNode();
    // holdRedlockKey: the lease key is the resource name, the record and register are the 'fenced' layout's.
    const held = resourceKeys(ctx.prefix, `${ctx.prefix}-acct`, 'fenced', true);
    const plain = resourceKeys(ctx.prefix, `${ctx.prefix}-acct`, 'fenced');
    expect(held.record).toBe(plain.record);
    expect(held.token).toBe(plain.token);
    expect(held.lease).toBe(`${ctx.prefix}-acct`);
    await redis.hset(ctx.node.settings, 'nodeCount', '3', 'keyLayout', 'redlock');
    expect(await acquire(ctx, 'lease-h', 30_000, 40n, '', 3, held)).toEqual({
      kind: 'settings-mismatch',
      field: 'keyLayout',
      recorded: 'redlock',
    });
    expect(await redis.exists(held.lease, held.record, held.token)).toBe(0);

    await redis.hset(ctx.node.settings, 'keyLayout', 'fenced');
    // A Coordinator's lease holds the record only: the name's holder is refused, and nothing of it is written.
    expect(await acquire(ctx, 'lease-c', 30_000, 40n, '', 3, plain)).toEqual({
      kind: 'granted',
      promised: true,
    });
    const refused = await acquire(ctx, 'lease-h', 30_000, 41n, '', 3, held);
    expect(refused.kind).toBe('held');
    expect(await redis.exists(held.lease)).toBe(0);
    expect(await redis.get(held.record)).toBe('lease-c|40');
    await runScript(redis, 'release', [plain.lease, plain.record], ['lease-c', plain.channel]);

    // node-redlock's own lock (the name holding its value) refuses it too.
    await redis.set(held.lease, 'node-redlock-value', 'PX', 30_000);
    expect((await acquire(ctx, 'lease-h', 30_000, 41n, '', 3, held)).kind).toBe('held');
    expect(await redis.exists(held.record)).toBe(0);
    await redis.del(held.lease);

    // Both free: granted, with the name holding exactly the lease id and the record the token, in one register.
    expect(await acquire(ctx, 'lease-h', 30_000, 41n, '', 3, held)).toEqual({
      kind: 'granted',
      promised: true,
    });
    expect(await redis.get(held.lease)).toBe('lease-h');
    expect(await redis.get(held.record)).toBe('lease-h|41');
    expect(await redis.get(held.token)).toBe('41');
    // A repair restores the record alone: an extend by its holder takes the name again.
    await redis.del(held.lease);
    expect(
      interpretReply(
        'extend',
        await runScript(
          redis,
          'extend',
          [ctx.node.incarnation, ctx.node.settings, held.lease, held.record],
          ['lease-h', 20_000, 3],
        ),
      ),
    ).toEqual({ kind: 'extended', token: 41n });
    expect(await redis.get(held.lease)).toBe('lease-h');
    // A Coordinator is refused by the record, and a release by the name's holder deletes both.
    expect((await acquire(ctx, 'lease-c', 30_000, 42n, '', 3, plain)).kind).toBe('held');
    // release.lua's batch reply: one {1} (RELEASED) per item.
    expect(await runScript(redis, 'release', [held.lease, held.record], ['lease-h', held.channel])).toEqual([
      [1],
    ]);
    expect(await redis.exists(held.lease, held.record)).toBe(0);
  });
});

describe('a fold that fails or meets a missing register loses nothing', () => {
  it('fold-slot.lua skips a register that is gone and raises the floor before it deletes', async () => {
    const ctx = await initializedNode();
    const gone = resourceKeys(ctx.prefix, 'gone').token;
    await redis.set(ctx.keys.token, '100');
    const reply = interpretReply(
      'fold-slot',
      await runScript(redis, 'fold-slot', [ctx.node.incarnation, ctx.node.floor, ctx.keys.token, gone], [0]),
    );
    expect(reply).toEqual({ kind: 'folded', cursor: '0', folded: 1 });
    expect(await redis.get(ctx.node.floor)).toBe('100');
    expect(await redis.exists(ctx.keys.token)).toBe(0);
  });

  it('fold.lua that fails on a key of another type has deleted nothing', async () => {
    const ctx = await initializedNode();
    await redis.set(ctx.keys.token, '100');
    await redis.hset(resourceKeys(ctx.prefix, 'odd').token, 'x', '1');
    await expect(
      runScript(
        redis,
        'fold',
        [ctx.node.incarnation, ctx.node.floor, ctx.node.fold],
        ['0', 1000, tokenKeyPattern(ctx.prefix), 0, 60_000],
      ),
    ).rejects.toThrow(/WRONGTYPE/);
    expect(await redis.get(ctx.keys.token)).toBe('100');
  });
});
