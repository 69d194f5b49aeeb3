/**
 * A quorum member that is a whole Redis Cluster (DESIGN §3c): the same calls as a standalone node, with every
 * script's keys in one slot and the node state a vote depends on kept per slot, in that slot.
 *
 * Safety argument:
 * - **Atomicity stays per script.** A resource's keys share its hash tag, so they live in one slot s; the node state
 *   each script reads (incarnation, floor, seal epoch, settings, repair and init markers) is built by
 *   `nodeStateKeys(prefix, s)` to live in that same slot (keys/slots.ts). Redis Cluster runs a script on the one
 *   shard serving s, atomically, exactly as a standalone node runs it: the incarnation check, the floor read, the
 *   seal check and the promise are one call. So everything DESIGN §3 argues for one node holds for each (member,
 *   slot) pair, and the quorum arithmetic is over members: for a resource in slot s, member i's vote is the vote of
 *   (i, s), and two majorities of members still meet in a member, hence in the pair (that member, s).
 * - **Batching never crosses a slot.** Acquires and releases are batched per scope (NodeConnection, over
 *   nodes/node-scopes.ts: a slot here), so a batch's keys, shared node-state keys included, are all in one slot.
 * - **Amnesia is per slot.** A shard restarted without its data has lost the incarnation keys of its own slots,
 *   so every script on those slots refuses (NOT_INITIALIZED), whatever this process believes; the other slots
 *   still hold their keys and keep voting. An empty slot is never initialized in place once any slot of any member
 *   was initialized: it is repaired (nodes/cluster/slot-repair.ts) from the same slot of the other members.
 * - **Fresh initialization covers every slot**, through the same mark, check, initialize steps of
 *   nodes/fresh-cluster.ts with each (member, slot) in the role of a node: every slot is marked, then every slot of
 *   every member checked, then each slot initialized only while it still holds its own mark. A step is one call per
 *   master (fresh-init-shard.lua), each of its slots' steps being fresh-init.lua's on that slot's keys; a slot the
 *   call does not answer (it moved: Redis refuses a non-local key inside the script) takes fresh-init.lua alone.
 * - **Seal epochs are cached per slot.** A round carries, for each member, the epoch this process last saw for the
 *   resource's slot; a repair's seal of that slot changes it, and the scripts refuse the old one.
 * - **No failover inside a member.** The start-up check reads every master (appendonly yes, appendfsync always,
 *   noeviction, role master) and every replica's `cluster-replica-no-failover` (it must be `yes`): a replica
 *   promoted after asynchronous replication can miss acknowledged promises while holding its incarnation keys.
 * - **Resharding.** A script that meets ASK or MOVED is sent again where the slot now lives (ioredis Cluster). A
 *   script never runs on a half-migrated slot: while a slot migrates, Redis answers a script whose keys are not all
 *   on the node with ASK or TRYAGAIN, without running it. A slot's node-state keys move with it (they are keys of
 *   that slot); a slot that arrives without them refuses and is repaired.
 *
 * Tests that fail when this breaks: test/integration/coordinator/nodes/cluster/cluster-member.test.ts,
 * test/fault/cluster-amnesia.test.ts (F25 and its negative control).
 */
import ioredis, { type Cluster, type Redis } from 'ioredis';
import {
  interpretReply,
  type FoldReply,
  type FreshInitReply,
  type RepairReadReply,
  type ScriptName,
  type SettingsReply,
} from '../../scripts/script-results.js';
import { isNoScriptError, loadScripts, runScript } from '../../scripts/scripts.js';
import {
  freshMarkKey,
  slotKeyTemplate,
  resourceKeyPattern,
  slotFloorKeyPattern,
  tokenKeyPattern,
  type NodeStateKeys,
  type SlotKeyTemplate,
} from '../../keys/key-layout.js';
import { keySlot, SLOT_COUNT } from '../../keys/slots.js';
import { monotonicNow } from '../../quorum/validity.js';
import {
  NodeConnection,
  waitForReady,
  withTimeout,
  type NodeErrorSink,
  type NodeProbe,
  type ShardStatus,
} from '../node-connection.js';
import {
  configProblems,
  parseConfigReply,
  parseRole,
  REQUIRED_SETTINGS,
  type CheckedSetting,
} from '../node-check.js';
import { clientAddress } from '../node-address.js';
import { scriptKeys } from '../../scripts/script-keys.js';
import { clusterClientOf } from './cluster-client.js';
import type { FreshInitStep } from '../fresh-cluster.js';
import {
  parseClusterSlots,
  sharedRead,
  shardChunksOf,
  type ShardChunk,
  type SlotRange,
} from './slot-layout.js';

