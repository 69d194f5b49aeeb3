/**
 * Redis's script engine in process: a Lua VM that runs the coordinator's own scripts (packages/coordinator/lua,
 * includes expanded by the coordinator's own loader, `loadScriptSource` in the coordinator's scripts.ts) behind the surface
 * Redis 7.0 gives a script — `redis.call`, `redis.pcall`, `redis.error_reply`, `redis.status_reply`, KEYS and ARGV —
 * over an in-memory keyspace (keyspace.ts). For the deterministic simulation, and checked against a real
 * `redis-server` by test/integration/lua-redis/differential.test.ts.
 *
 * Why fengari (Lua 5.3 in JavaScript) and not wasmoon (Lua 5.4 compiled to WebAssembly). Redis runs Lua 5.1, and
 * neither is 5.1; what decides is where each differs from 5.1 on what these scripts do (docs/simulation.md has the
 * measurements):
 * - Numbers. Lua 5.1 has only doubles. fengari's integers are 32-bit, and any integer wider than that is a double,
 *   so `tonumber` of a 19-digit token loses precision exactly as on Redis (tonumber('9007199254740993') >
 *   tonumber('9007199254740992') is false on Redis and in fengari, true in wasmoon, whose 64-bit integers are
 *   exact). The scripts compare tokens in parts of at most ten digits precisely because of this; an emulator with
 *   exact 64-bit integers would hide a script that forgot it. Integer replies of Redis commands are pushed as
 *   doubles here (lua_pushnumber), as Redis does, so arithmetic on them (PTTL * 2) never wraps at 32 bits.
 * - Floats print as 5.1 prints them: fengari is configured with LUA_COMPAT_FLOATSTRING (10/2 is "5", not "5.0").
 * - Speed. A script here is a few Lua operations around many `redis.call`s, so the cost of a call into the host
 *   decides: 100 000 calls from Lua into JavaScript took 115 ms in fengari and 427 ms in wasmoon on this machine
 *   (wasmoon runs pure Lua loops 15× faster, which these scripts barely have).
 * - Synchronous and deterministic: fengari needs no asynchronous WebAssembly start-up, so a node can be created or
 *   restarted inside one step of the simulation, and nothing in it depends on timing.
 * Known differences from Redis's 5.1 that the scripts do not meet: integer literal arithmetic beyond 32 bits wraps
 * (2147483647 + 1) where 5.1 would give a double; 5.3 library changes (no `table.getn`, `math.pow`, `loadstring`;
 * `unpack` is provided, as Redis has it); run-time error texts of the VM itself ("attempt to index a nil value
 * (local 'x')" where 5.1 says "attempt to index local 'x' (a nil value)"); no `cjson`, `cmsgpack`, `struct`, `bit`.
 *
 * What Redis 7.0 does around a script, kept here (eval.c, script_lua.c):
 * - The chunk is named `@user_script`; an error escaping the script is replied as
 *   `<message> script: <sha>, on @user_script:<line>.`, where a run-time error's message is `ERR user_script:<line>:
 *   <text>` and an error table's is its `err` field (Redis's `__redis__err__handler`).
 * - `redis.call` raises an error table {err = message}; `redis.pcall` returns it. A script's own `pcall` that catches
 *   an error table returns its `err` string (observed on redis-server 7.0: `pcall(function() redis.call('GET',
 *   hash) end)` gives the string "WRONGTYPE ..."), so include/call-error.lua sees a string there.
 * - Arguments to `redis.call` are strings or numbers (numbers formatted "%.17g"); anything else, no argument, an
 *   unknown command or a wrong argument count is refused with Redis's script-level message.
 * - Replies: integer -> number, bulk -> string, nil -> false, array -> table, status -> {ok = ...}, error -> {err
 *   = ...}. A script's return value: number -> integer (truncated), string -> bulk, true -> 1, false and nil -> nil,
 *   {err=...} -> error, {ok=...} -> status, other tables -> array up to the first nil. Only the first return value.
 * - Globals are protected: creating one is "Attempt to modify a readonly table", reading a missing one is "Script
 *   attempted to access nonexistent global variable".
 * - Time stands still during a script (Keyspace.frozen); on a Cluster shard a key of a slot the shard does not serve
 *   is refused (Keyspace.checkLocal), and a script's declared keys must share one slot (CROSSSLOT).
 */
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { loadScriptSource } from '../../../packages/coordinator/src/scripts/scripts.js';
import type { ScriptName } from '../../../packages/coordinator/src/scripts/script-results.js';
import { Keyspace, RedisError, type Reply } from './keyspace.js';

