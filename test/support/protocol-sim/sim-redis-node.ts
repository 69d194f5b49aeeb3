/**
 * One simulated Redis node for the deterministic protocol simulation: an in-memory keyspace (lua-redis/keyspace.ts)
 * whose expiry runs on the simulation's clock, and the project's own Lua scripts run on it by the in-process VM
 * (lua-redis/lua-redis.ts). Each protocol method is one script run, atomic as on Redis, with KEYS and ARGV laid out
 * by lua-redis/script-layouts.ts (the coordinator's order) and the reply read by the coordinator's own
 * `interpretReply`; the transport (sim-world.ts) decides when a call reaches the node and whether its reply comes
 * back. There is no model of the scripts here: what a node answers is what the Lua answers.
 *
 * A negative control may run a mutated script (`scriptSources`): the source the coordinator ships with one check
 * taken out, or an older version of a script.
 *
 * The state helpers at the end (`register`, `setRegister`, `setLease`, …) read and write the keys directly, for
 * tests that seed a state or look at one; they go through the keyspace, never around the scripts' key names.
 */
import {
  nodeStateKeys,
  type KeyLayout,
  type NodeStateKeys,
  type ResourceKeys,
} from '../../../packages/coordinator/src/keys/key-layout.js';
import {
  interpretReply,
  splitBatchReply,
  type AcquireReply,
  type ExtendReply,
  type FinishRepairReply,
  type FoldReply,
  type InspectReply,
  type PromiseReply,
  type ReleaseReply,
  type RepairMarkerReply,
  type RepairRaiseReply,
  type RepairReadReply,
  type ScriptName,
  type ScriptReplies,
} from '../../../packages/coordinator/src/scripts/script-results.js';
import { Keyspace } from '../lua-redis/keyspace.js';
import { LuaRedis, toClientReply, type ScriptReply } from '../lua-redis/lua-redis.js';
import { SCRIPT_LAYOUTS, type Layout } from '../lua-redis/script-layouts.js';

/** The key prefix of every simulated node (the coordinator's default). */
export const SIM_PREFIX = 'fenced';

/** The incarnation every simulated node starts with. */
export const FIRST_INCARNATION = 'incarnation-0';

type Keys = Pick<ResourceKeys, 'lease' | 'record' | 'token' | 'channel'>;

function layoutOf(keys: { readonly lease: string; readonly record: string }): KeyLayout {
  return keys.lease === keys.record ? 'fenced' : 'redlock';
}

/** Whether a call was a script error reply: rethrown to the caller as the client would (a vote against). */
export class SimScriptError extends Error {
  override readonly name = 'SimScriptError';
}

export class SimRedisNode {
  readonly keyspace: Keyspace;
  readonly lua: LuaRedis;
  readonly stateKeys: NodeStateKeys;
  /** How many times this node lost its state. */
  amnesias = 0;
  /** Scripts replaced by another source (a negative control's mutant): name → Lua source. */
  readonly scriptSources = new Map<ScriptName, string>();
  /** Every script run on this node, by name (coverage). */
  readonly runs = new Map<ScriptName, number>();

  constructor(
    readonly index: number,
    /** This node's clock (ms): the simulation's virtual time, maybe skewed. */
    now: () => number,
    readonly prefix = SIM_PREFIX,
  ) {
    this.keyspace = new Keyspace({ now });
    this.lua = new LuaRedis(this.keyspace);
    this.stateKeys = nodeStateKeys(prefix);
  }

  /** Runs one script as the coordinator sends it; an error reply throws (as ioredis rejects). */
  private raw(name: ScriptName, layout: Layout): unknown {
    this.runs.set(name, (this.runs.get(name) ?? 0) + 1);
    const mutant = this.scriptSources.get(name);
    let reply: ScriptReply;
    try {
      reply =
        mutant === undefined
          ? this.lua.runScript(name, layout.keys, layout.args)
          : this.lua.eval(mutant, layout.keys, layout.args);
    } catch (error) {
      throw new SimScriptError(`${name} on n${this.index}: ${(error as Error).message}`);
    }
    return toClientReply(reply);
  }

  private run<S extends Exclude<ScriptName, 'acquire' | 'release'>>(
    name: S,
    layout: Layout,
  ): ScriptReplies[S] {
    return interpretReply(name, this.raw(name, layout));
  }