const IORedis = ioredis.default;

/** What `replica-no-failover` must be on every replica of a Cluster member. */
const REPLICA_NO_FAILOVER = 'cluster-replica-no-failover';

/** A member's fold cursor between steps: `<index of the master in the pass's list>:<that master's SCAN cursor>`. */
const FOLD_CURSOR = /^(\d+):(\d+)$/;

/** '1', an initialized slot in probe-shard.lua's flags. */
const ONE = 49;
/** Slots read per pipeline by a probe that cannot use probe-shard.lua (two GETs each). */
const PROBE_CHUNK = 512;
/** Per-slot scripts in flight at once in a bulk operation (fresh initialization, settings, repair bookkeeping). */
const SLOT_CHUNK = 512;

/**
 * A Redis Cluster as one quorum member. Calls on a resource go to the shard serving its slot; node state is per
 * slot (see the argument at the top of this file).
 */
export class ClusterMember extends NodeConnection {
  /** The slot layout the last probe read. */
  private layout: SlotRange[] = [];
  /** The masters the running fold pass walks (read when it started), and when this process last took its lock. */
  private foldMasters: Redis[] = [];
  private foldLockTakenAt = 0;
  /** The 'ready' listeners this member put on the Cluster client's node connections. */
  private readonly nodeListeners: [Redis, () => void][] = [];
  /** Every slot's node-state keys as text around the slot's tag, for the scripts over a whole shard. */
  private readonly keyTemplate: SlotKeyTemplate;

  /**
   * The member `node` names: `{ cluster: [seed URLs] }` (a Cluster client made and owned here) or an ioredis Cluster
   * client of yours.
   * @throws InvalidRequestError naming what is wrong with the entry
   */
  static create(
    index: number,
    node: unknown,
    prefix: string,
    reportError: NodeErrorSink,
    connectTimeoutMs: number,
  ): ClusterMember {
    const { cluster, seeds, owned } = clusterClientOf(index, node, connectTimeoutMs);
    return new ClusterMember(index, prefix, reportError, connectTimeoutMs, cluster, seeds, owned);
  }

  private constructor(
    index: number,
    prefix: string,
    reportError: NodeErrorSink,
    connectTimeoutMs: number,
    readonly cluster: Cluster,
    seeds: readonly string[],
    owned: boolean,
  ) {
    const address = `cluster(${seeds.join(',')})`;
    super(
      index,
      {
        prepared: true,
        client: cluster as unknown as Redis,
        address,
        identity: `cluster:${[...seeds]
          .map((s) => s.toLowerCase())
          .sort()
          .join(',')}`,
        owned,
        perSlot: true,
      },
      prefix,
      reportError,
      connectTimeoutMs,
    );
    this.keyTemplate = slotKeyTemplate(prefix);
    // Every master connection (and reconnection) caches the scripts before its calls (no EVAL fallback). The
    // listeners come off in close(): the Cluster client may be yours, serving other coordinators after this one.
    this.listen('+node', (redis: Redis) => {
      const load = (): void => {
        loadScripts(redis).catch((error: unknown) => this.reportError(this.index, 'load-scripts', error));
      };
      if (redis.getMaxListeners() > 0) redis.setMaxListeners(redis.getMaxListeners() + 1);
      redis.on('ready', load);
      this.nodeListeners.push([redis, load]);
    });
  }

  override async close(): Promise<void> {
    for (const [redis, load] of this.nodeListeners.splice(0)) {
      redis.off('ready', load);
      if (redis.getMaxListeners() > 1) redis.setMaxListeners(redis.getMaxListeners() - 1);
    }
    await super.close();
  }

  override get isCluster(): boolean {
    return true;
  }

