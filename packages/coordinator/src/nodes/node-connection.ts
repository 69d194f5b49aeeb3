/**
 * One Redis master as the coordinator sees it: the ioredis client, what the last probe found, and one bounded
 * method per Lua script (the ProtocolNode and RepairNode slices the protocol steps take).
 *
 * Longer than most files here (~500 lines) on purpose: every method is a thin, typed wrapper that names a script's
 * KEYS in the order its contract block states, and keeping them in one class keeps the node's key layout in one
 * place. The protocol decisions are elsewhere (protocol/, tokens/, nodes/repair.ts).
 */
// Through `module.exports`, which is the Redis class in ioredis 4 and 5 alike, with `.default` pointing to
// itself (ioredis 4 has no named `Redis` export, so `import { Redis }` would fail where it is installed).
import ioredis, { type Redis } from 'ioredis';

const IORedis = ioredis.default;
import { InvalidRequestError } from '@fenced/shared';
import { NodeTimeoutError } from '../errors.js';
import { asRedisClient, describeValue, SUPPORTED_IOREDIS_VERSIONS } from './client-shape.js';
import {
  interpretReply,
  type AcquireReply,
  type BatchScriptName,
  type ExtendReply,
  type FinishRepairReply,
  type FoldReply,
  type FreshInitReply,
  type InspectReply,
  type PromiseReply,
  type RepairMarkerReply,
  type RepairRaiseReply,
  type RepairReadReply,
  type ReleaseReply,
  type ScriptName,
  type ScriptReplies,
  type SettingsReply,
} from '../scripts/script-results.js';
import { isNoScriptError, loadScripts, runScript } from '../scripts/scripts.js';
import { ScriptBatcher } from '../scripts/script-batcher.js';
import { repairRaiseCall, scriptKeys } from '../scripts/script-keys.js';
import {
  keyLayoutOf,
  nodeStateKeys,
  resourceKeyPattern,
  tokenKeyPattern,
  type NodeStateKeys,
} from '../keys/key-layout.js';
import type { ProtocolNode } from './protocol-node.js';
import type { FreshInitStep } from './fresh-cluster.js';
import { NodeScopes } from './node-scopes.js';
import { clientAddress, redisUrlProblem, urlAddress } from './node-address.js';
import type { RepairProgress } from './repair.js';
import {
  configProblems,
  parseConfigReply,
  parseRole,
  REQUIRED_SETTINGS,
  type CheckedSetting,
} from './node-check.js';

/** Reports a failed call to one node; the coordinator turns it into a `nodeError` event. */
export type NodeErrorSink = (node: number, operation: string, error: unknown) => void;

/** What one probe of a node found (start-up checks, `nodeStatus()`, background re-checks). */
export interface NodeProbe {
  readonly reachable: boolean;
  readonly role?: string;
  /** Empty when the configuration is as DESIGN §3 requires. */
  readonly configProblems: readonly string[];
  /** Whether the incarnation key exists; undefined when unreachable. */
  readonly initialized?: boolean;
  readonly latencyMs?: number;
  readonly error?: string;
  /** A Redis Cluster member's shards (DESIGN §3c): one entry per master. */
  readonly shards?: readonly ShardStatus[];
}

/** One shard (master) of a Redis Cluster member, as a probe found it (`NodeStatus.shards` in `nodeStatus()`). */
export interface ShardStatus {
  /** host:port of the master. */
  readonly address: string;
  readonly up: boolean;
  /** Slots the master serves. */
  readonly slots: number;
  /** Of those, slots holding their incarnation key (they vote). */
  readonly votingSlots: number;
  /** Of those, slots being repaired by this process. */
  readonly slotsUnderRepair: number;
  /** Its configuration problems (and its replicas'); empty when as DESIGN §3c requires. */
  readonly problems: readonly string[];
}