  acquire(
    keys: Pick<Keys, 'lease' | 'record' | 'token'>,
    leaseId: string,
    ttlMs: number,
    proposal: bigint,
    epoch: string,
    nodeCount: number,
  ): AcquireReply {
    const layout = SCRIPT_LAYOUTS.acquire(
      this.stateKeys,
      [{ keys, leaseId, ttl: String(ttlMs), proposal: proposal.toString(), epoch }],
      String(nodeCount),
    );
    const [item] = splitBatchReply('acquire', this.raw('acquire', layout), 1);
    return interpretReply('acquire', item);
  }

  promise(
    keys: Pick<Keys, 'lease' | 'record' | 'token'>,
    leaseId: string,
    proposal: bigint,
    epoch: string,
    nodeCount: number,
  ): PromiseReply {
    return this.run(
      'promise',
      SCRIPT_LAYOUTS.promise(
        this.stateKeys,
        keys,
        leaseId,
        proposal.toString(),
        epoch,
        layoutOf(keys),
        String(nodeCount),
      ),
    );
  }

  extend(
    keys: Pick<Keys, 'lease' | 'record'>,
    leaseId: string,
    ttlMs: number,
    nodeCount: number,
  ): ExtendReply {
    return this.run(
      'extend',
      SCRIPT_LAYOUTS.extend(this.stateKeys, keys, leaseId, String(ttlMs), String(nodeCount)),
    );
  }

  release(keys: Pick<Keys, 'lease' | 'record' | 'channel'>, leaseId: string): ReleaseReply {
    const [item] = splitBatchReply(
      'release',
      this.raw('release', SCRIPT_LAYOUTS.release([{ keys, leaseId }])),
      1,
    );
    return interpretReply('release', item);
  }

  inspect(keys: Pick<Keys, 'lease' | 'record'>): InspectReply {
    return this.run('inspect', SCRIPT_LAYOUTS.inspect(this.stateKeys, keys));
  }

  repairMarker(operation: 'claim' | 'renew', repairId: string, markerTtlMs: number): RepairMarkerReply {
    return this.run(
      'repair-marker',
      SCRIPT_LAYOUTS.repairMarker(this.stateKeys, operation, repairId, String(markerTtlMs)),
    );
  }

  repairRead(cursor: string, count: number, incarnation: string, seal: string): RepairReadReply {
    return this.run(
      'repair-read',
      SCRIPT_LAYOUTS.repairRead(this.stateKeys, this.prefix, cursor, String(count), incarnation, seal),
    );
  }

  repairRaise(
    repairId: string,
    floor: bigint,
    registers: readonly (readonly [string, bigint])[],
    leases: readonly (readonly [string, string, number])[],
  ): RepairRaiseReply {
    return this.run(
      'repair-raise',
      SCRIPT_LAYOUTS.repairRaise(
        this.stateKeys,
        this.prefix,
        repairId,
        floor.toString(),
        registers.map(([key, value]) => [key, value.toString()] as const),
        leases.map(([record, value, pttl]) => [record, value, String(pttl)] as const),
      ),
    );
  }

  finishRepair(
    repairId: string,
    incarnation: string,
    seal: string,
    settings: Readonly<Record<string, string>>,
  ): FinishRepairReply {
    return this.run(
      'finish-repair',
      SCRIPT_LAYOUTS.finishRepair(this.stateKeys, repairId, incarnation, seal, Object.entries(settings)),
    );
  }

  /** One fold.lua step (nodes/fold.ts's pass is a loop of these). */
  fold(cursor: string, count: number, minIdleSeconds: number, passIntervalMs: number): FoldReply {
    return this.run(
      'fold',
      SCRIPT_LAYOUTS.fold(
        this.stateKeys,
        this.prefix,
        cursor,
        String(count),
        String(minIdleSeconds),
        String(passIntervalMs),
      ),
    );
  }

  /**
   * A whole fold pass at once: every idle register (no live lease) goes into the floor. Returns how many were folded;
   * 0 when the node is not initialized or another pass holds the fold lock.
   */
  foldAll(): number {
    let cursor = '0';
    let folded = 0;
    do {
      // An interval of 1 ms: the pass lock never keeps a later pass of the simulation out.
      const reply = this.fold(cursor, 1_000, 0, 1);
      if (reply.kind !== 'folded') return folded;
      folded += reply.folded;
      cursor = reply.cursor;
    } while (cursor !== '0');
    return folded;
  }

