// The lease record's token on real Redis nodes (packages/coordinator/lua/acquire.lua, "The record's token"): a
// duplicated acquire message of a lease (a network duplicate, or a copy delivered late) must not set a record that
// promise.lua fixed to the grant's token back to the refused first guess — which here is another grant's token —
// because extend.lua and inspect.lua report the record's token, and so do the HTTP extend by lease id and `inspect()`
// (the highest token of the majority that answered, protocol/extend.ts).
//
// Kills mutation row 31, `acquire-lowers-the-record-token` (test/mutants/mutants.json): acquire.lua writing its
// proposal into the record whatever token this lease's record already holds.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { interpretReply } from '../../../packages/coordinator/src/scripts/script-results.js';
import { loadScripts, runScript } from '../../../packages/coordinator/src/scripts/scripts.js';
import { nodeStateKeys, resourceKeys } from '../../../packages/coordinator/src/keys/key-layout.js';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';

const NODES = 3;
const TTL_MS = 60_000;

let env: RedisNodes;
let nodes: Redis[];

beforeAll(async () => {
  env = await startRedisNodes(NODES);
  nodes = env.urls.map((url) => new Redis(url));
  await Promise.all(nodes.map((redis) => loadScripts(redis)));
});

afterAll(async () => {
  for (const redis of nodes ?? []) redis.disconnect();
  await env?.stop();
});

/** A fresh prefix, initialized on every node, with one resource. */
async function freshResource() {
  const prefix = `record-${randomUUID().slice(0, 8)}`;
  const node = nodeStateKeys(prefix);
  await Promise.all(nodes.map((redis) => redis.set(node.incarnation, 'incarnation-1')));
  return { node, keys: resourceKeys(prefix, 'acct') };
}

type Resource = Awaited<ReturnType<typeof freshResource>>;

async function acquire(r: Resource, at: Redis, leaseId: string, proposal: bigint) {
  const [reply] = (await runScript(
    at,
    'acquire',
    [
      r.node.incarnation,
      r.node.floor,
      r.node.seal,
      r.node.settings,
      r.keys.lease,
      r.keys.record,
      r.keys.token,
    ],
    [leaseId, TTL_MS, proposal.toString(), '', NODES],
  )) as unknown[];
  return interpretReply('acquire', reply);
}

async function promise(r: Resource, at: Redis, leaseId: string, proposal: bigint) {
  return interpretReply(
    'promise',
    await runScript(
      at,
      'promise',
      [r.node.incarnation, r.node.floor, r.node.seal, r.node.settings, r.keys.record, r.keys.token],
      [leaseId, proposal.toString(), '', 'fenced', NODES],
    ),
  );
}

async function release(r: Resource, at: Redis, leaseId: string) {
  await runScript(at, 'release', [r.keys.lease, r.keys.record], [leaseId, r.keys.channel]);
}

async function extend(r: Resource, at: Redis, leaseId: string) {
  return interpretReply(
    'extend',
    await runScript(
      at,
      'extend',
      [r.node.incarnation, r.node.settings, r.keys.lease, r.keys.record],
      [leaseId, TTL_MS, NODES],
    ),
  );
}

async function inspect(r: Resource, at: Redis) {
  return interpretReply(
    'inspect',
    await runScript(at, 'inspect', [r.node.incarnation, r.keys.lease, r.keys.record], []),
  );
}

describe('a duplicated acquire on real nodes', () => {
  it('never sets a record that a promise fixed back to the refused guess, so an extend and inspect of a majority report the grant’s token', async () => {
    const r = await freshResource();
    const [a, b, c] = nodes as [Redis, Redis, Redis];
    // An earlier grant of token 5 (promised on every node), released: every register holds 5.
    for (const at of nodes)
      expect(await acquire(r, at, 'k', 5n)).toEqual({ kind: 'granted', promised: true });
    for (const at of nodes) await release(r, at, 'k');

    // Lease l guesses 5 again (a stale guess): every node grants the lease and refuses the token.
    for (const at of nodes)
      expect(await acquire(r, at, 'l', 5n)).toMatchObject({ kind: 'granted', promised: false });
    // Its second round promises 6 on a and b, a majority: l is granted token 6. c keeps the refused guess.
    expect(await promise(r, a, 'l', 6n)).toMatchObject({ kind: 'promised' });
    expect(await promise(r, b, 'l', 6n)).toMatchObject({ kind: 'promised' });

    // The first acquire message to a arrives once more (a network duplicate, or a retry of the same lease id).
    expect(await acquire(r, a, 'l', 5n)).toMatchObject({ kind: 'granted', promised: false });
    expect(await a.get(r.keys.record)).toBe('l|6');

    // An extend and an inspect answered by the majority {a, c}: the highest token they report is l's own.
    const extended = [await extend(r, a, 'l'), await extend(r, c, 'l')];
    expect(extended).toEqual([
      { kind: 'extended', token: 6n },
      { kind: 'extended', token: 5n },
    ]);
    const viewed = [await inspect(r, a), await inspect(r, c)];
    expect(viewed).toEqual([
      { kind: 'view', held: true, token: 6n },
      { kind: 'view', held: true, token: 5n },
    ]);
    // The register is untouched by the duplicate: 6 stays promised once, on a and b.
    expect(await a.get(r.keys.token)).toBe('6');
    expect(await b.get(r.keys.record)).toBe('l|6');
  });

  it('still writes the proposal into a record of another lease’s former key, and a promised proposal over its own', async () => {
    const r = await freshResource();
    const [a] = nodes as [Redis, Redis, Redis];
    expect(await acquire(r, a, 'l', 3n)).toEqual({ kind: 'granted', promised: true });
    expect(await a.get(r.keys.record)).toBe('l|3');
    // A later proposal of the same lease that this node promises raises the record with it.
    expect(await acquire(r, a, 'l', 4n)).toEqual({ kind: 'granted', promised: true });
    expect(await a.get(r.keys.record)).toBe('l|4');
    await release(r, a, 'l');
    // Another lease on the free key writes its own (refused) proposal: nothing of l's record is kept.
    expect(await acquire(r, a, 'm', 2n)).toMatchObject({ kind: 'granted', promised: false });
    expect(await a.get(r.keys.record)).toBe('m|2');
  });
});