/** A nested error element of a script's array reply ({err = ...} inside a returned table). */
export interface ErrorElement {
  readonly error: string;
}

/** What a script call returns: a Reply whose arrays may hold error elements. */
export type ScriptReply = Reply | ErrorElement | readonly ScriptReply[];

// fengari reads its configuration once, when it is first loaded: integral floats print without ".0", as in 5.1.
process.env.FENGARICONF ??= JSON.stringify({ LUA_COMPAT_FLOATSTRING: true });

/** The slice of fengari's C-like API this file uses (fengari ships no types). */
interface LuaApi {
  readonly LUA_OK: number;
  readonly LUA_REGISTRYINDEX: number;
  readonly LUA_TNIL: number;
  readonly LUA_TBOOLEAN: number;
  readonly LUA_TNUMBER: number;
  readonly LUA_TSTRING: number;
  readonly LUA_TTABLE: number;
  lua_gettop(L: LuaState): number;
  lua_settop(L: LuaState, index: number): void;
  lua_type(L: LuaState, index: number): number;
  lua_tojsstring(L: LuaState, index: number): string;
  lua_tonumber(L: LuaState, index: number): number;
  lua_toboolean(L: LuaState, index: number): boolean;
  lua_pushnumber(L: LuaState, n: number): void;
  lua_pushboolean(L: LuaState, b: boolean): void;
  lua_pushnil(L: LuaState): void;
  lua_pushstring(L: LuaState, s: Uint8Array): void;
  lua_pushjsfunction(L: LuaState, f: (L: LuaState) => number): void;
  lua_pushglobaltable(L: LuaState): void;
  lua_pushvalue(L: LuaState, index: number): void;
  lua_createtable(L: LuaState, narr: number, nrec: number): void;
  lua_rawseti(L: LuaState, index: number, n: number): void;
  lua_rawgeti(L: LuaState, index: number, n: number): number;
  lua_rawset(L: LuaState, index: number): void;
  lua_rawget(L: LuaState, index: number): number;
  lua_setfield(L: LuaState, index: number, key: Uint8Array): void;
  lua_getfield(L: LuaState, index: number, key: Uint8Array): number;
  lua_pcall(L: LuaState, nargs: number, nresults: number, errfunc: number): number;
  lua_error(L: LuaState): number;
  lua_pop(L: LuaState, n: number): void;
}
interface LauxApi {
  luaL_newstate(): LuaState;
  luaL_loadbuffer(L: LuaState, buffer: Uint8Array, size: number | null, name: Uint8Array): number;
  luaL_requiref(L: LuaState, name: Uint8Array, open: (L: LuaState) => number, global: number): void;
}
interface LualibApi {
  readonly luaopen_base: (L: LuaState) => number;
  readonly luaopen_table: (L: LuaState) => number;
  readonly luaopen_string: (L: LuaState) => number;
  readonly luaopen_math: (L: LuaState) => number;
  readonly luaopen_debug: (L: LuaState) => number;
}
interface Fengari {
  readonly lua: LuaApi;
  readonly lauxlib: LauxApi;
  readonly lualib: LualibApi;
  readonly to_luastring: (s: string) => Uint8Array;
}
type LuaState = { readonly __luaState: unique symbol };