  /** Restart without data (a disk loss, persistence off): every key is gone, and the script cache. */
  loseState(): void {
    this.keyspace.flush();
    this.lua.flushScripts();
    this.amnesias++;
  }

  // --- the state, read and written directly (seeding and looking, not protocol) ---

  private set(key: string, value: string, pttlMs?: number): void {
    this.keyspace.command(
      pttlMs === undefined ? ['SET', key, value] : ['SET', key, value, 'PX', String(pttlMs)],
    );
  }

  /** A string key's value, without touching it (OBJECT IDLETIME stays as the scripts left it). */
  private get(key: string): string | null {
    const entry = this.keyspace.peek(key);
    return entry?.value.type === 'string' ? entry.value.value : null;
  }

  /** Gives the node its incarnation key: it votes. */
  initialize(incarnation = FIRST_INCARNATION): void {
    this.set(this.stateKeys.incarnation, incarnation);
  }

  incarnation(): string | null {
    return this.get(this.stateKeys.incarnation);
  }

  floor(): bigint {
    return BigInt(this.get(this.stateKeys.floor) ?? '0');
  }

  setFloor(value: bigint): void {
    this.set(this.stateKeys.floor, value.toString());
  }

  /** The register's own value (not max(register, floor)); undefined when absent. */
  register(tokenKey: string): bigint | undefined {
    const value = this.get(tokenKey);
    return value === null ? undefined : BigInt(value);
  }

  /** What the node answers for a resource: max(register, floor). */
  answer(tokenKey: string): bigint {
    const register = this.register(tokenKey);
    const floor = this.floor();
    return register !== undefined && register > floor ? register : floor;
  }

  setRegister(tokenKey: string, value: bigint): void {
    this.set(tokenKey, value.toString());
  }

  deleteKey(key: string): void {
    this.keyspace.command(['DEL', key]);
  }

  seal(): string {
    return this.get(this.stateKeys.seal) ?? '';
  }

  setSeal(epoch: string): void {
    this.set(this.stateKeys.seal, epoch);
  }

  /** A live lease (its record `<holder>|<token>` and when it expires on this node's clock), or undefined. */
  lease(keys: Pick<Keys, 'record'>): { holder: string; token: bigint; expiresAt: number } | undefined {
    const entry = this.keyspace.peek(keys.record);
    if (entry?.value.type !== 'string') return undefined;
    const value = entry.value.value;
    const bar = value.lastIndexOf('|');
    return {
      holder: value.slice(0, bar),
      token: BigInt(value.slice(bar + 1)),
      expiresAt: Number(entry.expireAt ?? BigInt(Number.MAX_SAFE_INTEGER)),
    };
  }

  /** Writes a lease as acquire.lua would (record, and the lease key in the 'redlock' layout). */
  setLease(keys: Pick<Keys, 'lease' | 'record'>, holder: string, token: bigint, pttlMs: number): void {
    this.set(keys.record, `${holder}|${token}`, pttlMs);
    if (keys.lease !== keys.record) this.set(keys.lease, holder, pttlMs);
  }

  settings(): Record<string, string> {
    const flat = this.keyspace.command(['HGETALL', this.stateKeys.settings]) as string[];
    const out: Record<string, string> = {};
    for (let i = 0; i < flat.length; i += 2) out[flat[i]!] = flat[i + 1]!;
    return out;
  }

  setSettings(settings: Readonly<Record<string, string>>): void {
    this.keyspace.command(['DEL', this.stateKeys.settings]);
    const flat = Object.entries(settings).flat();
    if (flat.length > 0) this.keyspace.command(['HSET', this.stateKeys.settings, ...flat]);
  }

  /** Sets a repair marker (another process's repair in progress). */
  setMarker(repairId: string, pttlMs: number): void {
    this.set(this.stateKeys.repair, repairId, pttlMs);
  }

  /** The token registers this node holds, key → value. */
  registers(): Map<string, bigint> {
    const out = new Map<string, bigint>();
    for (const key of this.keyspace.liveKeys()) {
      const value = this.get(key);
      if (key.endsWith(':token') && value !== null) out.set(key, BigInt(value));
    }
    return out;
  }
}
