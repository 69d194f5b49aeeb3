import { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { Coordinator, type CoordinatorOptions } from '@fenced/coordinator';
import { GuardedStore, createDatabase, type GuardedStoreOptions } from '@fenced/guarded-store';
import {
  createTestSchema,
  findOrStartPostgres,
  type PostgresServer,
  type TestSchema,
} from '@fenced/test-utils/postgres';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { RedisNode, type RedisNodeOptions } from '@fenced/test-utils/redis-node';
import type { CommitRecord, History } from '@fenced/test-utils/history';
import { DEFAULT_KEY_PREFIX, keysOf } from '../../fixtures/keys.js';
import {
  kyselyCounterStore,
  type CounterStore,
  type GuardPath,
} from '@fenced/test-utils/counter-worker/counter-store';
import { COUNTER_TABLES_DDL, type CounterDb } from '@fenced/test-utils/counter-worker/counter-tables';
import { openCounterStore, prismaClientFile, removePrismaClientFile } from './guard-paths.js';

/** The data every fault scenario writes: the counter worker's tables (see there). */
export type { CounterDb } from '@fenced/test-utils/counter-worker/counter-tables';

export interface FaultWorldOptions {
  /** Redis nodes. @defaultValue 5 */
  nodes?: number;
  /** Options of every node, or of node `i` (persistence, extra arguments, a clock shim's environment...). */
  nodeOptions?: RedisNodeOptions | ((index: number) => RedisNodeOptions);
  /** A Postgres cluster of our own, for scenarios that kill it (F13). @defaultValue false */
  ownPostgres?: boolean;
  /** Options of the world's store (timeouts). */
  storeOptions?: Omit<GuardedStoreOptions, 'schema'>;
  /** Pool size of the world's store. @defaultValue 16 */
  maxConnections?: number;
  /** Initialize the fresh cluster (incarnation keys) with a coordinator at start. @defaultValue true */
  initialize?: boolean;
}

/** Coordinator settings that suit two shared, noisy cores: a node call may take a while before it counts against. */
export const FAULT_COORDINATOR_DEFAULTS = Object.freeze({
  nodeTimeoutMs: 400,
  retryDelayMs: 50,
  retryJitterMs: 50,
  maxTtlMs: 3_000,
} satisfies Partial<CoordinatorOptions>);

/**
 * One fault test file's world: N Redis masters it owns (so it can pause, kill and restart them), a fresh
 * Postgres schema with the counter tables and the store's own, and factories for coordinators and raw
 * clients that it closes at the end.
 */
export class FaultWorld {
  private readonly coordinators = new Set<Coordinator>();
  private readonly clients = new Set<Redis>();
  private readonly databases = new Set<Kysely<CounterDb>>();
  /** The pool under each store `anotherStore` made, for `closeStore`. */
  private readonly storeDatabases = new Map<GuardedStore<CounterDb>, Kysely<CounterDb>>();
  /** The counter stores `counterStore` opened through the other guard paths. */
  private readonly counterStores = new Set<CounterStore>();
  private prismaClient: string | undefined;

  private constructor(
    readonly redis: Pick<RedisNodes, 'urls' | 'nodes' | 'stop'>,
    readonly postgres: PostgresServer,
    readonly schema: TestSchema,
    readonly db: Kysely<CounterDb>,
    readonly store: GuardedStore<CounterDb>,
    readonly admin: pg.Pool,
    private readonly storeOptions: Omit<GuardedStoreOptions, 'schema'>,
  ) {
    this.databases.add(db);
  }

  static async start(options: FaultWorldOptions = {}): Promise<FaultWorld> {
    const nodeOptions = options.nodeOptions;
    const redis =
      typeof nodeOptions === 'function'
        ? await startEachNode(options.nodes ?? 5, nodeOptions)
        : await startRedisNodes(options.nodes ?? 5, {
            useExisting: false,
            backend: 'process',
            ...nodeOptions,
          });
    let postgres: PostgresServer | undefined;
    try {
      postgres = await findOrStartPostgres({
        backend: 'process',
        forceThrowaway: options.ownPostgres ?? false,
      });
      const schema = await createTestSchema(postgres, 'fenced_fault');
      const db = createDatabase<CounterDb>({
        connectionString: postgres.url,
        searchPath: schema.schema,
        maxConnections: options.maxConnections ?? 16,
        applicationName: 'fenced-fault',
      });
      const storeOptions = options.storeOptions ?? {};
      const store = new GuardedStore(db, { ...storeOptions, schema: schema.schema });
      await store.migrate();
      const admin = new pg.Pool({
        connectionString: postgres.url,
        max: 3,
        options: `-c search_path=${schema.schema}`,
      });
      admin.on('error', () => undefined); // F13 kills the server under idle connections
      await admin.query(COUNTER_TABLES_DDL);
      const world = new FaultWorld(redis, postgres, schema, db, store, admin, storeOptions);
      if (options.initialize ?? true) {
        // A brand-new cluster is initialized once every node is reachable and empty (DESIGN §3); after this,
        // scenarios may seed registers and every later coordinator finds the nodes voting.
        // A generous node timeout for this one start: on a saturated machine a probe may wait seconds for a node,
        // and a node that did not answer in time makes the fresh cluster look unreachable (ready() then fails).
        const first = world.coordinator({ nodeTimeoutMs: 30_000 });
        await first.ready();
        await world.closeCoordinator(first);
      }
      return world;
    } catch (error) {
      await redis.stop();
      await postgres?.stop();
      throw error;
    }
  }

  get urls(): string[] {
    return this.redis.urls;
  }

  /** A coordinator over `nodes` (the world's URLs unless given, e.g. proxied ones); closed by `close()`. */
  coordinator(options: Partial<CoordinatorOptions> = {}): Coordinator {
    const coordinator = new Coordinator({ ...FAULT_COORDINATOR_DEFAULTS, nodes: this.urls, ...options });
    coordinator.on('nodeError', () => undefined); // faults make nodes fail on purpose
    this.coordinators.add(coordinator);
    return coordinator;
  }

  async closeCoordinator(coordinator: Coordinator): Promise<void> {
    this.coordinators.delete(coordinator);
    await coordinator.close();
  }

  /** Another store over its own small pool (another client's connections, or other timeouts). */
  anotherStore(
    options: Omit<GuardedStoreOptions, 'schema'> & {
      connectionString?: string;
      maxConnections?: number;
    } = {},
  ): GuardedStore<CounterDb> {
    const { connectionString, maxConnections, ...storeOptions } = options;
    const db = createDatabase<CounterDb>({
      connectionString: connectionString ?? this.postgres.url,
      searchPath: this.schema.schema,
      maxConnections: maxConnections ?? 4,
      applicationName: 'fenced-fault',
    });
    this.databases.add(db);
    const store = new GuardedStore(db, { ...this.storeOptions, ...storeOptions, schema: this.schema.schema });
    this.storeDatabases.set(store, db);
    return store;
  }

  /**
   * Destroys the pool of a store `anotherStore` made, before `close()`. A world that outlives many runs (the
   * soak) must close each run's stores: the world keeps every pool it made until then.
   */
  async closeStore(store: GuardedStore<CounterDb>): Promise<void> {
    const db = this.storeDatabases.get(store);
    if (db === undefined) return;
    this.storeDatabases.delete(store);
    this.databases.delete(db);
    await db.destroy().catch(() => undefined);
  }

  /**
   * The counter through guard path `path` (support/guard-paths.ts), with the world's store options: for `kysely`
   * the world's own store (or `anotherStore` with a connection string or pool size), for the others a client over
   * its own pool (application name `fenced-fault`, as the world's store), closed by `close()`.
   */
  async counterStore(
    path: GuardPath,
    options: { connectionString?: string; maxConnections?: number } = {},
  ): Promise<CounterStore> {
    if (path === 'kysely') {
      return options.connectionString === undefined && options.maxConnections === undefined
        ? kyselyCounterStore(this.store)
        : kyselyCounterStore(this.anotherStore(options));
    }
    const store = await openCounterStore({
      path,
      connectionString: options.connectionString ?? this.postgres.url,
      schema: this.schema.schema,
      maxConnections: options.maxConnections ?? 8,
      applicationName: 'fenced-fault',
      guardOptions: this.storeOptions,
      ...(path === 'prisma' ? { prismaClient: this.prismaClientFile() } : {}),
    });
    this.counterStores.add(store);
    return store;
  }

  /**
   * The generated Prisma client of the counter tables (generated once per world, removed by `close()`), for
   * worker processes.
   */
  prismaClientFile(): string {
    this.prismaClient ??= prismaClientFile();
    return this.prismaClient;
  }

  /** How many Postgres pools the world holds open: its own and each store's not closed yet. */
  get openDatabases(): number {
    return this.databases.size;
  }

  /** A raw client with no retries and no offline queue, for set-up, inspection and naive controls. */
  client(url: string): Redis {
    const redis = new Redis(url, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
      connectTimeout: 2_000,
    });
    redis.on('error', () => undefined); // nodes are killed on purpose
    this.clients.add(redis);
    return redis;
  }

  /** Raw clients for `urls`, connected. */
  async connectedClients(urls: readonly string[]): Promise<Redis[]> {
    const clients = urls.map((url) => this.client(url));
    await this.nodesAnswer(clients);
    return clients;
  }

  /** Waits until every node answers PING again (after restarts). Sequencing, bounded by the test timeout. */
  async nodesAnswer(clients: readonly Redis[]): Promise<void> {
    for (const client of clients) {
      for (let i = 0; i < 400; i++) {
        if (client.status === 'ready' && (await client.ping().catch(() => null)) === 'PONG') break;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    }
  }

  /** Creates the counter row of a resource at 0. */
  async ensureCounter(resource: string): Promise<void> {
    await this.admin.query(
      'insert into counter (resource, value) values ($1, 0) on conflict (resource) do nothing',
      [resource],
    );
  }

  async counterValue(resource: string): Promise<bigint> {
    const { rows } = await this.admin.query<{ value: string }>(
      'select value::text as value from counter where resource = $1',
      [resource],
    );
    return BigInt(rows[0]?.value ?? 0);
  }

  async fenceToken(resource: string): Promise<bigint | undefined> {
    return (await this.store.fenceOf(resource))?.token;
  }

  /** The commit log of `resources`, in commit order, as the checkers' commit records. */
  async commits(resources: readonly string[]): Promise<CommitRecord[]> {
    const { rows } = await this.admin.query<{
      seq: string;
      resource: string;
      token: string;
      lease_ref: string | null;
      process: string | null;
      op_id: string | null;
      value: string;
    }>(
      `select seq::text, resource, token::text, lease_ref, process, op_id, value::text
         from commit_log where resource = any($1) order by seq`,
      [resources],
    );
    return rows.map((r) => ({
      resource: r.resource,
      token: BigInt(r.token),
      seq: Number(r.seq),
      value: Number(r.value),
      ...(r.lease_ref === null ? {} : { leaseId: r.lease_ref }),
      ...(r.process === null ? {} : { process: r.process }),
      ...(r.op_id === null ? {} : { opId: r.op_id }),
    }));
  }

  /** Copies the commit log of `resources` into the history (call once, at the end of a run). */
  async recordCommits(history: History, resources: readonly string[]): Promise<void> {
    for (const commit of await this.commits(resources)) history.commit(commit);
  }

  /** How often each operation id took effect, from the commit log (G5). */
  async appliedOperations(resources: readonly string[]): Promise<Map<string, number>> {
    const applied = new Map<string, number>();
    for (const c of await this.commits(resources))
      if (c.opId !== undefined) applied.set(c.opId, (applied.get(c.opId) ?? 0) + 1);
    return applied;
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.coordinators].map((c) => c.close()));
    for (const client of this.clients) client.disconnect();
    await Promise.allSettled([...this.counterStores].map((s) => s.close()));
    await Promise.allSettled([...this.databases].map((d) => d.destroy()));
    await this.admin.end().catch(() => undefined);
    await this.schema.drop().catch(() => undefined);
    await this.postgres.stop();
    await this.redis.stop();
    if (this.prismaClient !== undefined) removePrismaClientFile(this.prismaClient);
  }
}