/** A client the caller (or a subclass) already made, with its address and identity. */
export interface PreparedClient {
  readonly prepared: true;
  readonly client: Redis;
  readonly address: string;
  readonly identity: string;
  readonly owned: boolean;
  /** Whether the member is a Redis Cluster: its node state is kept per slot (nodes/node-scopes.ts). */
  readonly perSlot?: boolean;
}

function isPrepared(node: unknown): node is PreparedClient {
  return typeof node === 'object' && node !== null && (node as { prepared?: unknown }).prepared === true;
}

/** Connection options of the clients the coordinator creates from URLs. */
export function ownedClientOptions(connectTimeoutMs: number) {
  return {
    // The coordinator batches its own calls (ScriptBatcher); an auto-pipeline would only hold each batch until
    // the previous one's replies are in.
    enableAutoPipelining: false,
    // Fail at once while disconnected instead of queueing: a queued acquire sent after a reconnect would be
    // a vote nobody waits for.
    enableOfflineQueue: false,
    // Never resend a command after a reconnect: scripts are not all idempotent, and the caller has moved on.
    maxRetriesPerRequest: 0,
    connectTimeout: connectTimeoutMs,
    retryStrategy: (attempt: number) => Math.min(50 * attempt, 1_000),
    lazyConnect: false,
  };
}

/**
 * One Redis master: its client, what the coordinator knows about it, and bounded calls to it. Every call
 * races the node's timeout; a late reply is ignored by the caller (its effect on the node is not).
 */
export class NodeConnection implements ProtocolNode {
  readonly client: Redis;
  readonly address: string;
  /** Identity used to refuse duplicate nodes: host:port/db. */
  readonly identity: string;
  /** Whether the coordinator created the client (and so closes it). */
  readonly owned: boolean;

  /** Last probe result; undefined until the first probe. */
  lastProbe: NodeProbe | undefined;
  /** Where the node state each script depends on lives, and what this process last saw of it, per scope. */
  readonly scopes: NodeScopes;

  /** Whether every scope's incarnation key is known to exist (a standalone node: its one). */
  get initialized(): boolean {
    return this.scopes.all;
  }

  set initialized(initialized: boolean) {
    this.scopes.setAll(initialized);
  }
  /** Set while a repair runs; shown in `nodeStatus().problems`. */
  repairStatus: string | undefined;
  /** Set while a repair runs: its phase and registers copied, shown as `nodeStatus().repair`. */
  repairProgress: RepairProgress | undefined;
  /** When the last probe ended, on the monotonic clock (`performance.now()`); undefined until the first. */
  lastProbeAt: number | undefined;
  /**
   * The node's seal epoch as this process last saw it (a probe, or a SEALED reply): every promise-recording call
   * carries it, read when the call is made, i.e. when its round begins (nodes/repair.ts holds the argument). A
   * Cluster member keeps one per slot (`scopes`).
   */
  get sealEpoch(): string {
    return this.scopes.epochOf(0);
  }

  set sealEpoch(epoch: string) {
    this.scopes.sealed(0, epoch);
  }

  /** Told when a script reveals a scope without its incarnation key (NodeSet starts its repair). */
  onScopeEmpty: (scope: number) => void = () => undefined;

  /**
   * How many nodes this process counts its quorum over: every call that records a promise or a lease carries it, and
   * the node refuses it when it differs from the cluster's recorded nodeCount (include/node-state.lua). Set by the
   * node set that owns the connection.
   */
  nodeCount = 0;

  /** The node-state keys (incarnation, floor, seal, settings, markers), all from one builder. */
  readonly stateKeys: NodeStateKeys;
  /** Acquires and releases are batched per scope: a batch's keys, node-state keys included, share one slot. */
  private readonly acquires = new Map<number, ScriptBatcher<'acquire'>>();
  private readonly releases = new Map<number, ScriptBatcher<'release'>>();
  private readonly pendingScopes = new Set<number>();
  private flushScheduled = false;
  protected lastConnectionError: unknown;
  /** Connections in a row that the server closed before answering the ready check: a port that is not Redis. */
  protected closedBeforeReady = 0;
  private awaitingReady = false;

