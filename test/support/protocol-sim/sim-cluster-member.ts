/**
 * A Redis Cluster as one quorum member of the deterministic simulation (DESIGN §3c): two or three shards, each an
 * in-memory keyspace serving its slots with a node id (CLUSTER MYID) and the project's own Lua scripts run on it by
 * the in-process VM, exactly as sim-redis-node.ts runs a standalone node. The member can lose one shard's data (a
 * shard restarted empty: its node id stays, as nodes.conf survives) and move a slot to another shard in batches
 * (MIGRATE, keyspace.ts's `migrateSlotKeys`), the move completed or cancelled half-way.
 *
 * Two halves, as for a standalone node:
 * - `SimCluster` is the servers: the shards and which one serves each slot. A call is routed to the shard serving the
 *   slot of its first key, as the Cluster client follows MOVED at once. While a slot migrates, a script runs on the
 *   exporting shard only when every key it declares is still there; otherwise Redis answers ASK or TRYAGAIN without
 *   running it, and here the call fails (a vote against). (Redis would run it on the importing shard after ASK when
 *   every declared key already moved there; the simulation leaves that case out: it fails too.)
 * - `SimClusterMember` is one process's connection to it, the ClusterMember of the simulation: it keeps the
 *   coordinator's own per-slot state (nodes/node-scopes.ts: which slots vote, each slot's seal epoch), sends every
 *   vote to the resource's slot with that slot's node-state keys (scripts/script-keys.ts through
 *   lua-redis/script-layouts.ts) and epoch, and learns from the replies as NodeConnection does. For the slot repair it
 *   offers the slice of ClusterMember that nodes/cluster/slot-repair.ts calls (`probe` over probe-shard.lua,
 *   `eachSlot`, `script`, `servesSlot`, `scopes`, `keyPrefix`, `resourceKeyStart`), so the coordinator's own
 *   `repairEmptySlots` repairs it; as a repair source of a standalone node it answers `repairRead` as ClusterMember
 *   does (every slot sealed and read whole by repair-read-slot.lua, one reply).
 *
 * Only the slots of the simulation's resources exist here (`slots`): the member's other 16 000-odd slots hold no key
 * and no resource of the run can land in them, so a probe, a fresh initialization or a read visits these slots only
 * (a real member's calls over every slot would read empty slots besides). Those slots start initialized as a
 * fresh-cluster initialization leaves them (a stamped incarnation and its witnesses: include/node-state.lua's
 * `write_witnesses`, and the settings record).
 */
import {
  nodeStateKeys,
  slotKeyTemplate,
  type KeyLayout,
  type ResourceKeys,
} from '../../../packages/coordinator/src/keys/key-layout.js';
import { scriptKeys } from '../../../packages/coordinator/src/scripts/script-keys.js';
import { keySlot, slotTag, SLOT_COUNT } from '../../../packages/coordinator/src/keys/slots.js';
import { ClusterMember } from '../../../packages/coordinator/src/nodes/cluster/cluster-member.js';
import { NodeScopes } from '../../../packages/coordinator/src/nodes/node-scopes.js';
import type { NodeProbe } from '../../../packages/coordinator/src/nodes/node-connection.js';
import type { ProtocolNode } from '../../../packages/coordinator/src/nodes/protocol-node.js';
import type { RepairNode } from '../../../packages/coordinator/src/nodes/repair.js';
import {
  interpretReply,
  splitBatchReply,
  type AcquireReply,
  type FinishRepairReply,
  type RepairMarkerReply,
  type RepairRaiseReply,
  type RepairReadReply,
  type ScriptName,
  type ScriptReplies,
} from '../../../packages/coordinator/src/scripts/script-results.js';
import type { NodeStateKeys } from '../../../packages/coordinator/src/keys/key-layout.js';
import { assignSlot, beginSlotMigration, Keyspace, migrateSlotKeys } from '../lua-redis/keyspace.js';
import { LuaRedis, toClientReply, type ScriptReply } from '../lua-redis/lua-redis.js';
import { SCRIPT_LAYOUTS, type Layout } from '../lua-redis/script-layouts.js';
import { FIRST_INCARNATION, SIM_PREFIX, SimScriptError } from './sim-redis-node.js';
import type { ProcessGate, SimWorld } from './sim-world.js';

type Keys = Pick<ResourceKeys, 'lease' | 'record' | 'token' | 'channel'>;

