import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { RedisClusterMember } from '@fenced/test-utils/redis-cluster-member';
import { RedisNode } from '@fenced/test-utils/redis-node';
import { RespConnection, RespError, type RespValue } from '@fenced/test-utils/resp-connection';
import {
  nodeStateKeys,
  resourceKeys,
  type KeyLayout,
} from '../../../../packages/coordinator/src/keys/key-layout.js';
import { keySlot } from '../../../../packages/coordinator/src/keys/slots.js';
import { loadScriptSource } from '../../../../packages/coordinator/src/scripts/scripts.js';
import type { KeyDump } from '../../../fixtures/lua-redis/keyspace.js';
import { initialState, PREFIX, token, useShardId } from '../../../fixtures/lua-redis/script-calls.js';
import { SCRIPT_LAYOUTS } from '../../../fixtures/lua-redis/script-layouts.js';
import { serverKeys } from '../../../fixtures/lua-redis/server-keys.js';

// acquire.lua and release.lua against the scripts they replaced (issue 37, item 2: the lean scripts), on a real
// redis-server 7.0: the same generated keyspace, the same KEYS and ARGV, run through each script in turn from a
// fresh load, must give the same reply and leave the same keys, values and ttls. The reference scripts are the exact
// text the coordinator's loader assembled at 44e2b59 (includes inlined): test/fixtures/lua-reference/.
//
// The cases reach what the lean shape changed: one SET NX instead of GET + SET NX for a 'fenced' record, one read of a
// record beside its lease key, the floor read once per batch, a ttl compared once per batch; so batches of up to six
// calls, often on the same resource (both layouts, node-redlock's key beside a 'fenced' record), keys of the wrong type
// (WRONGTYPE), ttls a SET refuses, non-token proposals (a Lua error inside a call), 19-digit tokens, held, own and
// foreign leases, expired leases, settings and seal mismatches, NOT_INITIALIZED, a ttl above maxTtlMs, a corrupt
// register or floor, a node out of memory (`maxmemory` below its use: every first write of a call is refused), and,
// on a Cluster member, stamped slots whose promises go to the floor.
//
// What may differ, and how it is compared: a Lua run-time error names the script line it happened on
// (`user_script:<line>:`), and an error that ends a whole script names the script's sha and line; those are replaced
// by placeholders before comparing (the text of the error is compared). A real server's clock runs, so a remaining
// ttl may be lower in the second run by at most the time both runs took.

const REFERENCE = {
  acquire: readFileSync(new URL('../../../fixtures/lua-reference/acquire.lua', import.meta.url), 'utf8'),
  release: readFileSync(new URL('../../../fixtures/lua-reference/release.lua', import.meta.url), 'utf8'),
};
type Name = keyof typeof REFERENCE;

const RUNS = Number(process.env.FENCED_LEAN_RUNS ?? 400);

let redis: RedisNode;
let member: RedisClusterMember;
let standalone: RespConnection;
let clusterMaster: RespConnection;
let shardId = '';
/** How often each normalization was needed, and each reply code seen: what the generators reach. */
const tally = new Map<string, number>();
const count = (key: string): void => void tally.set(key, (tally.get(key) ?? 0) + 1);

beforeAll(async () => {
  redis = await RedisNode.start({ persistence: 'none' });
  standalone = await RespConnection.connect(redis.port);
  member = await RedisClusterMember.start({ masters: 1, persistence: 'none' });
  clusterMaster = await RespConnection.connect(member.masters[0]!.port);
  // A stamped incarnation of the generated state names this shard as the Cluster master does.
  shardId = (await clusterMaster.send('CLUSTER', 'MYID')) as string;
  useShardId(shardId);
});

afterAll(async () => {
  if (process.env.FENCED_LEAN_TALLY === '1') {
    console.log(
      [...tally]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, n]) => `${String(n).padStart(6)}  ${k}`)
        .join('\n'),
    );
  }
  standalone?.close();
  clusterMaster?.close();
  await redis?.stop();
  await member?.stop();
});