  constructor(
    readonly index: number,
    node: unknown,
    protected readonly prefix: string,
    protected readonly reportError: NodeErrorSink,
    connectTimeoutMs: number,
  ) {
    if (isPrepared(node)) {
      this.address = node.address;
      this.identity = node.identity;
      this.client = node.client;
      this.owned = node.owned;
    } else if (typeof node === 'string') {
      const problem = redisUrlProblem(node);
      if (problem !== undefined) {
        throw new InvalidRequestError(
          `nodes[${index}] ${problem} (allowed: a redis:// or rediss:// URL with a host, or an ioredis client)`,
        );
      }
      const url = new URL(node);
      const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0;
      this.address = urlAddress(url).address;
      this.identity = `${this.address.toLowerCase()}/${db}`;
      this.client = new IORedis(node, ownedClientOptions(connectTimeoutMs));
      this.owned = true;
    } else {
      const client = asRedisClient(node, index);
      if (client === undefined) {
        throw new InvalidRequestError(
          `nodes[${index}] must be a redis:// or rediss:// URL or an ioredis client (ioredis ${SUPPORTED_IOREDIS_VERSIONS}), got ${describeValue(node)}`,
        );
      }
      if (client.options.keyPrefix) {
        throw new InvalidRequestError(
          `nodes[${index}] must not use ioredis' keyPrefix; use the keyPrefix option`,
        );
      }
      this.address = clientAddress(client.options);
      this.identity = `${this.address.toLowerCase()}/${client.options.db ?? 0}`;
      this.client = client;
      this.owned = false;
    }
    this.stateKeys = nodeStateKeys(prefix);
    this.scopes = new NodeScopes(prefix, isPrepared(node) && node.perSlot === true);
    // Remembered to say *why* a node is unreachable (ioredis' own message is "Stream isn't writeable").
    // ioredis follows a fatal error (a reply that is not RESP) with "Stream isn't writeable" for its ready check on
    // the dead stream: that one says nothing new, and would hide the cause.
    // A reply that was not RESP says what the node is; a reset on the next attempt says less, so until the node is
    // ready again it does not replace it (Postgres answers a first attempt with its own protocol, later ones may
    // just be reset).
    this.listen('error', (error: unknown) => {
      if (error instanceof Error && NOT_CONNECTED.test(error.message)) return;
      if (isParserError(this.lastConnectionError)) return;
      this.lastConnectionError = error;
    });
    if (this.owned) {
      // Without a listener ioredis prints every reconnect failure; these become nodeError events instead.
      this.listen('error', (error: unknown) => this.reportError(this.index, 'connection', error));
    }
    // Every connection (and reconnection) caches the scripts before its first call: runScript has no EVAL
    // fallback, which could reorder calls.
    this.listen('ready', () => this.reloadScripts());
    if (this.client.status === 'ready') this.reloadScripts();
    // A server that accepts the connection and closes it before any Redis reply (Postgres, say) is not Redis.
    this.listen('connect', () => {
      this.awaitingReady = true;
    });
    this.listen('ready', () => {
      this.awaitingReady = false;
      this.closedBeforeReady = 0;
      this.lastConnectionError = undefined;
    });
    this.listen('close', () => {
      if (this.awaitingReady) this.closedBeforeReady++;
      this.awaitingReady = false;
    });
    // A client of yours may serve many coordinators (one per Redlock, say): each adds two listeners of one event,
    // which is not a leak while it runs — close() takes them off again — so the client's warning limit grows by two
    // while it does, instead of Node warning at the eleventh.
    if (!this.owned && this.client.getMaxListeners() > 0) {
      this.client.setMaxListeners(this.client.getMaxListeners() + LISTENERS_PER_EVENT);
    }
  }

  /** Listeners this connection put on its client, taken off by close(). */
  private readonly listeners: [string, (...args: never[]) => void][] = [];