function layoutOf(keys: { readonly lease: string; readonly record: string }): KeyLayout {
  return keys.lease === keys.record ? 'fenced' : 'redlock';
}

/** One master of the member. */
export interface SimShard {
  readonly id: string;
  readonly keyspace: Keyspace;
  readonly lua: LuaRedis;
  /** How many times this shard restarted empty. */
  amnesias: number;
}

/** A slot moving between two shards. */
export interface SlotMigration {
  readonly slot: number;
  readonly from: number;
  readonly to: number;
  batches: number;
}

/** The servers of one Cluster member: its shards, and which serves each of the simulation's slots. */
export class SimCluster {
  readonly shards: SimShard[];
  /** Scripts replaced by another source (a negative control's mutant): name → Lua source. */
  readonly scriptSources = new Map<ScriptName, string>();
  /** The slots that exist in this simulation (the resources' slots), ascending. */
  readonly slots: readonly number[];
  readonly migrations = new Map<number, SlotMigration>();
  readonly prefix = SIM_PREFIX;

  constructor(
    readonly index: number,
    now: () => number,
    shardCount: number,
    /** The slots of the simulation's resources: shard k serves the k-th, (k + shards)-th, … of them. */
    slots: Iterable<number>,
  ) {
    this.slots = [...new Set(slots)].sort((a, b) => a - b);
    this.shards = Array.from({ length: shardCount }, (_, k) => {
      // The other slots are split in ranges (a real layout); the simulation's own slots round-robin, so that every
      // shard serves some of them whatever their numbers.
      const served = new Set<number>();
      const width = Math.ceil(SLOT_COUNT / shardCount);
      for (let slot = k * width; slot < Math.min(SLOT_COUNT, (k + 1) * width); slot++) served.add(slot);
      this.slots.forEach((slot, i) => {
        if (i % shardCount === k) served.add(slot);
        else served.delete(slot);
      });
      const id = `${(index + 1).toString(16)}${(k + 1).toString(16)}`.padStart(40, '0');
      const keyspace = new Keyspace({ now, clusterSlots: served, nodeId: id });
      return { id, keyspace, lua: new LuaRedis(keyspace), amnesias: 0 };
    });
  }

  /** The shard serving `slot` now. */
  ownerOf(slot: number): number {
    const owner = this.shards.findIndex((shard) => shard.keyspace.servesSlot(slot));
    if (owner === -1) throw new Error(`no shard of member ${this.index} serves slot ${slot}`);
    return owner;
  }

  /** Runs one script on `shard` as the coordinator sends it; an error reply throws (as ioredis rejects). */
  runOn(shard: number, name: ScriptName, layout: Layout): unknown {
    const { lua } = this.shards[shard]!;
    const mutant = this.scriptSources.get(name);
    let reply: ScriptReply;
    try {
      reply =
        mutant === undefined
          ? lua.runScript(name, layout.keys, layout.args)
          : lua.eval(mutant, layout.keys, layout.args);
    } catch (error) {
      throw new SimScriptError(`${name} on m${this.index}.${shard}: ${(error as Error).message}`);
    }
    return toClientReply(reply);
  }

  /**
   * Runs one script where the slot of its first key lives (MOVED followed at once). On a migrating slot a script runs
   * on the exporting shard only while every declared key is still there (else ASK or TRYAGAIN: the call fails).
   */
  run(name: ScriptName, layout: Layout): unknown {
    const slot = keySlot(layout.keys[0]!);
    const owner = this.ownerOf(slot);
    if (this.migrations.has(slot)) {
      const { keyspace } = this.shards[owner]!;
      if (layout.keys.some((key) => keyspace.peek(key) === undefined)) {
        throw new SimScriptError(
          `${name} on m${this.index}.${owner}: TRYAGAIN slot ${slot} is migrating and a key is not here`,
        );
      }
    }
    return this.runOn(owner, name, layout);
  }

  /** Seeds every slot as a fresh-cluster initialization leaves it: a stamped incarnation, its witnesses, the settings. */
  initialize(settings: Readonly<Record<string, string>>): void {
    for (const slot of this.slots) {
      const shard = this.shards[this.ownerOf(slot)]!;
      const k = nodeStateKeys(this.prefix, slot);
      shard.keyspace.command(['SET', k.incarnation, `${FIRST_INCARNATION}@${shard.id}`]);
      shard.keyspace.command(['SET', k.floor, '0']);
      shard.keyspace.command(['SET', k.seal, '']);
      shard.keyspace.command(['HSET', k.settings, ...Object.entries(settings).flat()]);
    }
  }

