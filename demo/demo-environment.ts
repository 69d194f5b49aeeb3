import { Redis } from 'ioredis';
import { sql, type Kysely } from 'kysely';
import { GuardedStore, createDatabase } from '@fenced/guarded-store';
import { COUNTER_TABLES_DDL, type CounterDb } from '@fenced/test-utils/counter-worker/counter-tables';
import { CounterWorker } from '@fenced/test-utils/counter-worker/handle';
import { ClockShim } from '@fenced/test-utils/clock-shim';
import { proxyEach, type FaultProxies } from '@fenced/test-utils/fault-proxy';
import { createTestSchema, findOrStartPostgres } from '@fenced/test-utils/postgres';
import { RedisNode } from '@fenced/test-utils/redis-node';
import type { CleanupStack } from './cleanup-stack.js';

/** Redis nodes the demo starts when FENCED_REDIS_URLS is not set. */
export const NODE_COUNT = 5;
/** The node whose clock the demo can jump (F4) and which it restarts empty (F6). */
export const FAULTY_NODE = 2;

export interface DemoRedis {
  readonly urls: readonly string[];
  /** Fault controls (kill, restart, pause), in node order; empty for FENCED_REDIS_URLS. */
  readonly nodes: readonly RedisNode[];
  readonly owned: boolean;
  readonly description: string;
}

export interface DemoDatabase {
  readonly url: string;
  readonly schema: string;
  readonly db: Kysely<CounterDb>;
  readonly store: GuardedStore<CounterDb>;
  readonly description: string;
}

export interface DemoEnvironment {
  readonly redis: DemoRedis;
  /** The clock of node FAULTY_NODE, when the LD_PRELOAD shim could be built. */
  readonly clock: ClockShim | null;
  /** Why there is no clock control, for the skip message. */
  readonly clockProblem: string | undefined;
  /** Worker A reaches every Redis node through its own proxy, so a run can cut A off from some nodes. */
  readonly proxiesOfA: FaultProxies;
  /** The orchestrator's own connections to the nodes, to watch keys appear and expire. */
  readonly probes: readonly Redis[];
  readonly database: DemoDatabase;
  readonly workers: { readonly A: CounterWorker; readonly B: CounterWorker };
}

/**
 * Starts what the demo needs, in parallel: Redis nodes (or FENCED_REDIS_URLS), Postgres (FENCED_DATABASE_URL,
 * the local server, or a throw-away cluster) with a schema of its own, and the two worker processes. Every
 * piece registers its stop on `cleanup` as soon as it is up, so a failure half-way stops what did start.
 */
export async function startDemoEnvironment(cleanup: CleanupStack): Promise<DemoEnvironment> {
  const [redisAndClock, database, workers] = await Promise.all([
    startRedis(cleanup),
    startDatabase(cleanup),
    startWorkers(cleanup),
  ]);
  const { redis, clock, clockProblem } = redisAndClock;
  const proxiesOfA = await proxyEach(redis.urls);
  cleanup.defer('fault proxies', () => proxiesOfA.stop());
  const probes = redis.urls.map((url) => {
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 2 });
    client.on('error', () => undefined);
    return client;
  });
  cleanup.defer('probe connections', async () => {
    await Promise.all(probes.map((probe) => probe.quit().catch(() => probe.disconnect())));
  });
  if (!redis.owned) {
    // Nodes we do not own outlive the demo: remove the keys its runs left there (token registers and
    // incarnation keys under the runs' prefixes; plain Redlock keys expire by themselves).
    cleanup.defer('demo keys on FENCED_REDIS_URLS', async () => {
      await Promise.all(probes.map((probe) => deleteKeys(probe, `${DEMO_KEY_PREFIX}*`)));
    });
  }
  await Promise.all(probes.map((p) => p.connect()));
  return { redis, clock, clockProblem, proxiesOfA, probes, database, workers };
}

async function startRedis(
  cleanup: CleanupStack,
): Promise<{ redis: DemoRedis; clock: ClockShim | null; clockProblem: string | undefined }> {
  const existing = process.env.FENCED_REDIS_URLS?.split(',')
    .map((u) => u.trim())
    .filter(Boolean);
  if (existing && existing.length > 0) {
    return {
      redis: {
        urls: existing,
        nodes: [],
        owned: false,
        description: `${existing.length} nodes from FENCED_REDIS_URLS (no fault control)`,
      },
      clock: null,
      clockProblem: 'the Redis nodes come from FENCED_REDIS_URLS',
    };
  }
  let clock: ClockShim | null = null;
  let clockProblem: string | undefined;
  try {
    clock = await ClockShim.create();
    const shim = clock;
    cleanup.defer('clock shim', () => shim.dispose());
  } catch (error) {
    clockProblem = `the clock shim could not be built (${error instanceof Error ? error.message : String(error)})`;
  }
  const started = await Promise.allSettled(
    Array.from({ length: NODE_COUNT }, (_, i) =>
      RedisNode.start(i === FAULTY_NODE && clock ? { env: clock.env } : {}),
    ),
  );
  const nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  cleanup.defer('redis nodes', async () => {
    await Promise.all(nodes.map((n) => n.stop()));
  });
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw new Error(`could not start redis-server: ${String(failed.reason)}`);
  return {
    redis: {
      urls: nodes.map((n) => n.url),
      nodes,
      owned: true,
      description: `${NODE_COUNT} redis-server processes on ports ${nodes.map((n) => n.port).join(', ')} (appendfsync always)`,
    },
    clock,
    clockProblem,
  };
}

async function startDatabase(cleanup: CleanupStack): Promise<DemoDatabase> {
  const server = await findOrStartPostgres();
  cleanup.defer('postgres', () => server.stop());
  const schema = await createTestSchema(server, 'fenced_demo');
  cleanup.defer(`schema ${schema.schema}`, () => schema.drop());
  const db = createDatabase<CounterDb>({
    connectionString: server.url,
    searchPath: schema.schema,
    maxConnections: 4,
    applicationName: 'fenced-demo',
  });
  cleanup.defer('database pool', () => db.destroy());
  const store = new GuardedStore(db, { schema: schema.schema });
  await store.migrate();
  await sql.raw(COUNTER_TABLES_DDL).execute(db);
  const where = server.owned
    ? server.cluster
      ? `a throw-away cluster on port ${server.cluster.port}`
      : `a ${server.backend} started for the demo`
    : process.env.FENCED_DATABASE_URL
      ? 'FENCED_DATABASE_URL'
      : redactUrl(server.url);
  return {
    url: server.url,
    schema: schema.schema,
    db,
    store,
    description: `${where}, schema ${schema.schema} (dropped at the end)`,
  };
}

async function startWorkers(cleanup: CleanupStack): Promise<{ A: CounterWorker; B: CounterWorker }> {
  const started = await Promise.allSettled([CounterWorker.spawn('A'), CounterWorker.spawn('B')]);
  for (const r of started) {
    if (r.status === 'fulfilled') {
      const worker = r.value;
      cleanup.defer(`worker ${worker.name}`, () => worker.stop());
    }
  }
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason instanceof Error ? failed.reason : new Error(String(failed.reason));
  const [a, b] = started as PromiseFulfilledResult<CounterWorker>[];
  return { A: a!.value, B: b!.value };
}

/** Every coordinator key prefix of the demo starts with this. */
export const DEMO_KEY_PREFIX = 'fenced-demo-';

async function deleteKeys(client: Redis, pattern: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
    cursor = next;
    if (keys.length > 0) await client.del(...keys);
  } while (cursor !== '0');
}

/** A URL without its password, for printing. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.href;
  } catch {
    return '(unparsable url)';
  }
}