  /** Adds a listener to the client, remembered so that close() takes it off a client you passed in. */
  protected listen(event: string, listener: (...args: never[]) => void): void {
    this.client.on(event, listener as (...args: unknown[]) => void);
    this.listeners.push([event, listener]);
  }

  /**
   * Loads every script into the node's script cache (a Cluster member: into every master's), unless this connection
   * already did; `force` (after a NOSCRIPT: the cache was flushed) loads them again.
   */
  protected reloadScripts(force = false): void {
    loadScripts(this.client, { force }).catch((error: unknown) =>
      this.reportError(this.index, 'load-scripts', error),
    );
  }

  /** Whether this member is a Redis Cluster (DESIGN §3c). */
  get isCluster(): boolean {
    return false;
  }

  /** Each shard of a Cluster member as the last probe saw it; a standalone node has none. */
  currentShards(): ShardStatus[] | undefined {
    return undefined;
  }

  /** Whether any of the node's state is initialized (a Cluster member: any slot). */
  get anyInitialized(): boolean {
    return this.scopes.any;
  }

  /** Records that the node (every slot of a Cluster member) holds its incarnation key. */
  markInitialized(): void {
    this.scopes.setAll(true);
  }

  /** A connection of its own for the waiters' subscriptions (a subscribed connection can run nothing else). */
  duplicateSubscriber(options: Record<string, unknown>): Redis {
    return this.client.duplicate(options);
  }

  /** Runs a script; a NOSCRIPT (the node lost its script cache) fails the call and reloads the scripts. */
  protected runScript(
    name: ScriptName,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    return runScript(this.client, name, keys, args).catch((error: unknown) => {
      if (isNoScriptError(error)) this.reloadScripts(true);
      throw error;
    });
  }

  /** Whether the node may vote: it passed the checks (or they were waived) and was not restarted empty. */
  isVoting(allowUnsafe: boolean): boolean {
    const probe = this.lastProbe;
    if (probe === undefined || (probe.configProblems.length > 0 && !allowUnsafe)) return false;
    // A Cluster member votes with every slot that holds its state (each slot's scripts refuse on their own while it
    // is empty); a standalone node has one scope, and its repair holds it.
    return this.scopes.perSlot ? this.scopes.any : this.initialized && this.repairStatus === undefined;
  }

  /** Runs one call bounded by `timeoutMs`; failures are reported as nodeError events and rethrown. */
  async call<T>(operation: string, timeoutMs: number, fn: (client: Redis) => Promise<T>): Promise<T> {
    try {
      return await withTimeout(fn(this.client), timeoutMs, `node ${this.index} ${operation}`);
    } catch (error) {
      this.reportError(this.index, operation, error);
      throw error;
    }
  }

  /**
   * One acquire vote (acquire.lua), batched with the other acquires of the same scope queued before the next flush.
   * Bounded by `timeoutMs`; failures are reported as nodeError events and rethrown.
   */
  acquire(
    timeoutMs: number,
    keys: { readonly lease: string; readonly record: string; readonly token: string },
    leaseId: string,
    ttlMs: number,
    proposal: bigint,
  ): Promise<AcquireReply> {
    const scope = this.scopes.of(keys.record);
    return this.scopeBatcher('acquire', scope, this.acquires)
      .call(timeoutMs, scriptKeys.acquireItem(keys), [
        leaseId,
        ttlMs,
        proposal.toString(),
        this.scopes.epochOf(scope),
      ])
      .then((reply) => this.learn(scope, reply));
  }

  /**
   * What a reply tells of its scope: a SEALED reply its current epoch (the next round carries it); NOT_INITIALIZED
   * that it lost its state, so it stops voting here at once and its repair is asked for.
   */
  private learn<R extends { readonly kind: string }>(scope: number, reply: R): R {
    if (reply.kind === 'sealed') this.scopes.sealed(scope, (reply as unknown as { epoch: string }).epoch);
    else if (reply.kind === 'not-initialized' && this.scopes.votes(scope)) {
      this.scopes.set(scope, false);
      this.reportError(
        this.index,
        'vote',
        new Error(
          `${this.scopes.describe(scope, this.address)} has no incarnation key: it restarted empty and must be repaired before it votes`,
        ),
      );
      this.onScopeEmpty(scope);
    }
    return reply;
  }