  /** A shard restarts without its data: every key of its slots and its script cache gone; its node id stays. */
  loseShard(shard: number): void {
    const s = this.shards[shard]!;
    s.keyspace.flush();
    s.lua.flushScripts();
    s.amnesias++;
  }

  /** CLUSTER SETSLOT MIGRATING / IMPORTING: `slot` starts moving to the next shard. False if it already moves. */
  beginMigration(slot: number, to: number): SlotMigration | undefined {
    if (this.migrations.has(slot)) return undefined;
    const from = this.ownerOf(slot);
    if (to === from) return undefined;
    beginSlotMigration(this.shards[from]!.keyspace, this.shards[to]!.keyspace, slot);
    const migration = { slot, from, to, batches: 0 };
    this.migrations.set(slot, migration);
    return migration;
  }

  /** One MIGRATE batch of `count` keys; returns the keys moved (0: the slot is empty on the exporting shard). */
  migrateBatch(migration: SlotMigration, count: number): string[] {
    const source = this.shards[migration.from]!.keyspace;
    const moving = source.keysInSlot(migration.slot).slice(0, count);
    migrateSlotKeys(source, this.shards[migration.to]!.keyspace, migration.slot, count);
    migration.batches++;
    return moving;
  }

  /**
   * CLUSTER SETSLOT NODE on every shard: the importing shard serves the slot from now on, or, for a cancelled move,
   * the exporting one again (the keys already moved stay behind on the other shard, unreachable).
   */
  endMigration(migration: SlotMigration, cancelled: boolean): void {
    const owner = this.shards[cancelled ? migration.from : migration.to]!.keyspace;
    assignSlot(
      migration.slot,
      owner,
      this.shards.map((s) => s.keyspace).filter((k) => k !== owner),
    );
    this.migrations.delete(migration.slot);
  }

  /** Every shard restarts empty at once (the whole member loses its data). */
  loseState(): void {
    for (let shard = 0; shard < this.shards.length; shard++) this.loseShard(shard);
  }

  /** How many times a shard of this member restarted empty. */
  get amnesias(): number {
    return this.shards.reduce((sum, shard) => sum + shard.amnesias, 0);
  }

  /**
   * A fold pass over the member (ClusterMember.fold in one go): on each slot, its token registers folded into the
   * slot's floor by fold-slot.lua where the slot is served (idle time 0). Returns how many were folded.
   */
  foldAll(): number {
    let folded = 0;
    for (const slot of this.slots) {
      if (this.migrations.has(slot)) continue;
      const { keyspace } = this.shards[this.ownerOf(slot)]!;
      const registers = keyspace.keysInSlot(slot).filter((key) => key.endsWith(':token'));
      if (registers.length === 0) continue;
      const k = nodeStateKeys(this.prefix, slot);
      try {
        const reply = interpretReply(
          'fold-slot',
          this.run('fold-slot', { keys: scriptKeys['fold-slot'](k, registers), args: ['0'] }),
        );
        if (reply.kind === 'folded') folded += reply.folded;
      } catch {
        // a refused fold (the slot does not vote) folds nothing
      }
    }
    return folded;
  }

  /**
   * Whether `slot` may vote where it is served now: probe-shard.lua's answer (include/node-state.lua). A migrating
   * slot whose node state already left the exporting shard answers nothing there (taken as not voting).
   */
  slotVotes(slot: number): boolean {
    const owner = this.ownerOf(slot);
    const { head, tails } = slotKeyTemplate(this.prefix);
    try {
      const reply = interpretReply(
        'probe-shard',
        this.runOn(owner, 'probe-shard', {
          keys: [],
          args: [head, tails.incarnation, tails.seal, slotTag(slot), tails.floor, tails.settings],
        }),
      );
      return reply.flags === '1';
    } catch (error) {
      if (this.migrations.has(slot)) return false;
      throw error;
    }
  }

  // --- the state, read directly (coverage signals and checks, not protocol) ---

  private get(slot: number, key: string): string | null {
    const entry = this.shards[this.ownerOf(slot)]!.keyspace.peek(key);
    return entry?.value.type === 'string' ? entry.value.value : null;
  }

