/**
 * An in-memory Redis 7.0 keyspace: every command the coordinator's Lua scripts call (grep `redis.call` in
 * packages/coordinator/lua), with Redis's own argument parsing, error replies, expiry and key order, on a clock the
 * caller injects (`now()`, in milliseconds), so that the deterministic simulation can run the real scripts
 * (lua-redis.ts) over it.
 *
 * Semantics kept from the Redis 7.0 sources, each checked against a real `redis-server` by
 * test/integration/lua-redis/differential.test.ts where a standalone server can show it:
 * - A key with an expiry `when` is alive while `now <= when` (db.c keyIsExpired: expired iff `now > when`); PTTL
 *   answers `max(0, when - now)`, -1 without expiry, -2 for no key. Inside a script the time stands still: the
 *   VM freezes `now` for the whole call (`frozen`), as Redis 7.0 does with its script time snapshot.
 * - SET's options (NX, XX, GET, KEEPTTL, EX, PX, EXAT, PXAT) and PEXPIRE's (NX, XX, GT, LT) parse as in t_string.c
 *   and expire.c, with the same errors: a non-integer is "value is not an integer or out of range", a ttl that is
 *   not positive or overflows once added to the clock is "invalid expire time in '<cmd>' command". Integers follow
 *   string2ll (no sign '+', no leading zero, signed 64-bit) and are kept as bigint where they can exceed 2^53.
 * - OBJECT IDLETIME is whole seconds since the last access; GET, HGET, HMGET, HGETALL, MGET, PEXPIRE and every write touch
 *   a key, EXISTS, PTTL, SCAN and OBJECT do not (db.c LOOKUP_NOTOUCH).
 * - HGETALL answers in insertion order (a small hash is a listpack); MGET answers nil for a key of another type.
 * - SCAN: Redis's order depends on a hash seed chosen at start-up, so no emulator can reproduce it; what the
 *   scripts may rely on is its guarantee, kept here: every key present for a whole iteration is returned (here
 *   exactly once), COUNT bounds the keys examined before MATCH filters them (so a call may return nothing with a
 *   non-zero cursor), expired keys are skipped. Keys are ordered by a 32-bit FNV-1a hash and the cursor is the next
 *   hash to examine (masked to 32 bits, as Redis masks it with its table size), so a key added or removed between
 *   calls moves no other key.
 * - A Cluster member's shard keeps its keys per slot (keySlot, the coordinator's own CRC16 in keys/slots.ts),
 *   serves a set of slots, answers CLUSTER MYID, COUNTKEYSINSLOT and GETKEYSINSLOT (newest key first: Redis 7.0 prepends a
 *   key to its slot's list), refuses a script's access to a key of a slot it does not serve (or of a slot it is
 *   migrating away when the key is no longer here), and moves keys to another shard in batches like MIGRATE
 *   (`migrateSlotKeys`).
 *
 * Strings are kept as JavaScript strings (UTF-8 decoded), which is exact for the project's keys and values (ASCII).
 */
import { keySlot, SLOT_COUNT } from '../../../packages/coordinator/src/keys/slots.js';

/** A Redis error reply: `message` is the whole line without the leading '-', e.g. `ERR syntax error`. */
export class RedisError extends Error {
  override readonly name = 'RedisError';
}

/** A status reply (`+OK`). */
export interface StatusReply {
  readonly status: string;
}

/** A RESP2 reply: bulk string, integer, nil, array, status. Errors are thrown as RedisError. */
export type Reply = string | number | null | StatusReply | readonly Reply[];

export type StoredValue =
  | { readonly type: 'string'; readonly value: string }
  | { readonly type: 'hash'; readonly value: Map<string, string> };

interface Entry {
  value: StoredValue;
  /** Absolute expiry in ms, or undefined for none. A bigint: PX/PXAT may reach 2^63 - 1. */
  expireAt: bigint | undefined;
  /** Last access (ms on the keyspace's clock), for OBJECT IDLETIME. */
  lru: number;
}

/** A key as dumped for a comparison or a restart: type, value and remaining ttl (undefined: none). */
export interface KeyDump {
  readonly key: string;
  readonly value: StoredValue;
  readonly pttlMs: number | undefined;
}

const INT64_MAX = (1n << 63n) - 1n;
const INT64_MIN = -(1n << 63n);
const OK: StatusReply = Object.freeze({ status: 'OK' });