  /** One compare-and-delete (release.lua), batched with the other releases of its scope queued before the next flush. */
  release(
    timeoutMs: number,
    keys: { readonly lease: string; readonly record: string; readonly channel: string },
    leaseId: string,
  ): Promise<ReleaseReply> {
    const scope = this.scopes.of(keys.record);
    // A release must never overtake an acquire queued before it: the flush sends releases first, so an attempt
    // decided before its votes were even sent (nodes that do not vote count against at once) would have its
    // release run first and its acquire then leave a key behind. Send those acquires now.
    const acquires = this.acquires.get(scope);
    if (acquires?.pending === true) acquires.flush();
    return this.scopeBatcher('release', scope, this.releases).call(timeoutMs, scriptKeys.releaseItem(keys), [
      leaseId,
      keys.channel,
    ]);
  }

  /** A later token round (promise.lua). */
  promise(
    timeoutMs: number,
    keys: { readonly lease: string; readonly record: string; readonly token: string },
    leaseId: string,
    proposal: bigint,
  ): Promise<PromiseReply> {
    const scope = this.scopes.of(keys.record);
    const k = this.scopes.keysOf(scope);
    return this.script('promise', timeoutMs, scriptKeys.promise(k, keys), [
      leaseId,
      proposal.toString(),
      this.scopes.epochOf(scope),
      keyLayoutOf(keys),
      this.nodeCount,
    ]).then((reply) => this.learn(scope, reply));
  }

  /** Compare-and-extend (extend.lua). */
  extend(
    timeoutMs: number,
    keys: { readonly lease: string; readonly record: string },
    leaseId: string,
    ttlMs: number,
  ): Promise<ExtendReply> {
    const scope = this.scopes.of(keys.record);
    const k = this.scopes.keysOf(scope);
    return this.script('extend', timeoutMs, scriptKeys.extend(k, keys), [
      leaseId,
      ttlMs,
      this.nodeCount,
    ]).then((reply) => this.learn(scope, reply));
  }

  /** This node's view of a lease (inspect.lua). */
  inspect(
    timeoutMs: number,
    keys: { readonly lease: string; readonly record: string },
  ): Promise<InspectReply> {
    const scope = this.scopes.of(keys.record);
    return this.script('inspect', timeoutMs, scriptKeys.inspect(this.scopes.keysOf(scope), keys), []).then(
      (reply) => this.learn(scope, reply),
    );
  }

  /** Claims or renews this node's repair marker (repair-marker.lua). */
  repairMarker(
    timeoutMs: number,
    operation: 'claim' | 'renew',
    repairId: string,
    markerTtlMs: number,
  ): Promise<RepairMarkerReply> {
    const k = this.stateKeys;
    return this.script('repair-marker', timeoutMs, scriptKeys['repair-marker'](k), [
      operation,
      repairId,
      markerTtlMs,
    ]);
  }

  /**
   * One batch of this node's token registers and live leases, read as a repair source (repair-read.lua); a
   * non-empty `seal` (the first batch) seals the node with that epoch in the same call.
   */
  repairRead(
    timeoutMs: number,
    cursor: string,
    count: number,
    incarnation: string,
    seal: string,
  ): Promise<RepairReadReply> {
    const k = this.stateKeys;
    return this.script('repair-read', timeoutMs, scriptKeys['repair-read'](k), [
      cursor,
      count,
      resourceKeyPattern(this.prefix),
      incarnation,
      seal,
    ]).then((reply) => {
      // This process sealed the node: its own later rounds begin after the seal and carry the new epoch.
      if (reply.kind === 'read' && seal !== '') this.sealEpoch = seal;
      return reply;
    });
  }