const requireCjs = createRequire(import.meta.url);
// Lua 5.1 prints a number with "%.14g" (2^63 is "9.2233720368548e+18"); fengari's own formatting never uses an
// exponent. Its number formatting is read from luaconf when the VM's modules load, so it is replaced first (defs.js
// loads first, as fengari itself loads it: it and luaconf require each other).
requireCjs('fengari/src/defs.js');
(requireCjs('fengari/src/luaconf.js') as { lua_number2str: (n: number) => string }).lua_number2str = (n) =>
  formatG(n, 14);
const { lua, lauxlib, lualib, to_luastring } = requireCjs('fengari') as Fengari;
const S = (text: string): Uint8Array => to_luastring(text);
/** Names used on every call (field names, KEYS, ARGV, registry slots), converted once. */
const names = new Map<string, Uint8Array>();
const N = (name: string): Uint8Array => {
  let bytes = names.get(name);
  if (bytes === undefined) {
    bytes = to_luastring(name);
    names.set(name, bytes);
  }
  return bytes;
};

/**
 * Redis 7.0's globals and error handler, set up before the globals are made read-only: `unpack` (Redis's Lua 5.1
 * has it), `pcall` that hands a caught error table's `err` string to the script, the handler that adds the source
 * line to an escaping error, and the protection of _G.
 */
const PRELUDE = `
unpack = table.unpack
local raw_pcall = pcall
local function caught(ok, ...)
  if not ok then
    local err = ...
    if type(err) == 'table' and type(err.err) == 'string' then
      return false, err.err
    end
  end
  return ok, ...
end
pcall = function(...) return caught(raw_pcall(...)) end
local dbg = debug
debug = nil
loadfile = nil
dofile = nil
__redis__err__handler = function(err)
  -- Redis skips one C frame (the function that raised); here host functions are 'J' frames, and the globals'
  -- guards below are Lua functions of this prelude where Redis has C: both are skipped to reach the script.
  local level = 2
  local i = dbg.getinfo(level, 'nSl')
  while i and (i.what == 'C' or i.what == 'J' or i.source == '=prelude') do
    level = level + 1
    i = dbg.getinfo(level, 'nSl')
  end
  if type(err) ~= 'table' then
    err = {err = 'ERR ' .. tostring(err)}
  end
  if i then
    err['source'] = i.source
    err['line'] = i.currentline
  end
  return err
end
setmetatable(_G, {
  __newindex = function() error('Attempt to modify a readonly table', 2) end,
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
})
`;

const ERR_HANDLER = S('__redis__err__handler');

/** C's "%.<precision>g": "%.17g" is how Redis 7.0 passes a Lua number to a command, "%.14g" how Lua 5.1 prints one. */
export function formatG(n: number, precision: number): string {
  if (Number.isNaN(n)) return n > 0 ? 'nan' : '-nan';
  if (!Number.isFinite(n)) return n > 0 ? 'inf' : '-inf';
  if (n === 0) return Object.is(n, -0) ? '-0' : '0';
  const [mantissa, exponentText] = n.toExponential(precision - 1).split('e') as [string, string];
  const exponent = Number(exponentText);
  const strip = (digits: string): string => (digits.includes('.') ? digits.replace(/\.?0+$/, '') : digits);
  if (exponent < -4 || exponent >= precision) {
    const sign = exponent < 0 ? '-' : '+';
    return `${strip(mantissa)}e${sign}${String(Math.abs(exponent)).padStart(2, '0')}`;
  }
  return strip(n.toFixed(precision - 1 - exponent));
}

/** SCRIPT LOAD's name for a script: the SHA1 of its source. */
export function scriptSha(source: string): string {
  return createHash('sha1').update(source).digest('hex');
}

const sources = new Map<ScriptName, { source: string; sha: string }>();

/** A coordinator script's source, read by the coordinator's own loader (includes expanded), and its SHA1. */
export function coordinatorScript(name: ScriptName): { source: string; sha: string } {
  let script = sources.get(name);
  if (script === undefined) {
    const source = loadScriptSource(name);
    script = { source, sha: scriptSha(source) };
    sources.set(name, script);
  }
  return script;
}

