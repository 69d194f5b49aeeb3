import { afterAll, beforeAll, describe, it } from 'vitest';
import fc from 'fast-check';
import { RedisClusterMember } from '@fenced/test-utils/redis-cluster-member';
import { RedisNode } from '@fenced/test-utils/redis-node';
import { RespConnection, RespError, type RespValue } from '@fenced/test-utils/resp-connection';
import { SLOT_COUNT } from '../../../packages/coordinator/src/keys/slots.js';
import { SCRIPT_NAMES } from '../../../packages/coordinator/src/scripts/scripts.js';
import type { ScriptName } from '../../../packages/coordinator/src/scripts/script-results.js';
import { Keyspace, RedisError, type KeyDump, type StoredValue } from '../../fixtures/lua-redis/keyspace.js';
import { coordinatorScript, LuaRedis, type ScriptReply } from '../../fixtures/lua-redis/lua-redis.js';
import { serverKeys } from '../../fixtures/lua-redis/server-keys.js';
import { initialState, SCRIPT_CALLS, useShardId } from '../../fixtures/lua-redis/script-calls.js';

// The in-process script engine (test/fixtures/lua-redis) against a real redis-server 7.0: the same scripts, from the
// same generated keyspaces, with the same generated KEYS and ARGV (test/fixtures/lua-redis/script-calls.ts), must
// give the same reply and leave the same keys, values and ttls. The simulation's evidence rests on this equality.
//
// What may differ, and how it is compared: a real server's clock runs during a case while the emulator's stands
// still at the moment the state was loaded, so a remaining ttl (in the keyspace, or in a reply the descriptor
// marks) may be lower on the server by at most the time the case took; key lists in SCAN or slot order are
// compared sorted (the server's order depends on its hash seed). Status replies read as their text on both sides.

/** A real server and its emulated twin: a standalone node, or the one master of a one-shard Cluster member. */
interface Target {
  readonly conn: RespConnection;
  readonly keyspace: Keyspace;
  readonly vm: LuaRedis;
}

let redis: RedisNode;
let member: RedisClusterMember;
const targets: { standalone?: Target; cluster?: Target } = {};
/** The emulators' clock: the moment a case's state was loaded. */
let clock = 0;

function twin(conn: RespConnection, cluster?: { slots: number[]; nodeId: string }): Target {
  const keyspace = new Keyspace({
    now: () => clock,
    ...(cluster ? { clusterSlots: cluster.slots, nodeId: cluster.nodeId } : {}),
  });
  return { conn, keyspace, vm: new LuaRedis(keyspace) };
}
/** Cases per script; FENCED_DIFFERENTIAL_RUNS raises it for a longer search. */
const RUNS = Number(process.env.FENCED_DIFFERENTIAL_RUNS ?? 150);
/** FENCED_DIFFERENTIAL_TALLY=1 prints how often each script gave each reply code: what the generators reach. */
const TALLY = process.env.FENCED_DIFFERENTIAL_TALLY === '1';
const outcomes = new Map<string, number>();

/** Counts a case by script and reply code (per item for the batch scripts; errors by their first words). */
function tally(name: ScriptName, reply: Compared): void {
  if (!TALLY) return;
  const code = (r: Compared): string => {
    if (Array.isArray(r)) return Array.isArray(r[0]) ? r.map(code).join('+') : JSON.stringify(r[0]);
    if (isError(r)) return `error ${(r as { error: string }).error.slice(0, 40)}`;
    return JSON.stringify(r);
  };
  const key = `${name} ${code(reply)}`;
  outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
}

beforeAll(async () => {
  redis = await RedisNode.start({ persistence: 'none' });
  targets.standalone = twin(await RespConnection.connect(redis.port));
  member = await RedisClusterMember.start({ masters: 1, persistence: 'none' });
  const master = await RespConnection.connect(member.masters[0]!.port);
  // The emulated shard answers CLUSTER MYID as the real master does, so a slot stamped by "this shard" is one on both.
  const nodeId = (await master.send('CLUSTER', 'MYID')) as string;
  useShardId(nodeId);
  targets.cluster = twin(master, { slots: Array.from({ length: SLOT_COUNT }, (_, slot) => slot), nodeId });
});