  /**
   * Raises this node's floor and a batch of its registers, and restores a batch of live leases, while under
   * repair (repair-raise.lua).
   */
  repairRaise(
    timeoutMs: number,
    repairId: string,
    floor: bigint,
    registers: readonly (readonly [string, bigint])[],
    leases: readonly (readonly [string, string, number])[] = [],
  ): Promise<RepairRaiseReply> {
    const { keys, args } = repairRaiseCall(this.stateKeys, this.prefix, repairId, floor, registers, leases);
    return this.script('repair-raise', timeoutMs, keys, args);
  }

  /**
   * Lets this node vote again if the repair is still ours (finish-repair.lua), with a new seal epoch and the
   * cluster's settings read from the sources.
   */
  finishRepair(
    timeoutMs: number,
    repairId: string,
    incarnation: string,
    sealEpoch: string,
    settings: Readonly<Record<string, string>>,
  ): Promise<FinishRepairReply> {
    const k = this.stateKeys;
    return this.script('finish-repair', timeoutMs, scriptKeys['finish-repair'](k), [
      repairId,
      incarnation,
      sealEpoch,
      ...Object.entries(settings).flat(),
    ]).then((reply) => {
      if (reply.kind === 'finished') this.sealEpoch = sealEpoch;
      return reply;
    });
  }

  /** The cluster's settings recorded on this node: read, recorded where absent, or set (settings.lua). */
  settings(
    timeoutMs: number,
    operation: 'get' | 'record' | 'set',
    fields: Readonly<Record<string, string>> = {},
  ): Promise<SettingsReply> {
    return this.script('settings', timeoutMs, scriptKeys.settings(this.stateKeys), [
      operation,
      ...Object.entries(fields).flat(),
    ]);
  }

  /** One step of a fresh-cluster initialization (fresh-init.lua; the argument is in nodes/fresh-cluster.ts). */
  freshInit(timeoutMs: number, request: FreshInitStep): Promise<FreshInitReply> {
    const { step, nonce, argument, settings = {} } = request;
    const k = this.stateKeys;
    return this.script('fresh-init', timeoutMs, scriptKeys['fresh-init'](k, nonce), [
      step,
      nonce,
      argument,
      ...(step === 'init' ? Object.entries(settings).flat() : []),
    ]);
  }

  /** One SCAN step of a fold pass (fold.lua). */
  fold(
    timeoutMs: number,
    cursor: string,
    count: number,
    minIdleSeconds: number,
    passIntervalMs: number,
  ): Promise<FoldReply> {
    return this.script('fold', timeoutMs, scriptKeys.fold(this.stateKeys), [
      cursor,
      count,
      tokenKeyPattern(this.prefix),
      minIdleSeconds,
      passIntervalMs,
    ]);
  }

  /** The batcher of `name` for one scope, made at its first call. */
  private scopeBatcher<S extends BatchScriptName>(
    name: S,
    scope: number,
    batchers: Map<number, ScriptBatcher<S>>,
  ): ScriptBatcher<S> {
    let batcher = batchers.get(scope);
    if (batcher === undefined) {
      const k = this.scopes.keysOf(scope);
      batcher = new ScriptBatcher(
        name,
        name === 'acquire' ? scriptKeys.acquire(k) : [],
        (keys, args) => this.runScript(name, keys, args),
        `node ${this.index} ${name}`,
        (error) => this.reportError(this.index, name, error),
        () => {
          this.pendingScopes.add(scope);
          this.scheduleFlush();
        },
        name === 'acquire' ? () => [this.nodeCount] : undefined,
      );
      batchers.set(scope, batcher);
    }
    return batcher;
  }