  /** The incarnation key of `slot` where it is served now. */
  slotIncarnation(slot: number): string | null {
    return this.get(slot, nodeStateKeys(this.prefix, slot).incarnation);
  }

  /** Whether every slot votes where it is served ('cluster'), or null (some slot must be repaired first). */
  incarnation(): string | null {
    return this.slots.every((slot) => this.slotVotes(slot)) ? 'cluster' : null;
  }

  /** A resource's register where its slot is served now (undefined when absent). */
  register(tokenKey: string): bigint | undefined {
    const value = this.get(keySlot(tokenKey), tokenKey);
    return value === null ? undefined : BigInt(value);
  }

  /** What the slot of `tokenKey` answers now: max(register, the slot's floor). */
  answer(tokenKey: string): bigint {
    const slot = keySlot(tokenKey);
    const register = this.register(tokenKey) ?? 0n;
    const floor = BigInt(this.get(slot, nodeStateKeys(this.prefix, slot).floor) ?? '0');
    return register > floor ? register : floor;
  }

  /** The most a resource's slot holds on any shard (its register or the slot's floor), served there or not. */
  heldAnywhere(tokenKey: string): bigint {
    const slot = keySlot(tokenKey);
    const floorKey = nodeStateKeys(this.prefix, slot).floor;
    let most = 0n;
    for (const { keyspace } of this.shards) {
      for (const key of [tokenKey, floorKey]) {
        const entry = keyspace.peek(key);
        if (entry?.value.type === 'string' && /^\d+$/.test(entry.value.value)) {
          const value = BigInt(entry.value.value);
          if (value > most) most = value;
        }
      }
    }
    return most;
  }

  /** Seeds a register where its slot is served. */
  setRegister(tokenKey: string, value: bigint): void {
    this.shards[this.ownerOf(keySlot(tokenKey))]!.keyspace.command(['SET', tokenKey, value.toString()]);
  }
}

/**
 * One process's connection to a simulated Cluster member: ProtocolNode and RepairNode over the transport, and the
 * slice of ClusterMember that the slot repair calls (see the top of this file). Its prototype chain runs through
 * ClusterMember's, so `instanceof ClusterMember` holds where slot-repair.ts asks it; every method slot-repair.ts
 * calls is defined here, none of ClusterMember's ioredis code runs.
 */
export class SimClusterMember implements ProtocolNode, RepairNode {
  readonly address: string;
  readonly scopes = new NodeScopes(SIM_PREFIX, true);

  constructor(
    private readonly world: SimWorld,
    readonly cluster: SimCluster,
    private readonly caller: string,
    private readonly timerScale = 1,
    readonly nodeCount = 0,
    private readonly gate?: ProcessGate,
  ) {
    this.address = `sim-cluster-${cluster.index}`;
    // Slots outside the simulation hold nothing and are never voted on: taken as voting, so that only a probed
    // empty slot of the simulation is ever repaired.
    this.scopes.setAll(true);
  }

  get index(): number {
    return this.cluster.index;
  }

  get keyPrefix(): string {
    return this.cluster.prefix;
  }

  resourceKeyStart(): string {
    return `${this.cluster.prefix}:{`;
  }

  servesSlot(slot: number): boolean {
    return this.cluster.slots.includes(slot);
  }

  private call<T>(what: string, timeoutMs: number, apply: () => T, where = ''): Promise<T> {
    if (this.gate?.dead === true) return new Promise<T>(() => undefined);
    return this.world.call(
      `${this.caller}->n${this.cluster.index}${where} ${what}`,
      timeoutMs,
      apply,
      this.timerScale,
      this.gate,
    );
  }

  /** NodeConnection.learn: a SEALED reply tells the slot's epoch, NOT_INITIALIZED stops the slot voting here. */
  private learn<R extends { readonly kind: string }>(scope: number, reply: R): R {
    if (reply.kind === 'sealed') this.scopes.sealed(scope, (reply as unknown as { epoch: string }).epoch);
    else if (reply.kind === 'not-initialized') this.scopes.set(scope, false);
    return reply;
  }

  private run<S extends Exclude<ScriptName, 'acquire' | 'release'>>(
    name: S,
    layout: Layout,
  ): ScriptReplies[S] {
    return interpretReply(name, this.cluster.run(name, layout));
  }