// --- generators ---

const LEASE_IDS = ['L1', 'L2', 'L3'] as const;
const RESOURCES = ['r1', 'r2', 'r3'] as const;
const LAYOUTS: readonly KeyLayout[] = ['fenced', 'redlock'];

/** Valid ttls are long (a key must outlive both runs); the others are refused by SET, or by a Lua comparison. */
const ttl = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom('600000', '600000', '5000000', '7000000') },
  { weight: 1, arbitrary: fc.integer({ min: 30_000, max: 10_000_000 }).map(String) },
  {
    weight: 2,
    arbitrary: fc.constantFrom('0', '-1', 'abc', '1.5', '', '9223372036854775807', '99999999999999999999'),
  },
);
/** Proposals: tokens (19 digits included), sometimes a value that is not one (a caller bug). */
const proposal = fc.oneof(
  { weight: 8, arbitrary: token },
  {
    weight: 1,
    arbitrary: fc.constantFrom('0', '01', '-5', 'a', 'ab', 'abc', 'abcdefghijklmnopqrs', '', '1.5', ' 7'),
  },
);
const epoch = fc.constantFrom('', '', '', '', '', '', '', '', 'E1', 'E2');
const nodeCount = fc.constantFrom('3', '3', '3', '3', '5');
const leaseResource = fc.tuple(fc.constantFrom(...RESOURCES), fc.constantFrom(...LAYOUTS), fc.boolean());
type LeaseResource = [string, KeyLayout, boolean];

/**
 * Node state that lets most calls get past the node's checks (the generated state alone mostly answers
 * NOT_INITIALIZED): an incarnation (stamped by this shard on a Cluster slot, with its witnesses), a floor, a seal and
 * settings; undefined leaves the generated state as it is.
 */
interface Healthy {
  readonly floor: string | undefined;
  readonly seal: string | undefined;
  readonly settings: readonly (readonly [string, string])[];
}
const healthy: fc.Arbitrary<Healthy | undefined> = fc.option(
  fc.record({
    floor: fc.option(
      fc.oneof(
        { weight: 6, arbitrary: token },
        { weight: 2, arbitrary: fc.constant('0') },
        { weight: 1, arbitrary: fc.constant('x') },
      ),
      { nil: undefined },
    ),
    seal: fc.constantFrom(undefined, '', '', 'E1'),
    settings: fc
      .tuple(
        fc.constantFrom(undefined, '5000000', '5000000', '60000'),
        fc.constantFrom(undefined, undefined, '3'),
        fc.constantFrom(undefined, undefined, undefined, undefined, 'fenced', 'redlock'),
      )
      .map(([max, nodes, layout]) => {
        const fields: [string, string][] = [];
        if (max !== undefined) fields.push(['maxTtlMs', max]);
        if (nodes !== undefined) fields.push(['nodeCount', nodes]);
        if (layout !== undefined) fields.push(['keyLayout', layout]);
        return fields;
      }),
  }),
  { nil: undefined, freq: 4 },
);

interface Case {
  readonly state: ReturnType<typeof nodeStateKeys>;
  readonly healthy: Healthy | undefined;
  readonly keys: readonly string[];
  readonly args: readonly string[];
  /** Keys (of the state) that expire 1 ms after they are loaded, before the script runs. */
  readonly expiring: readonly string[];
  /** `maxmemory` set below the node's use while the script runs. */
  readonly oom: boolean;
  /** Keys (of the first call) loaded as a hash whatever the state says: WRONGTYPE where the scripts read them. */
  readonly wrongType: readonly string[];
}

const acquireItem = (resource: fc.Arbitrary<LeaseResource>) =>
  fc.record({ resource, leaseId: fc.constantFrom(...LEASE_IDS), ttl, proposal, epoch });