  /** Asks for a flush of the queued batches once the current event-loop turn's callbacks are done. */
  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    // After the I/O callbacks of this event-loop turn, not after the current one (process.nextTick): a server reads
    // each request in a callback of its own, and the acquires of requests read in one turn then share a batch. The
    // caller's clock started before it queued, so validity only errs short.
    setImmediate(this.flush);
  }

  /**
   * Sends the queued batches: releases first, then acquires, back to back on the connection. A waiter woken by a
   * release in this process (see `ReleaseNotifier.released`) therefore reaches every node right behind that
   * release, and the node decides both in the same event-loop iteration (and one fsync).
   */
  private readonly flush = (): void => {
    this.flushScheduled = false;
    const scopes = [...this.pendingScopes];
    this.pendingScopes.clear();
    for (const scope of scopes) this.releases.get(scope)?.flush();
    for (const scope of scopes) this.acquires.get(scope)?.flush();
  };

  /** Runs a script and maps its reply (a malformed reply is a MalformedReplyError, reported like any failure). */
  script<S extends Exclude<ScriptName, BatchScriptName>>(
    name: S,
    timeoutMs: number,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<ScriptReplies[S]> {
    return this.call(name, timeoutMs, async () =>
      interpretReply(name, await this.runScript(name, keys, args)),
    );
  }

  /** Waits (bounded) for a created client's first connection, so the first calls do not fail for nothing. */
  async waitUntilConnected(timeoutMs: number): Promise<void> {
    await waitForReady(this.client, timeoutMs);
  }

  /**
   * Start-up checks (CONFIG GET, INFO replication) plus the incarnation key; never throws. Only the first probe
   * waits for the initial connection; later ones (`/readyz`) report a disconnected node at once.
   */
  async probe(timeoutMs: number, options: { waitForConnection?: boolean } = {}): Promise<NodeProbe> {
    if (options.waitForConnection === true) await this.waitUntilConnected(timeoutMs);
    const started = performance.now();
    let probe: NodeProbe;
    try {
      await this.call('ping', timeoutMs, (c) => c.ping());
      const latencyMs = Math.round((performance.now() - started) * 100) / 100;
      const config: Partial<Record<CheckedSetting, string>> = {};
      await Promise.all(
        (Object.keys(REQUIRED_SETTINGS) as CheckedSetting[]).map(async (setting) => {
          try {
            const reply = await this.call('check', timeoutMs, (c) => c.config('GET', setting));
            config[setting] = parseConfigReply(reply)[setting];
          } catch {
            // left undefined: configProblems names the setting that could not be read
          }
        }),
      );
      const role = await this.call('check', timeoutMs, (c) => c.info('replication')).then(
        parseRole,
        () => undefined,
      );
      const [incarnation, seal] = await this.call('check', timeoutMs, (c) =>
        c.mget(this.stateKeys.incarnation, this.stateKeys.seal),
      );
      const initialized = incarnation !== null && incarnation !== undefined;
      this.sealEpoch = seal ?? '';
      probe = {
        reachable: true,
        role,
        configProblems: configProblems({ config, role }),
        initialized,
        latencyMs,
      };
      this.initialized = initialized;
    } catch (error) {
      probe = {
        reachable: false,
        configProblems: this.lastProbe?.configProblems ?? [],
        error: `unreachable: ${describeConnectionError(error, this.lastConnectionError, this.closedBeforeReady >= 2)}`,
      };
    }
    this.lastProbe = probe;
    this.lastProbeAt = performance.now();
    return probe;
  }

  /**
   * Whether the node holds any resource key (a lease or a token register) or a floor: state another node could
   * lack. SCANs: used only before initializing a fresh cluster.
   */
  async hasResourceKeys(timeoutMs: number): Promise<boolean> {
    if ((await this.call('check', timeoutMs, (c) => c.exists(this.stateKeys.floor))) === 1) return true;
    let cursor = '0';
    do {
      const [next, keys] = await this.call('check', timeoutMs, (c) =>
        c.scan(cursor, 'MATCH', resourceKeyPattern(this.prefix), 'COUNT', 1000),
      );
      if (keys.length > 0) return true;
      cursor = next;
    } while (cursor !== '0');
    return false;
  }

  async close(): Promise<void> {
    const attached = this.listeners.splice(0);
    for (const [event, listener] of attached) {
      this.client.off(event, listener as (...args: unknown[]) => void);
    }
    if (!this.owned) {
      if (attached.length > 0 && this.client.getMaxListeners() > LISTENERS_PER_EVENT) {
        this.client.setMaxListeners(this.client.getMaxListeners() - LISTENERS_PER_EVENT);
      }
      return;
    }
    this.client.on('error', () => undefined); // a write failing while it quits (EPIPE) is no unhandled 'error' event
    try {
      await withTimeout(this.client.quit(), 1_000, 'quit');
    } catch {
      this.client.disconnect();
    }
  }
}