/**
 * The Lua state every simulated server shares: creating a state and compiling the scripts costs milliseconds in
 * fengari, and a simulation creates nodes by the thousand. Sharing changes nothing a script can see: scripts run one
 * at a time (synchronously), cannot create globals, and get KEYS, ARGV and the server (`current`) anew on every
 * call; each server keeps its own script cache (`LuaRedis.loaded`) for EVALSHA's NOSCRIPT.
 */
class Engine {
  readonly L: LuaState;
  /** The scripts compiled into this state, by SHA1. */
  readonly compiled = new Set<string>();
  /** The server whose script runs now. */
  current: LuaRedis | undefined;

  constructor() {
    const L = lauxlib.luaL_newstate();
    this.L = L;
    for (const [name, open] of [
      ['_G', lualib.luaopen_base],
      ['table', lualib.luaopen_table],
      ['string', lualib.luaopen_string],
      ['math', lualib.luaopen_math],
      ['debug', lualib.luaopen_debug],
    ] as const) {
      lauxlib.luaL_requiref(L, S(name), open, 1);
      lua.lua_pop(L, 1);
    }
    lua.lua_createtable(L, 0, 16);
    const fn = (name: string, body: (L: LuaState) => number): void => {
      lua.lua_pushjsfunction(L, body);
      lua.lua_setfield(L, -2, S(name));
    };
    fn('call', (state) => this.server().redisCall(state, true));
    fn('pcall', (state) => this.server().redisCall(state, false));
    fn('error_reply', (state) => replyTable(state, 'err', errorReplyText(state)));
    fn('status_reply', (state) => {
      if (lua.lua_gettop(state) !== 1 || lua.lua_type(state, -1) !== lua.LUA_TSTRING) {
        return errorTable(state, 'ERR wrong number or type of arguments');
      }
      return replyTable(state, 'ok', lua.lua_tojsstring(state, -1));
    });
    fn('sha1hex', (state) => {
      lua.lua_pushstring(state, S(scriptSha(lua.lua_tojsstring(state, 1))));
      return 1;
    });
    fn('log', () => 0);
    fn('replicate_commands', (state) => {
      lua.lua_pushboolean(state, true);
      return 1;
    });
    fn('set_repl', () => 0);
    for (const [name, value] of [
      ['LOG_DEBUG', 0],
      ['LOG_VERBOSE', 1],
      ['LOG_NOTICE', 2],
      ['LOG_WARNING', 3],
      ['REPL_NONE', 0],
      ['REPL_AOF', 1],
      ['REPL_SLAVE', 2],
      ['REPL_REPLICA', 2],
      ['REPL_ALL', 3],
    ] as const) {
      lua.lua_pushnumber(L, value);
      lua.lua_setfield(L, -2, S(name));
    }
    lua.lua_pushglobaltable(L);
    lua.lua_pushstring(L, S('redis'));
    lua.lua_pushvalue(L, -3);
    lua.lua_rawset(L, -3);
    lua.lua_settop(L, 0);
    this.compile(PRELUDE, '=prelude');
    if (lua.lua_pcall(L, 0, 0, 0) !== lua.LUA_OK) throw new Error(lua.lua_tojsstring(L, -1));
    // The handler, kept where a script cannot reach it.
    lua.lua_pushglobaltable(L);
    lua.lua_pushstring(L, ERR_HANDLER);
    lua.lua_rawget(L, -2);
    lua.lua_setfield(L, lua.LUA_REGISTRYINDEX, ERR_HANDLER);
    lua.lua_settop(L, 0);
  }

  /** The server whose script is running (redis.call and redis.pcall act on its keyspace). */
  server(): LuaRedis {
    if (this.current === undefined) throw new Error('redis.call outside a script run');
    return this.current;
  }