function acquireCase(
  items: fc.Arbitrary<{ resource: LeaseResource }[]>,
  stateOf: (items: { resource: LeaseResource }[]) => ReturnType<typeof nodeStateKeys>,
) {
  return fc
    .tuple(
      items,
      nodeCount,
      fc.constantFrom(0, 0, 0, 0, 0, 0, 0, 0, 1, -1),
      fc.boolean(),
      fc.constantFrom(false, false, false, false, false, false, false, true),
      healthy,
      fc.option(fc.subarray(['lease', 'record', 'token'] as const, { minLength: 1 }), { nil: [], freq: 3 }),
    )
    .map(([drawn, nodes, miscount, expire, oom, health, wrong]) => {
      const list = drawn as unknown as {
        resource: LeaseResource;
        leaseId: string;
        ttl: string;
        proposal: string;
        epoch: string;
      }[];
      const state = stateOf(drawn);
      const layout = SCRIPT_LAYOUTS.acquire(
        state,
        list.map((item) => ({ ...item, keys: resourceKeys(PREFIX, ...item.resource) })),
        nodes,
      );
      const args =
        miscount === 1 ? [...layout.args, 'extra'] : miscount === -1 ? layout.args.slice(0, -1) : layout.args;
      const first = resourceKeys(PREFIX, ...list[0]!.resource);
      return {
        state,
        healthy: health,
        keys: layout.keys,
        args,
        expiring: expire ? [first.lease, first.record] : [],
        oom,
        wrongType: wrong.map((role) => first[role]),
      } satisfies Case;
    });
}

/** Standalone: up to six calls on three resources (so often two on one), the node's own state keys. */
const standaloneAcquire = acquireCase(
  fc.array(acquireItem(leaseResource as fc.Arbitrary<LeaseResource>), { minLength: 1, maxLength: 6 }),
  () => nodeStateKeys(PREFIX),
);

/** A Cluster slot: every call on one resource, whose slot's state keys the call names (a stamped slot's floor). */
const slotAcquire = fc
  .constantFrom(...RESOURCES)
  .chain((name) =>
    acquireCase(
      fc.array(
        acquireItem(
          fc.tuple(
            fc.constant(name),
            fc.constantFrom(...LAYOUTS),
            fc.boolean(),
          ) as fc.Arbitrary<LeaseResource>,
        ),
        { minLength: 1, maxLength: 6 },
      ),
      () => nodeStateKeys(PREFIX, keySlot(name)),
    ),
  );

const releaseCase = fc
  .tuple(
    fc.array(fc.record({ resource: leaseResource, leaseId: fc.constantFrom(...LEASE_IDS) }), {
      minLength: 1,
      maxLength: 6,
    }),
    fc.constantFrom(0, 0, 0, 0, 0, 1),
    fc.boolean(),
    fc.constantFrom(false, false, false, false, false, true),
    fc.option(fc.subarray(['lease', 'record'] as const, { minLength: 1 }), { nil: [], freq: 3 }),
  )
  .map(([items, miscount, expire, oom, wrong]) => {
    const layout = SCRIPT_LAYOUTS.release(
      items.map((item) => ({
        keys: resourceKeys(PREFIX, ...(item.resource as LeaseResource)),
        leaseId: item.leaseId,
      })),
    );
    const first = resourceKeys(PREFIX, ...(items[0]!.resource as LeaseResource));
    return {
      state: nodeStateKeys(PREFIX),
      healthy: undefined,
      keys: layout.keys,
      args: miscount === 1 ? [...layout.args, 'extra'] : layout.args,
      expiring: expire ? [first.lease, first.record] : [],
      oom,
      wrongType: wrong.map((role) => first[role]),
    } satisfies Case;
  });

// --- running and comparing ---

type Compared = string | number | null | { error: string } | Compared[];

function fromServer(value: RespValue): Compared {
  if (value instanceof RespError) return { error: value.message };
  if (Array.isArray(value)) return value.map(fromServer);
  return value;
}