afterAll(async () => {
  if (TALLY) {
    const lines = [...outcomes]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, n]) => `${String(n).padStart(5)}  ${k}`);
    console.log(`outcomes of the generated cases (server replies):\n${lines.join('\n')}`);
  }
  targets.standalone?.conn.close();
  targets.cluster?.conn.close();
  await redis?.stop();
  await member?.stop();
});

/** A reply as both sides are compared: errors as { error }, ttls as { ttl }, statuses as their text. */
type Compared = string | number | null | { error: string } | { ttl: number } | Compared[];

function fromServer(value: RespValue): Compared {
  if (value instanceof RespError) return { error: value.message };
  if (Array.isArray(value)) return value.map(fromServer);
  return value;
}

function fromEmulator(reply: ScriptReply): Compared {
  if (reply === null || typeof reply === 'string' || typeof reply === 'number') return reply;
  if (Array.isArray(reply)) return (reply as readonly ScriptReply[]).map(fromEmulator);
  if ('status' in reply) return reply.status;
  if ('error' in reply) return { error: reply.error };
  if ('ttl' in reply) return reply as { ttl: number };
  return null;
}

/** Applies the descriptor's ttl marks and canonical order to a reply (either side). */
function normalize(name: ScriptName, reply: Compared): Compared {
  const descriptor = SCRIPT_CALLS[name];
  // Compared is ScriptReply's shape with errors as { error } (what ScriptReply's error elements are) and statuses
  // as text, so the descriptor's functions apply to it.
  let value = reply as unknown as ScriptReply;
  if (descriptor.scanOrdered) value = descriptor.scanOrdered(value);
  return (descriptor.ttls ? descriptor.ttls(value) : value) as unknown as Compared;
}

/** Equal, with a ttl on the server lower than the emulator's by at most `slackMs`. */
function same(emulator: Compared, server: Compared, slackMs: number): boolean {
  if (Array.isArray(emulator) || Array.isArray(server)) {
    return (
      Array.isArray(emulator) &&
      Array.isArray(server) &&
      emulator.length === server.length &&
      emulator.every((item, i) => same(item, server[i]!, slackMs))
    );
  }
  if (typeof emulator === 'object' && emulator !== null && typeof server === 'object' && server !== null) {
    if ('ttl' in emulator && 'ttl' in server) {
      return emulator.ttl - server.ttl >= 0 && emulator.ttl - server.ttl <= slackMs;
    }
    if ('error' in emulator && 'error' in server) return emulator.error === server.error;
    return false;
  }
  return emulator === server;
}

interface DumpedKey {
  readonly key: string;
  readonly value: Compared;
  readonly ttl: Compared;
}

function dumpEmulator(keyspace: Keyspace): DumpedKey[] {
  return keyspace.dump().map((k) => ({
    key: k.key,
    value: storedValue(k.value),
    ttl: k.pttlMs === undefined ? -1 : { ttl: Math.max(0, k.pttlMs) },
  }));
}

function storedValue(value: StoredValue): Compared {
  return value.type === 'string' ? value.value : ['hash', ...[...value.value].flat()];
}

async function dumpServer(conn: RespConnection): Promise<DumpedKey[]> {
  return (await serverKeys(conn)).map(({ key, value, pttl }) => ({
    key,
    value: fromServer(value),
    ttl: pttl === -1 ? -1 : { ttl: pttl },
  }));
}

async function loadServer(conn: RespConnection, state: readonly KeyDump[]): Promise<void> {
  await conn.send('FLUSHALL');
  for (const { key, value, pttlMs } of state) {
    if (value.type === 'string') await conn.send('SET', key, value.value);
    else await conn.send('HSET', key, ...[...value.value].flat());
    if (pttlMs !== undefined) await conn.send('PEXPIRE', key, pttlMs);
  }
}