  compile(source: string, chunk: string): void {
    const bytes = to_luastring(source);
    if (lauxlib.luaL_loadbuffer(this.L, bytes, bytes.length, S(chunk)) !== lua.LUA_OK) {
      const message = lua.lua_tojsstring(this.L, -1);
      lua.lua_settop(this.L, 0);
      throw new RedisError(`ERR Error compiling script (new function): ${message}`);
    }
  }

  /** Compiles a script once per process, kept in the registry under `f_<sha>`. */
  ensureCompiled(source: string, sha: string): void {
    if (this.compiled.has(sha)) return;
    this.compile(source, '@user_script');
    lua.lua_setfield(this.L, lua.LUA_REGISTRYINDEX, N(`f_${sha}`));
    this.compiled.add(sha);
  }
}

let shared: Engine | undefined;

/** One Redis server's script engine over one keyspace (its own script cache, the process's shared Lua state). */
export class LuaRedis {
  private readonly engine: Engine;
  /** The scripts this server has loaded (its script cache), by SHA1. */
  private readonly loaded = new Set<string>();

  constructor(readonly keyspace: Keyspace) {
    shared ??= new Engine();
    this.engine = shared;
  }

  /** SCRIPT LOAD: compiles `source` into this server's cache; returns its SHA1. */
  load(source: string): string {
    const sha = scriptSha(source);
    this.engine.ensureCompiled(source, sha);
    this.loaded.add(sha);
    return sha;
  }

  /** Whether the script cache holds `sha` (SCRIPT EXISTS). */
  hasScript(sha: string): boolean {
    return this.loaded.has(sha);
  }

  /** SCRIPT FLUSH, or what a restart does to the cache. */
  flushScripts(): void {
    this.loaded.clear();
  }

  /** EVAL: loads the script (as Redis caches every EVAL) and runs it. */
  eval(source: string, keys: readonly string[], args: readonly string[]): ScriptReply {
    return this.evalsha(this.load(source), keys, args);
  }

  /**
   * A coordinator script by name, as the coordinator's `runScript` (scripts.ts) sends it (EVALSHA of the same source; a
   * server that lost its cache loads it again first, as NodeConnection does after a restart).
   */
  runScript(name: ScriptName, keys: readonly string[], args: readonly (string | number)[]): ScriptReply {
    const { source, sha } = coordinatorScript(name);
    if (!this.loaded.has(sha)) this.load(source);
    return this.evalsha(
      sha,
      keys,
      args.map((arg) => String(arg)),
    );
  }

  /** EVALSHA: runs a cached script atomically, with the clock stopped. Throws RedisError for an error reply. */
  evalsha(sha: string, keys: readonly string[], args: readonly string[]): ScriptReply {
    if (!this.loaded.has(sha)) throw new RedisError('NOSCRIPT No matching script. Please use EVAL.');
    if (this.keyspace.isCluster && keys.length > 0) {
      const slot = this.keyspace.slotOf(keys[0]!);
      if (keys.some((key) => this.keyspace.slotOf(key) !== slot)) {
        throw new RedisError("CROSSSLOT Keys in request don't hash to the same slot");
      }
      if (!this.keyspace.servesSlot(slot)) throw new RedisError(`MOVED ${slot} elsewhere`);
    }
    const engine = this.engine;
    if (engine.current !== undefined) throw new Error('a script cannot run inside another script');
    engine.current = this;
    try {
      return this.keyspace.frozen(() => this.run(sha, keys, args));
    } finally {
      engine.current = undefined;
    }
  }