  /**
   * Each shard as the last probe saw it (up, problems), with its slot counts as they are now: slots voting and
   * slots under repair change with every vote and repair between probes.
   */
  override currentShards(): ShardStatus[] {
    const probed = this.lastProbe?.shards ?? [];
    const byMaster = new Map<string, SlotRange[]>();
    for (const range of this.layout)
      byMaster.set(range.master, [...(byMaster.get(range.master) ?? []), range]);
    return probed.map((shard) => {
      const ranges = byMaster.get(shard.address) ?? [];
      let voting = 0;
      let repairing = 0;
      for (const { start, end } of ranges) {
        for (let slot = start; slot <= end; slot++) {
          if (this.scopes.votes(slot)) voting++;
          if (this.scopes.underRepair.has(slot)) repairing++;
        }
      }
      return { ...shard, votingSlots: voting, slotsUnderRepair: repairing };
    });
  }

  /** Whether the last layout read has a master serving `slot`. */
  servesSlot(slot: number): boolean {
    return this.layout.some((range) => slot >= range.start && slot <= range.end);
  }

  /** The key prefix this member's keys live under. */
  get keyPrefix(): string {
    return this.prefix;
  }

  /** The start of every resource key (`<prefix>:{`): what a slot's read keeps. */
  resourceKeyStart(): string {
    return `${this.prefix}:{`;
  }

  override duplicateSubscriber(options: Record<string, unknown>): Redis {
    // PUBLISH reaches every node of a cluster, so one subscribed connection hears every release.
    return this.cluster.duplicate(undefined, {
      enableOfflineQueue: true,
      enableAutoPipelining: false,
      lazyConnect: false,
      redisOptions: { ...this.cluster.options.redisOptions, autoResubscribe: options['autoResubscribe'] },
    }) as unknown as Redis;
  }

  protected override reloadScripts(force = false): void {
    const cluster = this.client as unknown as Cluster;
    for (const master of cluster.nodes('master')) {
      loadScripts(master, { force }).catch((error: unknown) =>
        this.reportError(this.index, 'load-scripts', error),
      );
    }
  }

  /**
   * Runs one script on each of `slots` (every slot by default), under one timeout, reported once when it fails:
   * the per-slot calls of fresh initialization, settings and repair bookkeeping.
   */
  async eachSlot<R>(
    operation: string,
    timeoutMs: number,
    name: ScriptName,
    keysOf: (k: NodeStateKeys, slot: number) => readonly string[],
    argsOf: (slot: number) => readonly (string | number)[],
    interpret: (raw: unknown) => R,
    slots?: readonly number[],
  ): Promise<R[]> {
    const targets = slots ?? Array.from({ length: SLOT_COUNT }, (_, slot) => slot);
    const one = async (slot: number): Promise<R> =>
      interpret(await this.runScript(name, keysOf(this.scopes.keysOf(slot), slot), argsOf(slot)));
    // Thousands of calls queue behind each other on a shard: bounded as a bulk operation, not as one vote.
    const bound = targets.length > 64 ? Math.max(timeoutMs, 10_000) : timeoutMs;
    // In chunks of SLOT_CHUNK calls, one chunk after another: all 16 384 at once kept the event loop busy for
    // hundreds of milliseconds (building and writing every command), stalling every other lease of the process.
    return this.call(operation, bound, async () => {
      const results: R[] = [];
      for (let from = 0; from < targets.length; from += SLOT_CHUNK) {
        results.push(...(await Promise.all(targets.slice(from, from + SLOT_CHUNK).map(one))));
      }
      return results;
    });
  }

  override async settings(
    timeoutMs: number,
    operation: 'get' | 'record' | 'set',
    fields: Readonly<Record<string, string>> = {},
  ): Promise<SettingsReply> {
    const args = [operation, ...Object.entries(fields).flat()];
    // Changing writes every initialized slot. Reading answers from the first one, as reading every slot would (the
    // first slot's reply is the one returned). Recording (each field only where absent) writes nothing where the
    // first slot already holds every field: a cluster member's slots get their settings at initialization and
    // from a repair, all fields at once, so that is every start-up after the first — without 16 384 scripts each.
    const slots = this.scopes.voting();
    if (operation === 'record' && slots.length > 0) {
      const [first] = await this.eachSlot(
        'settings',
        timeoutMs,
        'settings',
        scriptKeys.settings,
        () => ['get'],
        (raw) => interpretReply('settings', raw),
        slots.slice(0, 1),
      );
      if (first?.kind === 'settings' && Object.keys(fields).every((f) => f in first.settings)) return first;
    }
    const replies = await this.eachSlot(
      'settings',
      timeoutMs,
      'settings',
      scriptKeys.settings,
      () => args,
      (raw) => interpretReply('settings', raw),
      operation === 'get' ? slots.slice(0, 1) : slots,
    );
    return replies.find((r) => r.kind === 'settings') ?? { kind: 'not-initialized' };
  }

