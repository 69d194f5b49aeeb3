// The seal and the recorded settings, on a real Redis node, script by script (DESIGN §3; the argument is in
// packages/coordinator/src/nodes/repair.ts): the first batch of a repair read changes the source's seal epoch in the
// same call; acquire.lua and promise.lua refuse — recording nothing — a call that carries another epoch, and tell
// the current one; acquire.lua and extend.lua refuse a ttl above the cluster's recorded maxTtlMs.
//
// Kills the seal rows of test/mutants/ (docs/mutation-testing.md): the seal skipped in repair-read.lua, the epoch
// not checked by acquire.lua, the epoch not checked by promise.lua.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { interpretReply } from '../../../packages/coordinator/src/scripts/script-results.js';
import { loadScripts, runScript } from '../../../packages/coordinator/src/scripts/scripts.js';
import {
  nodeStateKeys,
  resourceKeyPattern,
  resourceKeys,
} from '../../../packages/coordinator/src/redlock/keys.js';
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
) {
  const { node, keys } = ctx;
  const [reply] = (await runScript(
    redis,
    'acquire',
    [node.incarnation, node.floor, node.seal, node.settings, keys.lease, keys.record, keys.token],
    [leaseId, ttlMs, proposal.toString(), epoch],
  )) as unknown[];
  return interpretReply('acquire', reply);
}

async function promise(
  ctx: Awaited<ReturnType<typeof initializedNode>>,
  leaseId: string,
  proposal: bigint,
  epoch: string,
) {
  const { node, keys } = ctx;
  return interpretReply(
    'promise',
    await runScript(
      redis,
      'promise',
      [node.incarnation, node.floor, node.seal, keys.record, keys.token],
      [leaseId, proposal.toString(), epoch],
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
        ['lease-d', ttlMs],
      ).then((r) => interpretReply('extend', r));
    expect(await extend(60_000)).toEqual({ kind: 'ttl-above-max', maxTtlMs: 3000 });
    expect(await redis.pttl(ctx.keys.lease)).toBeLessThanOrEqual(3_000);
    expect(await extend(2_000)).toEqual({ kind: 'extended', token: 40n });
  });
});