  private run(sha: string, keys: readonly string[], args: readonly string[]): ScriptReply {
    const L = this.engine.L;
    lua.lua_settop(L, 0);
    lua.lua_getfield(L, lua.LUA_REGISTRYINDEX, ERR_HANDLER);
    lua.lua_pushglobaltable(L);
    setArray(L, 'KEYS', keys);
    setArray(L, 'ARGV', args);
    lua.lua_pop(L, 1);
    lua.lua_getfield(L, lua.LUA_REGISTRYINDEX, N(`f_${sha}`));
    const status = lua.lua_pcall(L, 0, 1, 1);
    try {
      if (status !== lua.LUA_OK) throw escapedError(L, sha);
      const reply = toReply(L, lua.lua_gettop(L));
      if (isErrorElement(reply)) throw new RedisError(reply.error);
      return reply;
    } finally {
      lua.lua_settop(L, 0);
    }
  }

  /** redis.call (`raise`) and redis.pcall, on this server's keyspace. */
  redisCall(L: LuaState, raise: boolean): number {
    const fail = (message: string): number => {
      lua.lua_settop(L, 0);
      errorTable(L, message);
      return raise ? lua.lua_error(L) : 1;
    };
    const argc = lua.lua_gettop(L);
    if (argc === 0) return fail('ERR Please specify at least one argument for this redis lib call');
    const argv: string[] = [];
    for (let i = 1; i <= argc; i++) {
      const type = lua.lua_type(L, i);
      if (type === lua.LUA_TNUMBER) argv.push(formatG(lua.lua_tonumber(L, i), 17));
      else if (type === lua.LUA_TSTRING) argv.push(lua.lua_tojsstring(L, i));
      else return fail('ERR Lua redis lib command arguments must be strings or integers');
    }
    const arity = Keyspace.arity(argv[0]!);
    if (arity === undefined) return fail('ERR Unknown Redis command called from script');
    if (arity > 0 ? argc !== arity : argc < -arity) {
      return fail('ERR Wrong number of args calling Redis command from script');
    }
    let reply: Reply;
    try {
      if (this.keyspace.isCluster) {
        for (const position of Keyspace.keyPositions(argv)) this.keyspace.checkLocal(argv[position]!);
      }
      reply = this.keyspace.command(argv);
    } catch (error) {
      if (error instanceof RedisError) return fail(error.message);
      throw error;
    }
    lua.lua_settop(L, 0);
    pushReply(L, reply);
    return 1;
  }
}

function setArray(L: LuaState, name: string, values: readonly string[]): void {
  lua.lua_pushstring(L, N(name));
  lua.lua_createtable(L, values.length, 0);
  values.forEach((value, i) => {
    lua.lua_pushstring(L, S(value));
    lua.lua_rawseti(L, -2, i + 1);
  });
  lua.lua_rawset(L, -3);
}

/** A table {<field> = text} on the stack. */
function replyTable(L: LuaState, field: string, text: string): number {
  lua.lua_createtable(L, 0, 1);
  lua.lua_pushstring(L, S(text));
  lua.lua_setfield(L, -2, N(field));
  return 1;
}

function errorTable(L: LuaState, message: string): number {
  return replyTable(L, 'err', message);
}

/**
 * redis.error_reply's text (luaRedisErrorReplyCommand, then luaPushErrorBuff): a '-' is put in front when missing;
 * then "-CODE msg" keeps its code and a "-msg" without a space gets "ERR" ('FOO' becomes "ERR FOO").
 */
function errorReplyText(L: LuaState): string {
  if (lua.lua_gettop(L) !== 1 || lua.lua_type(L, -1) !== lua.LUA_TSTRING) {
    return 'ERR wrong number or type of arguments';
  }
  const raw = lua.lua_tojsstring(L, -1);
  const text = raw.startsWith('-') ? raw : `-${raw}`;
  const space = text.indexOf(' ');
  const [code, message] =
    space === -1 ? ['ERR', text.slice(1)] : [text.slice(1, space), text.slice(space + 1)];
  return `${code} ${message.replace(/^[\r\n]+|[\r\n]+$/g, '')}`;
}

