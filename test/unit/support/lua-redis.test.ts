import { describe, expect, it } from 'vitest';
import { keySlot, slotTag } from '../../../packages/coordinator/src/keys/slots.js';
import {
  assignSlot,
  beginSlotMigration,
  globMatch,
  Keyspace,
  migrateSlotKeys,
  RedisError,
} from '../../support/lua-redis/keyspace.js';
import { coordinatorScript, formatG, LuaRedis } from '../../support/lua-redis/lua-redis.js';

// What the differential test (test/integration/lua-redis) cannot show against a real server, whose clock runs and
// which is not a Cluster member there: the exact expiry boundary on a stopped clock, time standing still inside a
// script, the script cache, and a Cluster shard's slots and batched moves. Each expectation is Redis 7.0's (the
// source named beside it).

function node(now: { t: number }, clusterSlots?: number[]): { ks: Keyspace; vm: LuaRedis } {
  const ks = new Keyspace({ now: () => now.t, ...(clusterSlots ? { clusterSlots } : {}) });
  return { ks, vm: new LuaRedis(ks) };
}

describe('the in-process Redis keyspace', () => {
  it('keeps a key alive at its expiry instant and drops it one millisecond later (db.c keyIsExpired: now > when)', () => {
    const now = { t: 1_000 };
    const { ks } = node(now);
    ks.command(['SET', 'k', 'v', 'PX', '100']);
    now.t = 1_100;
    expect(ks.command(['GET', 'k'])).toBe('v');
    expect(ks.command(['PTTL', 'k'])).toBe(0);
    now.t = 1_101;
    expect(ks.command(['GET', 'k'])).toBe(null);
    expect(ks.command(['PTTL', 'k'])).toBe(-2);
  });

  it('stops the clock for the length of a script', () => {
    const now = { t: 5_000 };
    const { vm } = node(now);
    // The host clock moves while the script runs (each redis.call reads it); the script still sees one instant.
    let reads = 0;
    const moving = new Keyspace({ now: () => now.t + reads++ });
    const movingVm = new LuaRedis(moving);
    const reply = movingVm.eval(
      "redis.call('SET', 'a', '1', 'PX', 1000); redis.call('SET', 'b', '1', 'PX', 1000); return {redis.call('PTTL', 'a'), redis.call('PTTL', 'b')}",
      [],
      [],
    );
    expect(reply).toEqual([1000, 1000]);
    expect(vm.eval("return redis.call('PTTL', 'nothing')", [], [])).toBe(-2);
  });

  it('counts OBJECT IDLETIME in whole seconds from the last access that touches the key', () => {
    const now = { t: 0 };
    const { ks } = node(now);
    ks.command(['SET', 'k', 'v']);
    now.t = 2_999;
    expect(ks.command(['EXISTS', 'k'])).toBe(1); // LOOKUP_NOTOUCH
    expect(ks.command(['OBJECT', 'IDLETIME', 'k'])).toBe(2);
    ks.command(['GET', 'k']);
    now.t = 3_500;
    expect(ks.command(['OBJECT', 'IDLETIME', 'k'])).toBe(0);
    expect(ks.command(['OBJECT', 'IDLETIME', 'absent'])).toBe(null);
  });

  it('returns every key present for a whole SCAN iteration exactly once, however COUNT cuts it', () => {
    const now = { t: 0 };
    const { ks } = node(now);
    const keys = Array.from({ length: 40 }, (_, i) => `p:{r${i}}:token`);
    for (const key of keys) ks.command(['SET', key, '1']);
    const seen: string[] = [];
    let cursor = '0';
    let calls = 0;
    do {
      const [next, batch] = ks.command(['SCAN', cursor, 'MATCH', 'p:{*:token', 'COUNT', '3']) as [
        string,
        string[],
      ];
      seen.push(...batch);
      // Keys added and removed during the iteration do not disturb the others.
      ks.command(['SET', `p:{new${calls}}:lease`, 'x']);
      cursor = next;
      calls++;
    } while (cursor !== '0');
    expect(seen.sort()).toEqual([...keys].sort());
    expect(calls).toBeGreaterThan(10);
  });

  it("matches Redis's glob", () => {
    expect(globMatch('p:{*:token', 'p:{a}:token')).toBe(true);
    expect(globMatch('p:{*:token', 'p:node:floor')).toBe(false);
    expect(globMatch('a\\*b', 'a*b')).toBe(true);
    expect(globMatch('a\\*b', 'axb')).toBe(false);
    expect(globMatch('k[0-9]', 'k7')).toBe(true);
    expect(globMatch('k[^0-9]', 'k7')).toBe(false);
    expect(globMatch('k?', 'kx')).toBe(true);
  });

  it('formats numbers for commands with "%.17g" and prints them as Lua 5.1 does ("%.14g")', () => {
    expect(formatG(3, 17)).toBe('3');
    expect(formatG(1e17, 17)).toBe('1e+17');
    expect(formatG(0.1, 17)).toBe('0.10000000000000001');
    const { vm } = node({ t: 0 });
    expect(vm.eval("return tostring(10 / 2) .. ' ' .. tostring(2^63)", [], [])).toBe('5 9.2233720368548e+18');
    // Doubles, as in Lua 5.1: integers past 2^53 are not exact.
    expect(
      vm.eval("return tostring(tonumber('9007199254740993') > tonumber('9007199254740992'))", [], []),
    ).toBe('false');
  });
});