function wrongType(): RedisError {
  return new RedisError('WRONGTYPE Operation against a key holding the wrong kind of value');
}

function notInteger(): RedisError {
  return new RedisError('ERR value is not an integer or out of range');
}

function syntaxError(): RedisError {
  return new RedisError('ERR syntax error');
}

function wrongArity(command: string): RedisError {
  return new RedisError(`ERR wrong number of arguments for '${command}' command`);
}

function expireTimeError(command: string): RedisError {
  return new RedisError(`ERR invalid expire time in '${command}' command`);
}

/** string2ll: an optional '-', then '0' alone or a digit 1-9 and digits; within signed 64 bits. */
export function parseInt64(text: string): bigint | undefined {
  if (!/^(0|-?[1-9][0-9]{0,19})$/.test(text)) return undefined;
  const value = BigInt(text);
  return value > INT64_MAX || value < INT64_MIN ? undefined : value;
}

function int64OrError(text: string): bigint {
  const value = parseInt64(text);
  if (value === undefined) throw notInteger();
  return value;
}

/** FNV-1a, 32 bits: the SCAN order (see the header). */
function scanHash(key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** Redis's glob (util.c stringmatchlen): `*`, `?`, `[...]` with ranges and `^`, and `\` escapes. */
export function globMatch(pattern: string, text: string): boolean {
  const match = (p: number, t: number): boolean => {
    while (p < pattern.length) {
      const c = pattern[p]!;
      if (c === '*') {
        while (pattern[p + 1] === '*') p++;
        if (p + 1 === pattern.length) return true;
        for (let i = t; i <= text.length; i++) if (match(p + 1, i)) return true;
        return false;
      }
      if (t >= text.length) return false;
      if (c === '?') {
        p++;
        t++;
        continue;
      }
      if (c === '[') {
        p++;
        const not = pattern[p] === '^';
        if (not) p++;
        let found = false;
        while (p < pattern.length && pattern[p] !== ']') {
          if (pattern[p] === '\\' && p + 1 < pattern.length) {
            p++;
            if (pattern[p] === text[t]) found = true;
          } else if (pattern[p + 1] === '-' && p + 2 < pattern.length && pattern[p + 2] !== ']') {
            let start = pattern.charCodeAt(p);
            let end = pattern.charCodeAt(p + 2);
            if (start > end) [start, end] = [end, start];
            const code = text.charCodeAt(t);
            if (code >= start && code <= end) found = true;
            p += 2;
          } else if (pattern[p] === text[t]) {
            found = true;
          }
          p++;
        }
        if (not) found = !found;
        if (!found) return false;
        p++; // the ']' (or the end of a pattern that never closed it)
        t++;
        continue;
      }
      if (c === '\\' && p + 1 < pattern.length) p++;
      if (pattern[p] !== text[t]) return false;
      p++;
      t++;
    }
    return t === text.length;
  };
  return match(0, 0);
}

/** Who listens on PUBLISH: the number it returns. */
export type Subscribers = (channel: string, message: string) => number;

export interface KeyspaceOptions {
  /** The clock, in ms (the simulation's virtual time for this node). */
  readonly now: () => number;
  /** A Cluster shard serving these slots; absent: a standalone server (CLUSTER commands are refused). */
  readonly clusterSlots?: Iterable<number>;
  /** Delivers PUBLISH; absent: nobody listens (PUBLISH answers 0). */
  readonly subscribers?: Subscribers;
  /** A Cluster shard's node id (CLUSTER MYID: 40 hex digits). @defaultValue 40 zeros */
  readonly nodeId?: string;
}

/** Why a key of a Cluster shard cannot be reached here (see `checkLocal`). */
const NON_LOCAL = 'ERR Script attempted to access a non local key in a cluster node';

/**
 * One Redis server's data: a standalone server, or one master (shard) of a Cluster member. Commands run through
 * `command(argv)`, one at a time, as Redis runs them.
 */
export class Keyspace {
  /** Keys by slot (slot 0 only, for a standalone server). A Map keeps insertion order: the newest key is last. */
  private readonly slots = new Map<number, Map<string, Entry>>();
  private readonly served: Set<number> | undefined;
  /** Slots this shard is moving away (MIGRATING) and receiving (IMPORTING). */
  readonly migrating = new Set<number>();
  readonly importing = new Set<number>();
  private frozenAt: number | undefined;

  constructor(readonly options: KeyspaceOptions) {
    if (options.clusterSlots !== undefined) {
      this.served = new Set();
      for (const slot of options.clusterSlots) {
        if (!Number.isInteger(slot) || slot < 0 || slot >= SLOT_COUNT) {
          throw new RangeError(
            `clusterSlots must hold integers from 0 to ${SLOT_COUNT - 1}; got ${String(slot)} (${typeof slot})`,
          );
        }
        this.served.add(slot);
      }
    }
  }

  get isCluster(): boolean {
    return this.served !== undefined;
  }

  /** The clock as commands see it: frozen for the length of a script (`frozen`). */
  now(): number {
    return this.frozenAt ?? this.options.now();
  }

  /** Runs `body` with the clock stopped at its current reading: Redis 7.0's script time snapshot. */
  frozen<T>(body: () => T): T {
    const outer = this.frozenAt;
    this.frozenAt = this.now();
    try {
      return body();
    } finally {
      this.frozenAt = outer;
    }
  }

  /** The slot a key is stored in here: its Cluster slot, or 0 on a standalone server. */
  slotOf(key: string): number {
    return this.served === undefined ? 0 : keySlot(key);
  }

  servesSlot(slot: number): boolean {
    return this.served === undefined || this.served.has(slot);
  }

  /** This shard now serves `slot` (the end of a migration towards it), or no longer does. */
  setServed(slot: number, served: boolean): void {
    if (this.served === undefined) throw new Error('setServed: a standalone server serves every key');
    if (served) this.served.add(slot);
    else this.served.delete(slot);
  }

  /**
   * Whether a script may touch `key` here (cluster.c getNodeByQuery, for a script without a shebang, which may use
   * undeclared keys of several slots): its slot must be served here, and a slot being migrated away answers only
   * for keys still here (else Redis would redirect with ASK, which a script cannot follow).
   */
  checkLocal(key: string): void {
    if (this.served === undefined) return;
    const slot = keySlot(key);
    if (!this.served.has(slot)) throw new RedisError(NON_LOCAL);
    if (this.migrating.has(slot) && this.peek(key) === undefined) throw new RedisError(NON_LOCAL);
  }

  private slotMap(slot: number, create: boolean): Map<string, Entry> | undefined {
    let map = this.slots.get(slot);
    if (map === undefined && create) {
      map = new Map();
      this.slots.set(slot, map);
    }
    return map;
  }

  private isExpired(entry: Entry): boolean {
    return entry.expireAt !== undefined && BigInt(this.now()) > entry.expireAt;
  }

  /** The live entry of `key` without touching it; an expired one is deleted (Redis's lazy expiry). */
  /** For the command table. */
  peek(key: string): Entry | undefined {
    const map = this.slotMap(this.slotOf(key), false);
    const entry = map?.get(key);
    if (entry === undefined) return undefined;
    if (this.isExpired(entry)) {
      map!.delete(key);
      return undefined;
    }
    return entry;
  }

  /** The live entry of `key`, marked as accessed now (OBJECT IDLETIME restarts). */
  /** For the command table. */
  lookup(key: string): Entry | undefined {
    const entry = this.peek(key);
    if (entry !== undefined) entry.lru = this.now();
    return entry;
  }

  /** For the command table. */
  stringAt(key: string): string | undefined {
    const entry = this.lookup(key);
    if (entry === undefined) return undefined;
    if (entry.value.type !== 'string') throw wrongType();
    return entry.value.value;
  }

  /** For the command table. */
  hashAt(key: string, create: boolean): Map<string, string> | undefined {
    const entry = this.lookup(key);
    if (entry !== undefined) {
      if (entry.value.type !== 'hash') throw wrongType();
      return entry.value.value;
    }
    if (!create) return undefined;
    const hash = new Map<string, string>();
    this.write(key, { type: 'hash', value: hash }, undefined, false);
    return hash;
  }

  /**
   * setKey: a new value; the expiry is kept with `keepTtl`, else replaced by `expireAt`. A key that exists keeps its
   * place in its slot's order (Redis overwrites the dict entry in place); a new key is the newest.
   */
  /** For the command table. */
  write(key: string, value: StoredValue, expireAt: bigint | undefined, keepTtl: boolean): void {
    const map = this.slotMap(this.slotOf(key), true)!;
    const existing = this.peek(key);
    if (existing !== undefined) {
      existing.value = value;
      if (!keepTtl) existing.expireAt = expireAt;
      existing.lru = this.now();
      return;
    }
    map.set(key, { value, expireAt, lru: this.now() });
  }

  /** For the command table. */
  remove(key: string): boolean {
    const existed = this.peek(key) !== undefined;
    if (existed) this.slotMap(this.slotOf(key), false)!.delete(key);
    return existed;
  }

  /** Every live key, slot by slot, oldest first within a slot. */
  /** For the command table. */
  liveKeys(): string[] {
    const keys: string[] = [];
    for (const map of this.slots.values()) {
      for (const [key, entry] of map) {
        if (this.isExpired(entry)) map.delete(key);
        else keys.push(key);
      }
    }
    return keys;
  }

  /** Runs one command. Throws RedisError for an error reply. */
  command(argv: readonly string[]): Reply {
    if (argv.length === 0) throw new RedisError('ERR empty command');
    const name = argv[0]!.toLowerCase();
    const handler = COMMANDS[name];
    if (handler === undefined) throw new RedisError(`ERR unknown command '${argv[0]}'`);
    if (handler.arity > 0 ? argv.length !== handler.arity : argv.length < -handler.arity) {
      throw wrongArity(name);
    }
    return handler.run(this, argv);
  }

  /** The argument positions of `argv` that are keys (for `checkLocal`); none for a command without keys. */
  static keyPositions(argv: readonly string[]): number[] {
    const name = argv[0]?.toLowerCase();
    const handler = name === undefined ? undefined : COMMANDS[name];
    return handler?.keys?.(argv) ?? [];
  }

  /** Whether `name` is a command this keyspace implements (with its arity, for the script-level check). */
  static arity(name: string): number | undefined {
    return COMMANDS[name.toLowerCase()]?.arity;
  }

  // --- state, for tests, restarts and migration ---

  /** Every live key with its value and remaining ttl, sorted by key. */
  dump(): KeyDump[] {
    const now = BigInt(this.now());
    return this.liveKeys()
      .sort()
      .map((key) => {
        const entry = this.peek(key)!;
        return {
          key,
          value: cloneValue(entry.value),
          pttlMs: entry.expireAt === undefined ? undefined : Number(entry.expireAt - now),
        };
      });
  }

  /** Sets a key as a client would (SET or HSET, then PEXPIRE), without the command checks: to build a state. */
  load(dump: KeyDump): void {
    const expireAt = dump.pttlMs === undefined ? undefined : BigInt(this.now()) + BigInt(dump.pttlMs);
    this.remove(dump.key);
    this.write(dump.key, cloneValue(dump.value), expireAt, false);
  }

  /** Everything is gone (a restart without data). */
  flush(): void {
    this.slots.clear();
  }

  /** CLUSTER GETKEYSINSLOT order: newest first. Expired keys are dropped first (as the active expiry would). */
  keysInSlot(slot: number): string[] {
    const map = this.slotMap(slot, false);
    if (map === undefined) return [];
    const keys: string[] = [];
    for (const [key, entry] of map) {
      if (this.isExpired(entry)) map.delete(key);
      else keys.push(key);
    }
    return keys.reverse();
  }

  /** Removes `key` and returns what MIGRATE carries (DUMP plus the remaining ttl), or undefined if it is gone. */
  takeForMigration(key: string): KeyDump | undefined {
    const entry = this.peek(key);
    if (entry === undefined) return undefined;
    const pttlMs = entry.expireAt === undefined ? undefined : Number(entry.expireAt - BigInt(this.now()));
    this.remove(key);
    return { key, value: entry.value, pttlMs };
  }
}

function cloneValue(value: StoredValue): StoredValue {
  return value.type === 'string' ? value : { type: 'hash', value: new Map(value.value) };
}

/**
 * MIGRATE for one batch: moves up to `count` keys of `slot` from `source` to `target` (RESTORE there with the
 * remaining ttl, then DEL here, one key at a time as MIGRATE with KEYS does), in GETKEYSINSLOT order. A key that
 * already exists on the target is replaced (MIGRATE ... REPLACE). Returns how many keys moved. The slot states
 * (MIGRATING on the source, IMPORTING on the target) are the caller's: `beginSlotMigration` sets them.
 */
export function migrateSlotKeys(source: Keyspace, target: Keyspace, slot: number, count: number): number {
  if (!Number.isInteger(count) || count < 1) {
    throw new RangeError(`count must be a positive integer; got ${String(count)} (${typeof count})`);
  }
  let moved = 0;
  for (const key of source.keysInSlot(slot).slice(0, count)) {
    const dump = source.takeForMigration(key);
    if (dump === undefined) continue;
    target.load(dump);
    moved++;
  }
  return moved;
}

/** CLUSTER SETSLOT MIGRATING on the source and IMPORTING on the target. */
export function beginSlotMigration(source: Keyspace, target: Keyspace, slot: number): void {
  source.migrating.add(slot);
  target.importing.add(slot);
}

/** CLUSTER SETSLOT NODE: the target serves `slot` from now on (after the last batch, or a cancelled move). */
export function assignSlot(slot: number, owner: Keyspace, others: readonly Keyspace[]): void {
  for (const shard of [owner, ...others]) {
    shard.migrating.delete(slot);
    shard.importing.delete(slot);
    shard.setServed(slot, shard === owner);
  }
}

interface CommandSpec {
  /** Redis's arity: positive = exact argument count (command name included), negative = at least. */
  readonly arity: number;
  readonly keys?: (argv: readonly string[]) => number[];
  readonly run: (ks: Keyspace, argv: readonly string[]) => Reply;
}

const firstKey = (): number[] => [1];
const allKeys = (argv: readonly string[]): number[] => argv.map((_, i) => i).slice(1);

/** The command table: each entry follows the Redis 7.0 command of the same name (see the file header). */
const COMMANDS: Readonly<Record<string, CommandSpec>> = {
  get: {
    arity: 2,
    keys: firstKey,
    run: (ks, [, key]) => ks.stringAt(key!) ?? null,
  },
  set: { arity: -3, keys: firstKey, run: (ks, argv) => setCommand(ks, argv) },
  del: {
    arity: -2,
    keys: allKeys,
    run: (ks, argv) => argv.slice(1).filter((key) => ks.remove(key)).length,
  },
  exists: {
    arity: -2,
    keys: allKeys,
    run: (ks, argv) => argv.slice(1).filter((key) => ks.peek(key) !== undefined).length,
  },
  pexpire: { arity: -3, keys: firstKey, run: (ks, argv) => pexpireCommand(ks, argv) },
  pttl: {
    arity: 2,
    keys: firstKey,
    run: (ks, [, key]) => {
      const entry = ks.peek(key!);
      if (entry === undefined) return -2;
      if (entry.expireAt === undefined) return -1;
      const ttl = entry.expireAt - BigInt(ks.now());
      return ttl < 0n ? 0 : Number(ttl);
    },
  },
  hset: {
    arity: -4,
    keys: firstKey,
    run: (ks, argv) => {
      if (argv.length % 2 !== 0) throw wrongArity('hset');
      const hash = ks.hashAt(argv[1]!, true)!;
      let added = 0;
      for (let i = 2; i < argv.length; i += 2) {
        if (!hash.has(argv[i]!)) added++;
        hash.set(argv[i]!, argv[i + 1]!);
      }
      return added;
    },
  },
  hsetnx: {
    arity: 4,
    keys: firstKey,
    run: (ks, [, key, field, value]) => {
      const hash = ks.hashAt(key!, true)!;
      if (hash.has(field!)) return 0;
      hash.set(field!, value!);
      return 1;
    },
  },
  hget: {
    arity: 3,
    keys: firstKey,
    run: (ks, [, key, field]) => ks.hashAt(key!, false)?.get(field!) ?? null,
  },
  hmget: {
    arity: -3,
    keys: firstKey,
    run: (ks, argv) => {
      const hash = ks.hashAt(argv[1]!, false);
      return argv.slice(2).map((field) => hash?.get(field) ?? null);
    },
  },
  hgetall: {
    arity: 2,
    keys: firstKey,
    run: (ks, [, key]) => [...(ks.hashAt(key!, false) ?? new Map<string, string>())].flat(),
  },
  mget: {
    arity: -2,
    keys: allKeys,
    run: (ks, argv) =>
      argv.slice(1).map((key) => {
        const entry = ks.lookup(key);
        return entry?.value.type === 'string' ? entry.value.value : null;
      }),
  },
  mset: {
    arity: -3,
    keys: (argv) => allKeys(argv).filter((i) => i % 2 === 1),
    run: (ks, argv) => {
      if (argv.length % 2 === 0) throw wrongArity('mset');
      for (let i = 1; i < argv.length; i += 2) {
        ks.write(argv[i]!, { type: 'string', value: argv[i + 1]! }, undefined, false);
      }
      return OK;
    },
  },
  scan: { arity: -2, run: (ks, argv) => scanCommand(ks, argv) },
  object: {
    arity: -2,
    keys: (argv) => (argv.length >= 3 ? [2] : []),
    run: (ks, argv) => {
      const sub = argv[1]!.toLowerCase();
      if (sub !== 'idletime') {
        throw new RedisError(`ERR unknown subcommand '${argv[1]}'. Try OBJECT HELP.`);
      }
      if (argv.length !== 3) throw wrongArity('object|idletime');
      const entry = ks.peek(argv[2]!);
      return entry === undefined ? null : Math.floor((ks.now() - entry.lru) / 1000);
    },
  },
  publish: {
    arity: 3,
    run: (ks, [, channel, message]) => ks.options.subscribers?.(channel!, message!) ?? 0,
  },
  cluster: { arity: -2, run: (ks, argv) => clusterCommand(ks, argv) },
};

/** An absolute expiry from a relative or absolute argument (t_string.c getExpireMillisecondsOrReply). */
function expireAtFrom(ks: Keyspace, text: string, unit: 'EX' | 'PX' | 'EXAT' | 'PXAT'): bigint {
  let ms = int64OrError(text);
  const seconds = unit === 'EX' || unit === 'EXAT';
  if (ms <= 0n || (seconds && ms > INT64_MAX / 1000n)) throw expireTimeError('set');
  if (seconds) ms *= 1000n;
  if (unit === 'EX' || unit === 'PX') ms += BigInt(ks.now());
  // Redis adds in signed 64 bits: a sum past the maximum wraps negative and is refused.
  if (ms > INT64_MAX || ms <= 0n) throw expireTimeError('set');
  return ms;
}

function setCommand(ks: Keyspace, argv: readonly string[]): Reply {
  const [, key, value] = argv as [string, string, string];
  let nx = false;
  let xx = false;
  let get = false;
  let keepTtl = false;
  let expire: { unit: 'EX' | 'PX' | 'EXAT' | 'PXAT'; text: string } | undefined;
  for (let i = 3; i < argv.length; i++) {
    const option = argv[i]!.toUpperCase();
    const next = argv[i + 1];
    if (option === 'NX' && !xx) nx = true;
    else if (option === 'XX' && !nx) xx = true;
    else if (option === 'GET') get = true;
    else if (option === 'KEEPTTL' && expire === undefined) keepTtl = true;
    else if (
      (option === 'EX' || option === 'PX' || option === 'EXAT' || option === 'PXAT') &&
      !keepTtl &&
      expire === undefined &&
      next !== undefined
    ) {
      expire = { unit: option, text: next };
      i++;
    } else throw syntaxError();
  }
  const expireAt = expire === undefined ? undefined : expireAtFrom(ks, expire.text, expire.unit);
  const old = get ? ks.stringAt(key) : undefined;
  const found = ks.peek(key) !== undefined;
  if ((nx && found) || (xx && !found)) return get ? (old ?? null) : null;
  ks.write(key, { type: 'string', value }, expireAt, keepTtl);
  return get ? (old ?? null) : OK;
}

function pexpireCommand(ks: Keyspace, argv: readonly string[]): Reply {
  const [, key, ttl] = argv as [string, string, string];
  let nx = false;
  let xx = false;
  let gt = false;
  let lt = false;
  for (const raw of argv.slice(3)) {
    const option = raw.toUpperCase();
    if (option === 'NX') nx = true;
    else if (option === 'XX') xx = true;
    else if (option === 'GT') gt = true;
    else if (option === 'LT') lt = true;
    else throw new RedisError(`ERR Unsupported option ${raw}`);
  }
  if (nx && (xx || gt || lt)) {
    throw new RedisError('ERR NX and XX, GT or LT options at the same time are not compatible');
  }
  if (gt && lt) throw new RedisError('ERR GT and LT options at the same time are not compatible');
  let when = int64OrError(ttl);
  const now = BigInt(ks.now());
  if (when > INT64_MAX - now) throw expireTimeError('pexpire');
  when += now;
  const entry = ks.lookup(key);
  if (entry === undefined) return 0;
  const current = entry.expireAt;
  if (nx && current !== undefined) return 0;
  if (xx && current === undefined) return 0;
  // A key without expiry counts as an infinite ttl for GT and LT.
  if (gt && (current === undefined || when <= current)) return 0;
  if (lt && current !== undefined && when >= current) return 0;
  if (when <= now) {
    ks.remove(key);
    return 1;
  }
  entry.expireAt = when;
  return 1;
}

function scanCommand(ks: Keyspace, argv: readonly string[]): Reply {
  const cursorText = argv[1]!;
  // parseScanCursorOrReply: an unsigned 64-bit decimal.
  if (!/^[0-9]+$/.test(cursorText) || BigInt(cursorText) >= 1n << 64n) {
    throw new RedisError('ERR invalid cursor');
  }
  const cursor = BigInt(cursorText);
  let count = 10n;
  let pattern: string | undefined;
  let type: string | undefined;
  for (let i = 2; i < argv.length; i += 2) {
    const option = argv[i]!.toUpperCase();
    const value = argv[i + 1];
    if (value === undefined) throw syntaxError();
    if (option === 'COUNT') {
      count = int64OrError(value);
      if (count < 1n) throw syntaxError();
    } else if (option === 'MATCH') pattern = value;
    else if (option === 'TYPE') type = value.toLowerCase();
    else throw syntaxError();
  }
  // Redis masks the cursor with its table's size; this table has 2^32 buckets.
  const start = Number(cursor & 0xffffffffn);
  const ordered = ks
    .liveKeys()
    .map((key) => ({ key, hash: scanHash(key) }))
    .filter((k) => k.hash >= start)
    .sort((a, b) => a.hash - b.hash || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const examined: typeof ordered = [];
  for (const k of ordered) {
    // A bucket (one hash) is examined whole, as Redis visits a whole dict bucket.
    if (
      examined.length >= Number(count > 1_000_000n ? 1_000_000n : count) &&
      k.hash !== examined.at(-1)!.hash
    ) {
      break;
    }
    examined.push(k);
  }
  const last = examined.at(-1);
  const next = last === undefined || examined.length === ordered.length ? 0 : last.hash + 1;
  const keys = examined
    .map((k) => k.key)
    .filter((key) => pattern === undefined || globMatch(pattern, key))
    .filter((key) => type === undefined || ks.peek(key)?.value.type === type);
  return [String(next), keys];
}

function clusterCommand(ks: Keyspace, argv: readonly string[]): Reply {
  if (!ks.isCluster) throw new RedisError('ERR This instance has cluster support disabled');
  const sub = argv[1]!.toUpperCase();
  const slotOf = (text: string): number => {
    const slot = parseInt64(text);
    if (slot === undefined || slot < 0n || slot >= BigInt(SLOT_COUNT))
      throw new RedisError('ERR Invalid slot');
    return Number(slot);
  };
  if (sub === 'MYID') {
    if (argv.length !== 2) throw wrongArity('cluster|myid');
    return ks.options.nodeId ?? '0'.repeat(40);
  }
  if (sub === 'COUNTKEYSINSLOT') {
    if (argv.length !== 3) throw wrongArity('cluster|countkeysinslot');
    return ks.keysInSlot(slotOf(argv[2]!)).length;
  }
  if (sub === 'GETKEYSINSLOT') {
    if (argv.length !== 4) throw wrongArity('cluster|getkeysinslot');
    const count = parseInt64(argv[3]!);
    const slot = parseInt64(argv[2]!);
    if (count === undefined || slot === undefined) throw notInteger();
    if (count < 0n || slot < 0n || slot >= BigInt(SLOT_COUNT)) {
      throw new RedisError('ERR Invalid slot or number of keys');
    }
    return ks.keysInSlot(Number(slot)).slice(0, Number(count > 1_000_000n ? 1_000_000n : count));
  }
  throw new RedisError(`ERR unknown subcommand '${argv[1]}'. Try CLUSTER HELP.`);
}