/** Script lines and shas out of error texts (see the top of the file). */
function normalized(reply: Compared): Compared {
  if (Array.isArray(reply)) {
    if (reply[0] === 7 && typeof reply[1] === 'string') {
      const text = reply[1].replace(/user_script:\d+:/g, 'user_script:<line>:');
      if (text !== reply[1]) count('normalized: a Lua error inside a call (its line)');
      return [7, text];
    }
    return reply.map(normalized);
  }
  if (reply !== null && typeof reply === 'object') {
    count('normalized: an error of the whole script (its sha and line)');
    return {
      error: reply.error
        .replace(/script: [0-9a-f]{40}/, 'script: <sha>')
        .replace(/@user_script:\d+/, '@user_script:<line>')
        .replace(/user_script:\d+:/g, 'user_script:<line>:'),
    };
  }
  return reply;
}

interface Dumped {
  readonly key: string;
  readonly value: Compared;
  readonly ttl: number;
}

async function dump(conn: RespConnection): Promise<Dumped[]> {
  return (await serverKeys(conn)).map(({ key, value, pttl }) => ({
    key,
    value: fromServer(value),
    ttl: pttl,
  }));
}

/** The generated state with the case's healthy node state over it. */
function withHealthy(generated: readonly KeyDump[], c: Case): KeyDump[] {
  const h = c.healthy;
  if (h === undefined) {
    return [
      ...generated.filter((key) => !c.wrongType.includes(key.key)),
      ...c.wrongType.map((key): KeyDump => ({
        key,
        value: { type: 'hash', value: new Map([['f', 'v']]) },
        pttlMs: undefined,
      })),
    ];
  }
  const k = c.state;
  const replaced = new Set([k.incarnation, k.floor, k.seal, k.settings]);
  const string = (key: string, value: string): KeyDump => ({
    key,
    value: { type: 'string', value },
    pttlMs: undefined,
  });
  const stamped = k.incarnation !== nodeStateKeys(PREFIX).incarnation;
  const state = generated.filter((key) => !replaced.has(key.key) && !c.wrongType.includes(key.key));
  for (const key of c.wrongType)
    state.push({ key, value: { type: 'hash', value: new Map([['f', 'v']]) }, pttlMs: undefined });
  state.push(string(k.incarnation, stamped ? `I1@${shardId}` : 'I1'));
  // A stamped slot votes only with all three witnesses; a standalone node reads absent ones as '0', '' and none.
  const floor = h.floor ?? (stamped ? '0' : undefined);
  if (floor !== undefined) state.push(string(k.floor, floor));
  const seal = h.seal ?? (stamped ? '' : undefined);
  if (seal !== undefined) state.push(string(k.seal, seal));
  const settings = h.settings.length > 0 || !stamped ? h.settings : [['witness', '1'] as const];
  if (settings.length > 0) {
    state.push({
      key: k.settings,
      value: { type: 'hash', value: new Map(settings as [string, string][]) },
      pttlMs: undefined,
    });
  }
  return state;
}

async function load(conn: RespConnection, state: readonly KeyDump[], c: Case): Promise<void> {
  await conn.send('FLUSHALL');
  for (const { key, value, pttlMs } of state) {
    if (value.type === 'string') await conn.send('SET', key, value.value);
    else await conn.send('HSET', key, ...[...value.value].flat());
    if (pttlMs !== undefined) await conn.send('PEXPIRE', key, pttlMs);
  }
  if (c.expiring.length > 0) {
    for (const key of c.expiring) await conn.send('PEXPIRE', key, 1);
    await sleep(3);
  }
}

async function run(conn: RespConnection, source: string, state: readonly KeyDump[], c: Case) {
  await load(conn, state, c);
  if (c.oom) await conn.send('CONFIG', 'SET', 'maxmemory', '1');
  let reply: RespValue;
  try {
    reply = await conn.send('EVAL', source, c.keys.length, ...c.keys, ...c.args);
  } finally {
    if (c.oom) await conn.send('CONFIG', 'SET', 'maxmemory', '0');
  }
  return { reply: normalized(fromServer(reply)), keys: await dump(conn) };
}