  acquire(
    timeoutMs: number,
    keys: Pick<Keys, 'lease' | 'record' | 'token'>,
    leaseId: string,
    ttlMs: number,
    proposal: bigint,
  ): Promise<AcquireReply> {
    const scope = this.scopes.of(keys.record);
    const epoch = this.scopes.epochOf(scope);
    const layout = SCRIPT_LAYOUTS.acquire(
      this.scopes.keysOf(scope),
      [{ keys, leaseId, ttl: String(ttlMs), proposal: proposal.toString(), epoch }],
      String(this.nodeCount),
    );
    return this.call(`acquire t=${proposal}`, timeoutMs, () => {
      const [item] = splitBatchReply('acquire', this.cluster.run('acquire', layout), 1);
      return interpretReply('acquire', item);
    }).then((reply) => this.learn(scope, reply));
  }

  promise(
    timeoutMs: number,
    keys: Pick<Keys, 'lease' | 'record' | 'token'>,
    leaseId: string,
    proposal: bigint,
  ) {
    const scope = this.scopes.of(keys.record);
    const layout = SCRIPT_LAYOUTS.promise(
      this.scopes.keysOf(scope),
      keys,
      leaseId,
      proposal.toString(),
      this.scopes.epochOf(scope),
      layoutOf(keys),
      String(this.nodeCount),
    );
    return this.call(`promise t=${proposal}`, timeoutMs, () => this.run('promise', layout)).then((reply) =>
      this.learn(scope, reply),
    );
  }

  extend(timeoutMs: number, keys: Pick<Keys, 'lease' | 'record'>, leaseId: string, ttlMs: number) {
    const scope = this.scopes.of(keys.record);
    const layout = SCRIPT_LAYOUTS.extend(
      this.scopes.keysOf(scope),
      keys,
      leaseId,
      String(ttlMs),
      String(this.nodeCount),
    );
    return this.call('extend', timeoutMs, () => this.run('extend', layout)).then((reply) =>
      this.learn(scope, reply),
    );
  }

  release(timeoutMs: number, keys: Pick<Keys, 'lease' | 'record' | 'channel'>, leaseId: string) {
    const layout = SCRIPT_LAYOUTS.release([{ keys, leaseId }]);
    return this.call('release', timeoutMs, () => {
      const [item] = splitBatchReply('release', this.cluster.run('release', layout), 1);
      return interpretReply('release', item);
    });
  }

  inspect(timeoutMs: number, keys: Pick<Keys, 'lease' | 'record'>) {
    const scope = this.scopes.of(keys.record);
    const layout = SCRIPT_LAYOUTS.inspect(this.scopes.keysOf(scope), keys);
    return this.call('inspect', timeoutMs, () => this.run('inspect', layout)).then((reply) =>
      this.learn(scope, reply),
    );
  }

  /**
   * ClusterMember.eachSlot: one script per slot (each its own message here), all under one bound; rejects when any
   * call fails.
   */
  eachSlot<R>(
    operation: string,
    timeoutMs: number,
    name: ScriptName,
    keysOf: (k: NodeStateKeys, slot: number) => readonly string[],
    argsOf: (slot: number) => readonly (string | number)[],
    interpret: (raw: unknown) => R,
    slots: readonly number[] = this.cluster.slots,
  ): Promise<R[]> {
    void operation;
    return Promise.all(
      slots.map((slot) => {
        const layout = {
          keys: [...keysOf(this.scopes.keysOf(slot), slot)],
          args: argsOf(slot).map(String),
        };
        const what = name === 'repair-marker' ? `repair-marker ${layout.args[0]}` : name;
        return this.call(what, timeoutMs, () => interpret(this.cluster.run(name, layout)), `/s${slot}`);
      }),
    );
  }