/**
 * Waits (at most `timeoutMs`) for `client` to be ready, connecting a lazy client first; never throws: the calls that
 * follow fail on their own if it is still not connected.
 */
export async function waitForReady(client: Redis, timeoutMs: number): Promise<void> {
  if (client.status === 'ready') return;
  if (client.status === 'wait') client.connect().catch(() => undefined);
  await new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      client.off('ready', done);
      resolve();
    };
    const timer = setTimeout(done, timeoutMs);
    client.once('ready', done);
  });
}

/** The most listeners of one event a connection puts on its client ('ready': the script load and the ready check). */
const LISTENERS_PER_EVENT = 2;

/** What ioredis says when a call finds no connection (the reason is elsewhere: its last connection error). */
const NOT_CONNECTED = /Stream isn't writeable|Connection is closed/;

/** A reply that is not the Redis protocol (ioredis' parser): the node is something else. */
function isParserError(e: unknown): boolean {
  return e instanceof Error && (e.name === 'ParserError' || /^Protocol error/.test(e.message));
}

/** Start of every "not a Redis server" reason (`nodeStatus().problems`, the `not-redis` node state). */
export const NOT_REDIS = 'not a Redis server';
const NOT_REDIS_PROTOCOL = `${NOT_REDIS}: its reply is not the Redis protocol (is the address a Redis port?)`;
const NOT_REDIS_CLOSES = `${NOT_REDIS}: it accepts connections and closes them without a Redis reply (is the address a Redis port?)`;

/**
 * A node error in words an operator can act on: `connection refused`, `timed out after N ms`, `host not found`,
 * instead of the driver's internals ("Stream isn't writeable and enableOfflineQueue options is false").
 */
export function describeConnectionError(
  error: unknown,
  lastConnectionError?: unknown,
  closesBeforeAnswering = false,
): string {
  if (isParserError(error) || isParserError(lastConnectionError)) return NOT_REDIS_PROTOCOL;
  if (error instanceof NodeTimeoutError) return `timed out after ${error.timeoutMs} ms`;
  const code = (e: unknown): string | undefined =>
    typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'string' ? e.code : undefined;
  const named = (c: string | undefined): string | undefined =>
    c === 'ECONNREFUSED'
      ? 'connection refused'
      : c === 'ENOTFOUND' || c === 'EAI_AGAIN'
        ? 'host not found'
        : c === 'ECONNRESET'
          ? 'connection reset'
          : c === 'ETIMEDOUT'
            ? 'connection timed out'
            : c === 'EHOSTUNREACH' || c === 'ENETUNREACH'
              ? 'host unreachable'
              : undefined;
  const direct = named(code(error));
  if (direct !== undefined) return direct;
  const message = error instanceof Error ? error.message : String(error);
  if (NOT_CONNECTED.test(message)) {
    // A node that keeps closing (or resetting) connections before any Redis reply is not Redis: that says more than
    // the last attempt's reset.
    if (closesBeforeAnswering) return NOT_REDIS_CLOSES;
    return named(code(lastConnectionError)) ?? 'not connected (the connection is closed; reconnecting)';
  }
  return message;
}

/** Races a promise against a timer; the timer never keeps the process alive. */
export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, operation: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new NodeTimeoutError(operation, timeoutMs)), timeoutMs);
    timer.unref?.();
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}