  /**
   * One step of a fresh initialization on every slot (nodes/fresh-cluster.ts, each slot in the role of a node):
   * `ok` only when every slot answered ok; `initialized` when any slot holds its incarnation key ('mark', 'check')
   * or when every slot does or was initialized now ('init').
   */
  override async freshInit(timeoutMs: number, request: FreshInitStep): Promise<FreshInitReply> {
    const { step, nonce, argument, settings = {} } = request;
    const replies = await this.freshInitEverySlot(
      Math.max(timeoutMs, 10_000),
      step,
      nonce,
      // A slot's incarnation is stamped with its shard's id by the script (include/node-state.lua).
      step === 'init' ? `${argument}@` : argument,
      settings,
    );
    if (step === 'init') {
      replies.forEach((r, slot) => {
        if (r.kind !== 'init-mark-lost') this.scopes.set(slot, true);
      });
      return replies.some((r) => r.kind === 'init-mark-lost') ? { kind: 'init-mark-lost' } : { kind: 'ok' };
    }
    if (replies.some((r) => r.kind === 'initialized')) return { kind: 'initialized' };
    if (replies.some((r) => r.kind === 'init-mark-lost')) return { kind: 'init-mark-lost' };
    return { kind: 'ok' };
  }

  /**
   * One fresh-initialization step on every slot, each slot's reply by slot number: fresh-init-shard.lua calls on each
   * master over the slots the last layout says it serves, one call at a time over the whole member (a member's
   * initialization happens once in its life; the application's own commands on the member wait for at most one
   * call, not for every master running its share at once), then fresh-init.lua per slot (routed by the client) for
   * every slot a shard call did not answer — a master without a connection, a slot that moved (the script refuses
   * a key of a slot its node does not serve), no layout. Either way each slot's step is fresh-init.lua's own.
   */
  private async freshInitEverySlot(
    timeoutMs: number,
    step: 'mark' | 'check' | 'init',
    nonce: string,
    argument: string | number,
    settings: Readonly<Record<string, string>>,
  ): Promise<FreshInitReply[]> {
    const fields = step === 'init' ? Object.entries(settings).flat() : [];
    const replies = new Array<FreshInitReply | undefined>(SLOT_COUNT);
    const masters = await this.masters(timeoutMs).catch(() => []);
    const { head, tails } = this.keyTemplate;
    // One call at a time over the whole member (slot-layout.ts, SHARD_SCRIPT_SLOTS, says why). A master whose call failed gets no
    // more: its remaining slots go to the per-slot calls below, which report their own failures.
    const failed = new Set<Redis>();
    for (const { client, ranges } of masters) {
      if (client === undefined) continue;
      for (const { slots, tags } of shardChunksOf(ranges)) {
        if (failed.has(client)) break;
        const args: (string | number)[] = [
          step,
          nonce,
          argument,
          head,
          tails.incarnation,
          freshMarkKey(tails.fresh, nonce),
          tails.settings,
          tails.floor,
          tails.seal,
          fields.length,
          ...fields,
          tags,
        ];
        try {
          const raw = await withTimeout(
            runScript(client, 'fresh-init-shard', [], args),
            timeoutMs,
            `node ${this.index} fresh-init`,
          );
          const { steps } = interpretReply('fresh-init-shard', raw);
          if (steps.length !== slots.length) continue; // malformed: left to the per-slot calls below
          slots.forEach((slot, i) => {
            replies[slot] = steps[i];
          });
        } catch {
          failed.add(client);
        }
      }
    }
    const rest: number[] = [];
    for (let slot = 0; slot < SLOT_COUNT; slot++) if (replies[slot] === undefined) rest.push(slot);
    if (rest.length > 0) {
      const perSlot = await this.eachSlot(
        'fresh-init',
        timeoutMs,
        'fresh-init',
        (k) => scriptKeys['fresh-init'](k, nonce),
        () => [step, nonce, argument, ...fields],
        (raw) => interpretReply('fresh-init', raw),
        rest,
      );
      rest.forEach((slot, i) => {
        replies[slot] = perSlot[i];
      });
    }
    return replies as FreshInitReply[];
  }