  /** NodeConnection.script: one script, routed by its first key's slot, its reply interpreted. */
  script<S extends Exclude<ScriptName, 'acquire' | 'release'>>(
    name: S,
    timeoutMs: number,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<ScriptReplies[S]> {
    const layout = { keys: [...keys], args: args.map(String) };
    const what = name === 'repair-raise' ? `repair-raise floor=${layout.args[1]}` : name;
    return this.call(what, timeoutMs, () => this.run(name, layout));
  }

  /**
   * ClusterMember.probe, over the simulation's slots: one probe-shard.lua call per shard (the slots it serves, read
   * from the layout when the call lands), each slot's state recorded in `scopes`. Never throws; a shard whose call
   * failed leaves its slots as last seen.
   */
  async probe(timeoutMs: number): Promise<NodeProbe> {
    const { head, tails } = slotKeyTemplate(this.cluster.prefix);
    await Promise.all(
      this.cluster.shards.map((_, shard) =>
        this.call(
          'probe-shard',
          timeoutMs,
          () => {
            const slots = this.cluster.slots.filter((slot) => this.cluster.ownerOf(slot) === shard);
            if (slots.length === 0) return;
            try {
              const reply = interpretReply(
                'probe-shard',
                this.cluster.runOn(shard, 'probe-shard', {
                  keys: [],
                  args: [
                    head,
                    tails.incarnation,
                    tails.seal,
                    slots.map(slotTag).join(','),
                    tails.floor,
                    tails.settings,
                  ],
                }),
              );
              slots.forEach((slot, i) => {
                this.scopes.set(slot, reply.flags.charCodeAt(i) === 49);
                this.scopes.sealed(slot, reply.epochs.get(i + 1) ?? '');
              });
            } catch {
              // As ClusterMember.readSlotChunk: the call refused a key (a slot migrating away), so each slot is read
              // with two GETs; a slot whose keys already left answers ASK and is left as last seen.
              const { keyspace } = this.cluster.shards[shard]!;
              for (const slot of slots) {
                const k = this.scopes.keysOf(slot);
                const incarnation = keyspace.peek(k.incarnation);
                if (incarnation === undefined && this.cluster.migrations.has(slot)) continue;
                const seal = keyspace.peek(k.seal);
                this.scopes.set(slot, incarnation !== undefined);
                this.scopes.sealed(slot, seal?.value.type === 'string' ? seal.value.value : '');
              }
            }
          },
          `.${shard}`,
        ).catch(() => undefined),
      ),
    );
    return { reachable: true, configProblems: [] };
  }

  /**
   * ClusterMember.repairRead: the member as one source of a standalone node's repair, every slot sealed with `seal`
   * and read whole (repair-read-slot.lua), one reply with cursor '0'; a slot that cannot be a source makes the whole
   * member none. The floor is the highest slot floor.
   */
  async repairRead(
    timeoutMs: number,
    cursor: string,
    count: number,
    incarnation: string,
    seal: string,
  ): Promise<RepairReadReply> {
    void count;
    void incarnation;
    if (cursor !== '0' || seal === '') {
      throw new Error('a Redis Cluster member is read as a repair source in one call, sealed');
    }
    const replies = await this.eachSlot(
      'repair-read',
      timeoutMs,
      'repair-read-slot',
      (k) => [k.incarnation, k.repair, k.floor, k.seal, k.settings],
      (slot) => [slot, this.resourceKeyStart(), seal],
      (raw) => interpretReply('repair-read-slot', raw),
    );
    const refused = replies.find((r) => r.kind !== 'read');
    if (refused !== undefined) return refused;
    let floor = 0n;
    let settings: Readonly<Record<string, string>> = {};
    const registers: (readonly [string, bigint])[] = [];
    const leases: (readonly [string, string, number])[] = [];
    replies.forEach((reply, i) => {
      if (reply.kind !== 'read') return;
      this.scopes.sealed(this.cluster.slots[i]!, seal);
      if (reply.floor > floor) floor = reply.floor;
      if (Object.keys(settings).length === 0) settings = reply.settings;
      registers.push(...reply.registers);
      leases.push(...reply.leases);
    });
    return { kind: 'read', incarnation: 'cluster', cursor: '0', floor, settings, registers, leases };
  }

  // A Cluster member is repaired slot by slot (repairEmptySlots), never as one node (repairNode).
  repairMarker(): Promise<RepairMarkerReply> {
    return Promise.reject(new Error('a Cluster member is repaired per slot (repairEmptySlots)'));
  }

  repairRaise(): Promise<RepairRaiseReply> {
    return Promise.reject(new Error('a Cluster member is repaired per slot (repairEmptySlots)'));
  }

  finishRepair(): Promise<FinishRepairReply> {
    return Promise.reject(new Error('a Cluster member is repaired per slot (repairEmptySlots)'));
  }

  /** This connection as the ClusterMember slot-repair.ts takes. */
  asClusterMember(): ClusterMember {
    return this as unknown as ClusterMember;
  }
}

Object.setPrototypeOf(SimClusterMember.prototype, ClusterMember.prototype);