/** Nodes started one by one with their own options (e.g. one clock shim per node). */
async function startEachNode(
  count: number,
  optionsOf: (index: number) => RedisNodeOptions,
): Promise<Pick<RedisNodes, 'urls' | 'nodes' | 'stop'>> {
  const started = await Promise.allSettled(
    Array.from({ length: count }, (_, i) => RedisNode.start(optionsOf(i))),
  );
  const nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const stop = async (): Promise<void> => {
    await Promise.all(nodes.map((n) => n.stop()));
  };
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await stop();
    throw failed.reason instanceof Error ? failed.reason : new Error(String(failed.reason));
  }
  return { urls: nodes.map((n) => n.url), nodes, stop };
}

export { unique } from '@fenced/test-utils/unique';

export { leaseRef } from '@fenced/test-utils/counter-worker/protocol';

/** The token register key of a resource under the default prefix. */
export function tokenKey(resource: string, prefix = DEFAULT_KEY_PREFIX): string {
  return keysOf(resource, prefix).token;
}

/**
 * Sets a resource's token register on the given nodes to a value far above the time floor of every process
 * (`Date.now() << 20` for the next ~35 years). Token scenarios start here so that a fresh coordinator's first
 * guess is always refused and the tokens depend on the quorum registers alone: the time floor would otherwise
 * mask a register that went backwards.
 */
export async function seedRegistersAhead(
  clients: readonly Redis[],
  resource: string,
  prefix = 'fenced',
): Promise<bigint> {
  const ahead = BigInt(Date.now() + 35 * 365 * 24 * 3_600_000) << 20n;
  await Promise.all(clients.map((c) => c.set(tokenKey(resource, prefix), ahead.toString())));
  return ahead;
}