/** Equal, ttls within `slackMs` of each other (either run may come first). */
function sameKeys(a: readonly Dumped[], b: readonly Dumped[], slackMs: number): boolean {
  return (
    a.length === b.length &&
    a.every(
      (k, i) =>
        k.key === b[i]!.key &&
        JSON.stringify(k.value) === JSON.stringify(b[i]!.value) &&
        (k.ttl < 0 || b[i]!.ttl < 0 ? k.ttl === b[i]!.ttl : Math.abs(k.ttl - b[i]!.ttl) <= slackMs),
    )
  );
}

/**
 * `reply` with each HELD call's remaining ttl ({2, pttl, cur}) replaced by the one in `expected` when they are within
 * `slackMs` of each other, so that the comparison that follows is exact about everything else.
 */
function withinSlack(reply: Compared, expected: Compared, slackMs: number): Compared {
  if (!Array.isArray(reply) || !Array.isArray(expected)) return reply;
  return reply.map((item, i) => {
    const other = expected[i];
    if (
      Array.isArray(item) &&
      Array.isArray(other) &&
      item[0] === 2 &&
      other[0] === 2 &&
      typeof item[1] === 'number' &&
      typeof other[1] === 'number' &&
      item[1] > 0 &&
      other[1] > 0 &&
      Math.abs(item[1] - other[1]) <= slackMs
    ) {
      return [2, other[1], ...item.slice(2)];
    }
    return item;
  });
}

/** Reply codes per call (and the first words of errors), for the tally. */
function codes(name: Name, reply: Compared): void {
  if (!Array.isArray(reply)) {
    count(`${name}: error ${JSON.stringify(reply).slice(0, 50)}`);
    return;
  }
  for (const item of reply) {
    const code = Array.isArray(item) ? item[0] : item;
    const detail = Array.isArray(item) && item[0] === 7 ? ` ${JSON.stringify(item[1]).slice(0, 30)}` : '';
    count(`${name}: {${JSON.stringify(code)}${detail}}`);
  }
}

function agree(conn: () => RespConnection, name: Name, cases: fc.Arbitrary<Case>): Promise<void> {
  const lean = loadScriptSource(name);
  return fc.assert(
    fc.asyncProperty(initialState, cases, async (generated, c) => {
      const state = withHealthy(generated, c);
      const started = performance.now();
      const before = await run(conn(), REFERENCE[name], state, c);
      const after = await run(conn(), lean, state, c);
      const slackMs = Math.ceil(performance.now() - started) + 5;
      codes(name, before.reply);
      expect(withinSlack(after.reply, before.reply, slackMs), 'reply').toEqual(before.reply);
      if (!sameKeys(before.keys, after.keys, slackMs)) {
        expect(after.keys, 'keyspace after the call').toEqual(before.keys);
      }
    }),
    { numRuns: RUNS },
  );
}

describe('the lean acquire.lua and release.lua against the scripts of 44e2b59 (redis-server 7.0)', () => {
  it('the reference scripts are the ones before the lean shape, and the lean ones differ from them', () => {
    expect(REFERENCE.acquire).toMatch(/local function acquire_one\(lease_key, record_key, token_key/);
    expect(loadScriptSource('acquire')).not.toEqual(REFERENCE.acquire);
  });

  it('acquire.lua: the same replies and keys on a standalone node', () =>
    agree(() => standalone, 'acquire', standaloneAcquire));

  it('acquire.lua: the same replies and keys on a Cluster slot (stamped: promises in the floor)', () =>
    agree(() => clusterMaster, 'acquire', slotAcquire));

  it('release.lua: the same replies and keys on a standalone node', () =>
    agree(() => standalone, 'release', releaseCase));
});