  /** Whether any master holds a resource key or a slot's floor (SCAN on every master). */
  override async hasResourceKeys(timeoutMs: number): Promise<boolean> {
    const masters = await this.masters(timeoutMs);
    for (const { client } of masters) {
      if (client === undefined) throw new Error('a master of the cluster is not connected');
      for (const pattern of [resourceKeyPattern(this.prefix), slotFloorKeyPattern(this.prefix)]) {
        let cursor = '0';
        do {
          const [next, keys] = await this.call('check', timeoutMs, () =>
            client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000),
          );
          if (keys.length > 0) return true;
          cursor = next;
        } while (cursor !== '0');
      }
    }
    return false;
  }

  /**
   * This member read as one repair source for a standalone node's repair (nodes/repair.ts): every slot sealed with
   * `seal` and read in full, each atomically (repair-read-slot.lua), in one reply with cursor '0'. A slot that
   * cannot be a source (empty, under repair) makes the whole member no source. The floor is the highest slot floor:
   * raising a node higher than needed is safe.
   */
  override async repairRead(
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
      Math.max(10_000, timeoutMs * 10),
      'repair-read-slot',
      scriptKeys['repair-read'],
      (slot) => [slot, this.resourceKeyStart(), seal],
      (raw) => interpretReply('repair-read-slot', raw),
    );
    const refused = replies.find((r) => r.kind !== 'read');
    if (refused !== undefined) return refused;
    let floor = 0n;
    let settings: Readonly<Record<string, string>> = {};
    const registers: (readonly [string, bigint])[] = [];
    const leases: (readonly [string, string, number])[] = [];
    replies.forEach((reply, slot) => {
      if (reply.kind !== 'read') return;
      this.scopes.sealed(slot, seal);
      if (reply.floor > floor) floor = reply.floor;
      if (Object.keys(settings).length === 0) settings = reply.settings;
      registers.push(...reply.registers);
      leases.push(...reply.leases);
    });
    return { kind: 'read', incarnation: 'cluster', cursor: '0', floor, settings, registers, leases };
  }

  /**
   * One step of a fold pass over this member (DESIGN §3c, "folding per shard"): one SCAN step on one master for
   * token registers, grouped by slot, and each slot's idle ones folded into that slot's floor (fold-slot.lua, whose
   * argument is fold.lua's, per slot). The pass's cursor is `<master>:<SCAN cursor>` over the masters read when it
   * started (cursor '0'), so the pass is paced between steps like a standalone node's (nodes/fold.ts). One process per
   * member and interval does it: the fold lock of slot 0 stands for the member, taken when the pass starts and
   * renewed by a step once half of it is gone. Returns the next cursor ('0' when the pass is done) or `busy`.
   */
  override async fold(
    timeoutMs: number,
    cursor: string,
    count: number,
    minIdleSeconds: number,
    passIntervalMs: number,
  ): Promise<FoldReply> {
    const lockKey = this.scopes.keysOf(0).fold;
    let master = 0;
    let scanCursor = '0';
    if (cursor === '0') {
      const lock = await this.call('fold', timeoutMs, () =>
        this.cluster.set(lockKey, '1', 'PX', passIntervalMs, 'NX'),
      );
      if (lock !== 'OK') return { kind: 'busy' };
      this.foldLockTakenAt = monotonicNow();
      this.foldMasters = (await this.masters(timeoutMs)).flatMap(({ client }) =>
        client === undefined ? [] : [client],
      );
    } else {
      const step = FOLD_CURSOR.exec(cursor);
      if (step === null)
        throw new Error(`fold: cursor ${JSON.stringify(cursor)} is not <master>:<SCAN cursor>`);
      master = Number(step[1]);
      scanCursor = step[2]!;
      if (2 * (monotonicNow() - this.foldLockTakenAt) > passIntervalMs) {
        await this.call('fold', timeoutMs, () => this.cluster.set(lockKey, '1', 'PX', passIntervalMs));
        this.foldLockTakenAt = monotonicNow();
      }
    }
    const client = this.foldMasters[master];
    if (client === undefined) return { kind: 'folded', cursor: '0', folded: 0 };
    const [after, keys] = await this.call('fold', timeoutMs, () =>
      client.scan(scanCursor, 'MATCH', tokenKeyPattern(this.prefix), 'COUNT', count),
    );
    const bySlot = new Map<number, string[]>();
    for (const key of keys) {
      const slot = keySlot(key);
      if (!this.scopes.votes(slot)) continue;
      bySlot.set(slot, [...(bySlot.get(slot) ?? []), key]);
    }
    const replies = await Promise.all(
      [...bySlot].map(([slot, registers]) => {
        const k = this.scopes.keysOf(slot);
        return this.script('fold-slot', timeoutMs, scriptKeys['fold-slot'](k, registers), [minIdleSeconds]);
      }),
    );
    let folded = 0;
    for (const reply of replies) if (reply.kind === 'folded') folded += reply.folded;
    const next =
      after !== '0' ? `${master}:${after}` : master + 1 < this.foldMasters.length ? `${master + 1}:0` : '0';
    return { kind: 'folded', cursor: next, folded };
  }

  /** The masters of the last layout read, with their connections from the cluster's pool. */
  private async masters(
    timeoutMs: number,
  ): Promise<{ address: string; client: Redis | undefined; ranges: SlotRange[] }[]> {
    const reply = await this.call('check', timeoutMs, () => this.cluster.cluster('SLOTS'));
    this.layout = parseClusterSlots(reply);
    const byAddress = new Map<string, SlotRange[]>();
    for (const range of this.layout) {
      const list = byAddress.get(range.master) ?? [];
      list.push(range);
      byAddress.set(range.master, list);
    }
    if ([...byAddress.keys()].some((address) => this.connectionTo(address) === undefined)) {
      // The client drops a master's connection when the master goes away and adds it back only when it refreshes
      // its slot map, which only a call to one of those slots would cause: a shard that restarted while nobody
      // voted on its slots would stay unseen. Refresh now.
      await this.refreshSlots(timeoutMs);
    }
    const masters = [...byAddress].map(([address, ranges]) => ({
      address,
      client: this.connectionTo(address),
      ranges,
    }));
    // A replica is known to its own master at once, to the other nodes only once gossip spreads: each master's own
    // CLUSTER SLOTS names its replicas, so none escapes the start-up check.
    await Promise.all(
      masters.map(async (master) => {
        if (master.client === undefined) return;
        try {
          const own = parseClusterSlots(
            await withTimeout(master.client.cluster('SLOTS'), timeoutMs, `node ${this.index} check`),
          );
          master.ranges = master.ranges.map((range) => {
            const seen = own.find((r) => r.start === range.start && r.master === range.master);
            return seen === undefined
              ? range
              : { ...range, replicas: [...new Set([...range.replicas, ...seen.replicas])] };
          });
        } catch {
          // the shard's own problems are found by its checks
        }
      }),
    );
    return masters;
  }

  private refreshSlots(timeoutMs: number): Promise<void> {
    const cluster = this.cluster as unknown as {
      refreshSlotsCache?: (done?: (error?: Error) => void) => void;
    };
    if (typeof cluster.refreshSlotsCache !== 'function') return Promise.resolve();
    return withTimeout(
      new Promise<void>((resolve) => cluster.refreshSlotsCache!(() => resolve())),
      timeoutMs,
      `node ${this.index} check`,
    ).catch(() => undefined);
  }

  private connectionTo(address: string): Redis | undefined {
    return this.cluster.nodes('all').find((n) => clientAddress(n.options) === address);
  }

  /** Waits (bounded) for the cluster and a connection to each of its masters (calls fail at once without one). */
  override async waitUntilConnected(callTimeoutMs: number): Promise<void> {
    // Joining a cluster takes a CLUSTER SLOTS and a connection per master: more than one vote's bound.
    const timeoutMs = Math.max(callTimeoutMs, 5_000);
    const deadline = performance.now() + timeoutMs;
    await super.waitUntilConnected(timeoutMs);
    await Promise.all(
      this.cluster
        .nodes('master')
        .map((master) => waitForReady(master, Math.max(0, deadline - performance.now()))),
    );
  }

  /**
   * Start-up checks of every master (CONFIG GET, INFO replication) and every replica (cluster-replica-no-failover),
   * plus every slot's incarnation key and seal epoch (pipelined per master); never throws.
   */
  override async probe(
    callTimeoutMs: number,
    options: { waitForConnection?: boolean } = {},
  ): Promise<NodeProbe> {
    if (options.waitForConnection === true) await this.waitUntilConnected(callTimeoutMs);
    // A member's probe reads thousands of keys per shard, queued behind whatever else the shard runs: a longer bound
    // than one vote's, so that a busy shard is not taken for a misconfigured or unreachable one.
    const timeoutMs = Math.max(callTimeoutMs, 5_000);
    const started = performance.now();
    let probe: NodeProbe;
    try {
      await this.call('ping', timeoutMs, () => this.cluster.ping());
      const latencyMs = Math.round((performance.now() - started) * 100) / 100;
      const masters = await this.masters(timeoutMs);
      const problems: string[] = [];
      const shards: ShardStatus[] = [];
      await Promise.all(
        masters.map(async ({ address, client, ranges }) => {
          const slotCount = ranges.reduce((n, r) => n + r.end - r.start + 1, 0);
          const shardProblems: string[] = [];
          let up = false;
          let voting = 0;
          let underRepair = 0;
          if (client === undefined) {
            shardProblems.push(`shard ${address}: not connected`);
          } else {
            try {
              shardProblems.push(
                ...(await this.checkServer(client, timeoutMs)).map((p) => `shard ${address}: ${p}`),
              );
              await loadScripts(client);
              // A slot whose read failed (moved or migrating) is left as last seen.
              await this.readSlotStates(
                client,
                shardChunksOf(ranges),
                timeoutMs,
                (slot, initialized, seal) => {
                  this.scopes.set(slot, initialized);
                  this.scopes.sealed(slot, seal);
                  if (initialized) voting++;
                  if (this.scopes.underRepair.has(slot)) underRepair++;
                },
              );
              up = true;
            } catch (error) {
              shardProblems.push(
                `shard ${address}: unreachable: ${error instanceof Error ? error.message : String(error)}`,
              );
            }
          }
          for (const range of ranges) {
            for (const replica of range.replicas) {
              shardProblems.push(
                ...(await this.checkReplica(replica, timeoutMs)).map(
                  (p) => `replica ${replica} of shard ${address}: ${p}`,
                ),
              );
            }
          }
          problems.push(
            ...shardProblems.filter((p) => !p.includes(': not connected') && !p.includes(': unreachable')),
          );
          shards.push({
            address,
            up,
            slots: slotCount,
            votingSlots: voting,
            slotsUnderRepair: underRepair,
            problems: shardProblems,
          });
        }),
      );
      shards.sort((a, b) => a.address.localeCompare(b.address));
      probe = {
        reachable: true,
        role: 'cluster',
        configProblems: [...new Set(problems)],
        initialized: this.anyInitialized,
        latencyMs,
        shards,
      };
    } catch (error) {
      probe = {
        reachable: false,
        configProblems: this.lastProbe?.configProblems ?? [],
        error: `unreachable: ${error instanceof Error ? error.message : String(error)}`,
        ...(this.lastProbe?.shards === undefined ? {} : { shards: this.lastProbe.shards }),
      };
    }
    this.lastProbe = probe;
    this.lastProbeAt = performance.now();
    return probe;
  }

  /**
   * Reads whether each slot of `chunks` (served by the master behind `client`) holds its incarnation key, and its
   * seal epoch, and hands each slot's state to `apply` (a slot whose read failed is skipped): one probe-shard.lua
   * call per chunk (sent together), or, for a call that fails (a slot moved: the script refuses a key its node does
   * not serve), two GETs per slot in pipelines of PROBE_CHUNK slots, one after another, so the event loop is free
   * between two. No object per slot: a start-up reads every slot of every member, once per coordinator.
   */
  private async readSlotStates(
    client: Redis,
    chunks: readonly ShardChunk[],
    timeoutMs: number,
    apply: (slot: number, initialized: boolean, seal: string) => void,
  ): Promise<void> {
    await Promise.all(chunks.map((chunk) => this.readSlotChunk(client, chunk, timeoutMs, apply)));
  }

  /** `readSlotStates` for at most SHARD_SCRIPT_SLOTS slots: one probe-shard.lua call, or GETs when it fails. */
  private async readSlotChunk(
    client: Redis,
    { slots, tags }: ShardChunk,
    timeoutMs: number,
    apply: (slot: number, initialized: boolean, seal: string) => void,
  ): Promise<void> {
    const { head, tails } = this.keyTemplate;
    try {
      const reply = await withTimeout(
        sharedRead(client, `${head}|${tags}`, async () =>
          interpretReply(
            'probe-shard',
            await runScript(
              client,
              'probe-shard',
              [],
              [head, tails.incarnation, tails.seal, tags, tails.floor, tails.settings],
            ),
          ),
        ),
        timeoutMs,
        `node ${this.index} check`,
      );
      if (reply.flags.length === slots.length) {
        const { flags, epochs } = reply;
        for (let i = 0; i < slots.length; i++) {
          apply(slots[i]!, flags.charCodeAt(i) === ONE, epochs.get(i + 1) ?? '');
        }
        return;
      }
    } catch (error) {
      // The master lost its script cache (SCRIPT FLUSH): load the scripts again for the next probe.
      if (isNoScriptError(error)) {
        loadScripts(client, { force: true }).catch((e: unknown) =>
          this.reportError(this.index, 'load-scripts', e),
        );
      }
      // Read slot by slot below.
    }
    for (let from = 0; from < slots.length; from += PROBE_CHUNK) {
      const chunk = slots.slice(from, from + PROBE_CHUNK);
      const pipeline = client.pipeline();
      for (const slot of chunk) {
        const k = this.scopes.keysOf(slot);
        pipeline.get(k.incarnation);
        pipeline.get(k.seal);
      }
      const results = (await withTimeout(pipeline.exec(), timeoutMs, `node ${this.index} check`)) ?? [];
      chunk.forEach((slot, i) => {
        const [incError, incarnation] = results[2 * i] ?? [new Error('no reply'), null];
        const [, seal] = results[2 * i + 1] ?? [null, null];
        if (incError !== null) return;
        apply(slot, incarnation !== null && incarnation !== undefined, typeof seal === 'string' ? seal : '');
      });
    }
  }

  /** A master's settings as DESIGN §3 requires them (each problem names the setting). */
  private async checkServer(client: Redis, timeoutMs: number): Promise<string[]> {
    const config: Partial<Record<CheckedSetting, string>> = {};
    await Promise.all(
      (Object.keys(REQUIRED_SETTINGS) as CheckedSetting[]).map(async (setting) => {
        try {
          const reply = await withTimeout(client.config('GET', setting), timeoutMs, 'check');
          config[setting] = parseConfigReply(reply)[setting];
        } catch {
          // left undefined: configProblems names the setting that could not be read
        }
      }),
    );
    const role = await withTimeout(client.info('replication'), timeoutMs, 'check').then(
      parseRole,
      () => undefined,
    );
    return configProblems({ config, role });
  }

  /**
   * A replica's settings: it must never fail over on its own (a replica promoted after asynchronous replication may
   * have missed acknowledged promises) and must be as durable as a master (appendonly, appendfsync always,
   * noeviction: it holds the same registers, and an operator's manual failover promotes it with what it holds).
   */
  private async checkReplica(address: string, timeoutMs: number): Promise<string[]> {
    const config = await this.readReplicaConfig(address, timeoutMs);
    const failover = config?.[REPLICA_NO_FAILOVER];
    const problems =
      config === undefined
        ? [`its settings could not be read (CONFIG GET failed); ${REPLICA_NO_FAILOVER} must be 'yes'`]
        : configProblems({ config, role: undefined }, 'replica');
    if (config !== undefined && failover !== 'yes') {
      problems.push(
        `${REPLICA_NO_FAILOVER} is ${failover === undefined ? 'unreadable' : `'${failover}'`}; it must be 'yes' (a promoted replica may have missed acknowledged promises; DESIGN §3c)`,
      );
    }
    return problems;
  }

  private async readReplicaConfig(
    address: string,
    timeoutMs: number,
  ): Promise<Record<string, string> | undefined> {
    const pooled = this.connectionTo(address);
    const [host, port] = [
      address.slice(0, address.lastIndexOf(':')),
      Number(address.slice(address.lastIndexOf(':') + 1)),
    ];
    const client =
      pooled ??
      new IORedis({
        host,
        port,
        ...(this.cluster.options.redisOptions ?? {}),
        lazyConnect: false,
        enableOfflineQueue: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
    client.on('error', () => undefined);
    try {
      const reply = await withTimeout(
        client.call('CONFIG', 'GET', REPLICA_NO_FAILOVER, ...Object.keys(REQUIRED_SETTINGS)),
        timeoutMs,
        'check',
      );
      return parseConfigReply(reply);
    } catch {
      return undefined;
    } finally {
      if (pooled === undefined) client.disconnect();
    }
  }
}