describe('the in-process script engine', () => {
  it('answers NOSCRIPT for a script it has not loaded, and loses its scripts on a flush', () => {
    const { vm } = node({ t: 0 });
    const { sha } = coordinatorScript('inspect');
    expect(() => vm.evalsha(sha, ['a', 'b', 'c'], [])).toThrow(/^NOSCRIPT/);
    expect(vm.runScript('inspect', ['i', 'l', 'l'], [])).toEqual([3]);
    expect(vm.evalsha(sha, ['i', 'l', 'l'], [])).toEqual([3]);
    vm.flushScripts();
    expect(() => vm.evalsha(sha, ['i', 'l', 'l'], [])).toThrow(RedisError);
  });

  it('runs a coordinator script with its includes expanded by the coordinator loader', () => {
    const now = { t: 0 };
    const { ks, vm } = node(now);
    ks.command(['SET', 'p:node:incarnation', 'I1']);
    const keys = ['p:node:incarnation', 'p:node:floor', 'p:node:seal', 'p:node:settings'];
    const item = ['p:{r}:lease', 'p:{r}:lease', 'p:{r}:token'];
    expect(vm.runScript('acquire', [...keys, ...item], ['L1', 1000, '9223372036854775807', '', 3])).toEqual([
      [1, 1],
    ]);
    expect(ks.command(['GET', 'p:{r}:token'])).toBe('9223372036854775807');
    expect(vm.runScript('acquire', [...keys, ...item], ['L2', 1000, '9223372036854775806', '', 3])).toEqual([
      [2, 1000, '9223372036854775807'],
    ]);
  });
});

describe('a Cluster shard', () => {
  const tag = slotTag(5);
  const key = `p:{${tag}}:token`;

  it('refuses a script access to a key of a slot it does not serve, and declared keys across slots', () => {
    const { vm } = node({ t: 0 }, [5]);
    expect(vm.eval("return redis.call('SET', KEYS[1], '1')", [key], [])).toEqual({ status: 'OK' });
    const elsewhere = `p:{${slotTag(6)}}:token`;
    expect(() => vm.eval("return redis.call('GET', ARGV[1])", [], [elsewhere])).toThrow(
      /Script attempted to access a non local key/,
    );
    expect(() => vm.eval('return 1', [key, elsewhere], [])).toThrow(/^CROSSSLOT/);
    expect(() => vm.eval('return 1', [elsewhere], [])).toThrow(/^MOVED 6/);
    expect(vm.eval("return redis.call('CLUSTER', 'COUNTKEYSINSLOT', 5)", [], [])).toBe(1);
  });

  it('lists a slot newest first and moves it in batches; the moved keys keep their ttl', () => {
    const now = { t: 0 };
    const source = new Keyspace({ now: () => now.t, clusterSlots: [5] });
    const target = new Keyspace({ now: () => now.t, clusterSlots: [] });
    const keys = ['a', 'b', 'c'].map((r) => `p:{${tag}}:${r}:token`);
    for (const k of keys) source.command(['SET', k, '1', 'PX', '5000']);
    expect(keys.every((k) => keySlot(k) === 5)).toBe(true);
    expect(source.command(['CLUSTER', 'GETKEYSINSLOT', '5', '10'])).toEqual([...keys].reverse());
    beginSlotMigration(source, target, 5);
    now.t = 1_000;
    expect(migrateSlotKeys(source, target, 5, 2)).toBe(2);
    // Mid-move, the source answers for the key it still has and refuses the moved ones.
    const sourceVm = new LuaRedis(source);
    expect(sourceVm.eval("return redis.call('GET', ARGV[1])", [], [keys[0]!])).toBe('1');
    expect(() => sourceVm.eval("return redis.call('GET', ARGV[1])", [], [keys[2]!])).toThrow(/non local key/);
    expect(migrateSlotKeys(source, target, 5, 2)).toBe(1);
    assignSlot(5, target, [source]);
    expect(target.command(['PTTL', keys[0]!])).toBe(4_000);
    expect(new LuaRedis(target).eval("return redis.call('GET', ARGV[1])", [], [keys[1]!])).toBe('1');
    expect(source.keysInSlot(5)).toEqual([]);
  });
});