function isError(reply: Compared): boolean {
  return typeof reply === 'object' && reply !== null && !Array.isArray(reply) && 'error' in reply;
}

function errorText(error: unknown): Compared {
  if (error instanceof RedisError) return { error: error.message };
  throw error;
}

/** One case on both sides; returns a description of the first difference, or undefined. */
async function differs(
  { conn, keyspace, vm }: Target,
  name: ScriptName,
  state: readonly KeyDump[],
  keys: readonly string[],
  args: readonly string[],
): Promise<string | undefined> {
  const started = performance.now();
  clock = Date.now();
  keyspace.flush();
  for (const key of state) keyspace.load(key);
  let emulated: Compared;
  try {
    emulated = fromEmulator(vm.runScript(name, keys, args));
  } catch (error) {
    emulated = errorText(error);
  }
  await loadServer(conn, state);
  const served = fromServer(
    await conn.send('EVAL', coordinatorScript(name).source, keys.length, ...keys, ...args),
  );
  const serverDump = await dumpServer(conn);
  // Everything the server did happened within this much of the emulator's (frozen) moment.
  const slackMs = Math.ceil(performance.now() - started) + 2;
  const replies = [normalize(name, emulated), normalize(name, served)] as const;
  tally(name, replies[1]);
  if (!same(replies[0], replies[1], slackMs)) {
    return `reply differs:\n  emulator ${JSON.stringify(replies[0])}\n  server   ${JSON.stringify(replies[1])}`;
  }
  const visited = SCRIPT_CALLS[name].visitedInScanOrder;
  const compared = (keys: DumpedKey[]): DumpedKey[] =>
    visited !== undefined && isError(replies[1]) ? keys.filter((k) => !visited(k.key)) : keys;
  const [emulatorKeys, serverKeys] = [compared(dumpEmulator(keyspace)), compared(serverDump)];
  const stateSame =
    emulatorKeys.length === serverKeys.length &&
    emulatorKeys.every(
      (k, i) =>
        k.key === serverKeys[i]!.key &&
        same(k.value, serverKeys[i]!.value, 0) &&
        same(k.ttl, serverKeys[i]!.ttl, slackMs),
    );
  if (!stateSame) {
    return `keyspace differs (reply ${JSON.stringify(replies[0])}):\n  emulator ${JSON.stringify(emulatorKeys)}\n  server   ${JSON.stringify(serverKeys)}`;
  }
  return undefined;
}

describe('the in-process script engine against redis-server 7.0', () => {
  it('covers every script the coordinator has', () => {
    const missing = SCRIPT_NAMES.filter((name) => !(name in SCRIPT_CALLS));
    if (missing.length > 0) throw new Error(`script-calls.ts has no descriptor for: ${missing.join(', ')}`);
  });

  for (const name of SCRIPT_NAMES) {
    it(`gives the same replies and keys for ${name}.lua`, () => agree(targets.standalone!, name));
  }
});

describe('the in-process script engine as a Cluster shard against a redis-server 7.0 Cluster master', () => {
  for (const name of SCRIPT_NAMES.filter((n) => SCRIPT_CALLS[n].cluster === true)) {
    it(`gives the same replies and keys for ${name}.lua`, () => agree(targets.cluster!, name));
  }
});

function agree(target: Target, name: ScriptName): Promise<void> {
  return fc.assert(
    fc.asyncProperty(initialState, SCRIPT_CALLS[name].call, async (state, call) => {
      const difference = await differs(target, name, state, call.keys, call.args);
      if (difference !== undefined) {
        throw new Error(
          `${name}.lua: ${difference}\n  KEYS ${JSON.stringify(call.keys)}\n  ARGV ${JSON.stringify(call.args)}\n  state ${JSON.stringify(
            state.map((k) => ({ ...k, value: storedValue(k.value) })),
          )}`,
        );
      }
    }),
    { numRuns: RUNS },
  );
}