/** A command's reply as a Lua value (redisProtocolToLuaType, RESP2). */
function pushReply(L: LuaState, reply: ScriptReply): void {
  if (reply === null) lua.lua_pushboolean(L, false);
  else if (typeof reply === 'string') lua.lua_pushstring(L, S(reply));
  else if (typeof reply === 'number') lua.lua_pushnumber(L, reply);
  else if (Array.isArray(reply)) {
    const items = reply as readonly ScriptReply[];
    lua.lua_createtable(L, items.length, 0);
    items.forEach((item, i) => {
      pushReply(L, item);
      lua.lua_rawseti(L, -2, i + 1);
    });
  } else if ('status' in reply) replyTable(L, 'ok', reply.status);
  else if ('error' in reply) replyTable(L, 'err', reply.error);
}

function isErrorElement(reply: ScriptReply): reply is ErrorElement {
  return typeof reply === 'object' && reply !== null && !Array.isArray(reply) && 'error' in reply;
}

/** The script's return value as a reply (luaReplyToRedisReply). */
function toReply(L: LuaState, index: number): ScriptReply {
  const type = lua.lua_type(L, index);
  if (type === lua.LUA_TSTRING) return lua.lua_tojsstring(L, index);
  if (type === lua.LUA_TBOOLEAN) return lua.lua_toboolean(L, index) ? 1 : null;
  if (type === lua.LUA_TNUMBER) return Math.trunc(lua.lua_tonumber(L, index));
  if (type !== lua.LUA_TTABLE) return null;
  const field = (name: string): string | undefined => {
    lua.lua_pushstring(L, N(name));
    const found = lua.lua_rawget(L, index) === lua.LUA_TSTRING ? lua.lua_tojsstring(L, -1) : undefined;
    lua.lua_pop(L, 1);
    return found;
  };
  const err = field('err');
  if (err !== undefined) return { error: err };
  const ok = field('ok');
  if (ok !== undefined) return { status: ok.replace(/[\r\n]/g, ' ') };
  const items: ScriptReply[] = [];
  for (let i = 1; ; i++) {
    if (lua.lua_rawgeti(L, index, i) === lua.LUA_TNIL) {
      lua.lua_pop(L, 1);
      break;
    }
    items.push(toReply(L, lua.lua_gettop(L)));
    lua.lua_pop(L, 1);
  }
  return items;
}

/** An error that escaped the script, as Redis replies it: `<msg> script: <sha>, on <source>:<line>.` */
function escapedError(L: LuaState, sha: string): RedisError {
  const top = lua.lua_gettop(L);
  if (lua.lua_type(L, top) !== lua.LUA_TTABLE) {
    return new RedisError(
      `ERR Error running script (call to f_${sha}): @user_script: ${lua.lua_tojsstring(L, top)}`,
    );
  }
  const field = (name: string): string | undefined => {
    lua.lua_getfield(L, top, N(name));
    const type = lua.lua_type(L, -1);
    const value = type === lua.LUA_TSTRING || type === lua.LUA_TNUMBER ? formatField(L, type) : undefined;
    lua.lua_pop(L, 1);
    return value;
  };
  const message = field('err') ?? 'ERR unknown error';
  const source = field('source');
  const line = field('line');
  return new RedisError(
    source !== undefined && line !== undefined ? `${message} script: ${sha}, on ${source}:${line}.` : message,
  );
}

function formatField(L: LuaState, type: number): string {
  return type === lua.LUA_TNUMBER ? String(Math.trunc(lua.lua_tonumber(L, -1))) : lua.lua_tojsstring(L, -1);
}

/**
 * A reply as ioredis (replyEncoding 'utf8') hands it to the coordinator: a status as its text, an error element as
 * an Error. What the simulation's node connection returns from a script call.
 */
export function toClientReply(reply: ScriptReply): unknown {
  if (reply === null || typeof reply === 'string' || typeof reply === 'number') return reply;
  if (Array.isArray(reply)) return (reply as readonly ScriptReply[]).map(toClientReply);
  if ('status' in reply) return reply.status;
  if ('error' in reply) return new RedisError(reply.error);
  return reply;
}
