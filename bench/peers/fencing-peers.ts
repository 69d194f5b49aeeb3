// The fencing peers of `npm run bench`: the systems a team would pick for a fencing token, each behind the same
// LockLibrary face as fenced and redlock, so every scenario drives them the same way. Each one hands out a token
// with its lock (`PeerHold.token`): etcd's create revision, ZooKeeper's czxid, a Postgres lease row's counter,
// and a single Redis node's INCR. See docs/benchmarks.md, "Fencing peers".
import { randomUUID } from 'node:crypto';
import { Etcd3, type Lease } from 'etcd3';
import { Redis } from 'ioredis';
import zookeeper from 'node-zookeeper-client';
import pg from 'pg';
import { installedVersion, type HeldLock, type LockLibrary } from '../suite/lock-library.js';
import { parseEtcdRevision, parsePgToken, parseZxid, zkLockPosition, type PeerName } from './peer-config.js';
import {
  locateEtcd,
  locateZookeeper,
  processCpuSeconds,
  startEtcdCluster,
  startZookeeper,
  type PeerServer,
} from './peer-servers.js';

/** A lock held through a peer, with the fencing token the peer granted it. */
export interface PeerHold extends HeldLock {
  readonly token: bigint;
}

/** A peer as the bench drives it: a LockLibrary whose acquires return their token. */
export interface FencingPeer extends LockLibrary {
  acquire(resource: string, ttlMs: number): Promise<PeerHold>;
  acquireWaiting(resource: string, ttlMs: number, waitMs: number): Promise<PeerHold>;
}

/** What the peers are given by the bench: its Redis nodes, its Postgres, and the plan's longest ttl. */
export interface PeerContext {
  readonly redisUrls: readonly string[];
  readonly postgresUrl: string;
  /** The postmaster's pid when the bench started Postgres (its CPU is then measured), else undefined. */
  readonly postgresPid?: number | undefined;
  /** The longest lease the plan asks for: the etcd lease and the ZooKeeper session outlive it. */
  readonly maxTtlMs: number;
}

/** Thrown when a peer does not grant an uncontended acquire (the resource is held). */
export class PeerNotGranted extends Error {
  constructor(peer: string, resource: string) {
    super(`${peer}: '${resource}' is held by another holder`);
    this.name = 'PeerNotGranted';
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `attempt` every `intervalMs` until it grants or `waitMs` has passed (the last error is thrown). */
async function pollUntil<T>(attempt: () => Promise<T>, intervalMs: number, waitMs: number): Promise<T> {
  const deadline = performance.now() + waitMs;
  for (;;) {
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof PeerNotGranted) || performance.now() + intervalMs > deadline) throw error;
      await sleep(intervalMs);
    }
  }
}

/** Creates one peer, or says in one line why it is skipped on this machine. */
export async function createPeer(
  name: PeerName,
  context: PeerContext,
): Promise<{ peer: FencingPeer } | { skipped: string }> {
  switch (name) {
    case 'etcd': {
      const found = locateEtcd();
      if ('missing' in found) return { skipped: found.missing };
      return { peer: await createEtcdPeer(found.binary, context) };
    }
    case 'zookeeper': {
      const found = locateZookeeper();
      if ('missing' in found) return { skipped: found.missing };
      return { peer: await createZookeeperPeer(await startZookeeper(found.java, found.jar), context) };
    }
    case 'postgres-lease':
      return { peer: await createPostgresLeasePeer(context) };
    case 'redis-incr':
      return { peer: createRedisIncrPeer(context) };
  }
}

/**
 * etcd, 3 members, through `etcd3`: one lease per client shared by all its locks (etcd's concurrency.Session),
 * kept alive by the client; a lock is a put-if-absent transaction (`Create == 0` → put with the lease), and its
 * token is the key's create revision (the transaction's revision). etcd's own `Lock` helper hides the revision,
 * so the transaction is written out. A waiter watches the key for its deletion (as concurrency.Mutex does).
 */
export async function createEtcdPeer(binary: string, context: PeerContext): Promise<FencingPeer> {
  const leaseTtlS = Math.max(5, Math.ceil(context.maxTtlMs / 1_000));
  const server = await startEtcdCluster(binary, async (endpoints) => {
    const probe = new Etcd3({ hosts: endpoints, dialTimeout: 1_000 });
    try {
      await probe.get('fenced-bench-probe').string();
      return true;
    } catch {
      return false;
    } finally {
      probe.close();
    }
  });
  let client: Etcd3 | undefined;
  let lease: Lease | undefined;
  try {
    client = new Etcd3({ hosts: server.endpoints });
    lease = client.lease(leaseTtlS);
    lease.on('lost', () => undefined); // only at close; an acquire after it throws
    const leaseId = await lease.grant();
    const etcd = client;
    const keyOf = (resource: string): string => `fenced-bench/${resource}`;
    const tryAcquire = async (resource: string): Promise<PeerHold & { revision: bigint }> => {
      const key = keyOf(resource);
      const reply = await etcd
        .if(key, 'Create', '==', 0)
        .then(etcd.put(key).value(leaseId).lease(leaseId))
        .commit();
      const revision = parseEtcdRevision(reply.header.revision);
      if (!reply.succeeded) {
        throw Object.assign(new PeerNotGranted('etcd', resource), { revision });
      }
      return {
        token: revision,
        revision,
        // Deletes only the key this acquire created (its create revision is the token).
        release: async () =>
          void (await etcd
            .if(key, 'Create', '==', revision.toString())
            .then(etcd.delete().key(key))
            .commit()),
      };
    };
    const acquireWaiting = async (resource: string, waitMs: number): Promise<PeerHold> => {
      const deadline = performance.now() + waitMs;
      for (;;) {
        let seenAt: bigint;
        try {
          return await tryAcquire(resource);
        } catch (error) {
          if (!(error instanceof PeerNotGranted)) throw error;
          seenAt = (error as PeerNotGranted & { revision: bigint }).revision;
        }
        const left = deadline - performance.now();
        if (left <= 0) throw new PeerNotGranted('etcd', resource);
        // Wait for a delete after the revision the failed transaction saw, then try again.
        const watcher = await etcd
          .watch()
          .key(keyOf(resource))
          .startRevision((seenAt + 1n).toString())
          .create();
        try {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, left);
            watcher.once('delete', () => {
              clearTimeout(timer);
              resolve();
            });
          });
        } finally {
          await watcher.cancel();
        }
      }
    };
    const closing = { lease, client: etcd };
    return {
      name: 'etcd',
      packageName: 'etcd3',
      version: installedVersion('etcd3'),
      configuration: {
        server: `etcd ${server.version}, ${server.endpoints.length} members on loopback, static bootstrap, defaults (every write fsynced by a quorum)`,
        lease: `one per client, ${leaseTtlS} s, kept alive by etcd3 (shared by every lock, as concurrency.Session)`,
        acquire: 'Txn(If Create(key) == 0, Then Put(key, lease)); token = create revision',
        release: 'Txn(If Create(key) == token, Then Delete(key))',
      },
      waitStrategy: 'watch on the key for its deletion (as concurrency.Mutex), then the transaction again',
      serverCpuSeconds: () => processCpuSeconds(server.pids),
      serverCpuOf: `${server.pids.length} etcd members`,
      peer: true,
      acquire: (resource) => tryAcquire(resource),
      acquireWaiting: (resource, _ttlMs, waitMs) => acquireWaiting(resource, waitMs),
      close: async () => {
        await closing.lease.revoke().catch(() => undefined);
        closing.client.close();
        await server.stop();
      },
    };
  } catch (error) {
    await lease?.revoke().catch(() => undefined);
    client?.close();
    await server.stop();
    throw error;
  }
}

type ZkClient = ReturnType<typeof zookeeper.createClient>;

type ZkError = Error | zookeeper.Exception | null;

/** A node-zookeeper-client call as a promise; its exceptions become Errors that carry its message. */
function zkCall<T>(call: (callback: (error: ZkError, value: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) =>
    call((error, value) => {
      if (error === null || error === undefined) resolve(value);
      else reject(error instanceof Error ? error : new Error(`ZooKeeper: ${error.toString()}`));
    }),
  );
}

/**
 * ZooKeeper through node-zookeeper-client (pure JavaScript: no native build, so it installs on Node 20 as
 * is; the `zookeeper` package builds the C client with node-gyp): the lock recipe of ZooKeeper's documentation,
 * an EPHEMERAL_SEQUENTIAL child of the resource's node, held when it has the lowest sequence; its czxid is the
 * token. A waiter watches the child just before its own (no herd).
 */
export async function createZookeeperPeer(server: PeerServer, context: PeerContext): Promise<FencingPeer> {
  const sessionTimeout = Math.max(10_000, context.maxTtlMs);
  let client: ZkClient | undefined;
  try {
    client = zookeeper.createClient(server.endpoints.join(','), { sessionTimeout, retries: 0 });
    const zk = client;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('ZooKeeper: no session within 30 s')), 30_000);
      zk.once('connected', () => {
        clearTimeout(timer);
        resolve();
      });
      zk.connect();
    });
    const root = '/fenced-bench';
    await zkCall<string>((cb) => zk.mkdirp(root, cb));
    const parents = new Set<string>();
    const parentOf = async (resource: string): Promise<string> => {
      const parent = `${root}/${encodeURIComponent(resource)}`;
      if (!parents.has(parent)) {
        // The resource's lock node, on its first use by this client: one create (the root exists), an existing
        // one is fine. Curator's lock does the same (creatingParentContainersIfNeeded). The throughput
        // scenario's resources are new in every run, so most of its cycles here pay this create too.
        await zkCall<string>((cb) =>
          zk.create(parent, (error, created) =>
            cb(
              error instanceof zookeeper.Exception && error.getCode() === zookeeper.Exception.NODE_EXISTS
                ? null
                : error,
              created,
            ),
          ),
        );
        parents.add(parent);
      }
      return parent;
    };
    const remove = (node: string): Promise<void> =>
      zkCall<void>((cb) => zk.remove(node, -1, (error: ZkError) => cb(error, undefined)));
    /** Creates the lock node; resolves once it holds the lock (or throws when `wait` is false and it does not). */
    const acquire = async (resource: string, waitMs: number | undefined): Promise<PeerHold> => {
      const parent = await parentOf(resource);
      const node = await zkCall<string>((cb) =>
        zk.create(`${parent}/lock-`, zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL, cb),
      );
      const own = node.slice(parent.length + 1);
      const deadline = performance.now() + (waitMs ?? 0);
      try {
        for (;;) {
          // The children and the node's stat travel together (one session, answers in order).
          const [children, stat] = await Promise.all([
            zkCall<string[]>((cb) => zk.getChildren(parent, (error, children) => cb(error, children))),
            zkCall<zookeeper.Stat | null>((cb) => zk.exists(node, (error, stat) => cb(error, stat))),
          ]);
          const position = zkLockPosition(children, own);
          if (stat === null) throw new Error(`ZooKeeper: own lock node ${node} is gone (session expired?)`);
          if (position.held) return { token: parseZxid(stat.czxid), release: () => remove(node) };
          const left = deadline - performance.now();
          if (waitMs === undefined || left <= 0) throw new PeerNotGranted('zookeeper', resource);
          await new Promise<void>((resolve, reject) => {
            const timer = setTimeout(resolve, left);
            zk.exists(
              `${parent}/${position.watch}`,
              () => {
                clearTimeout(timer);
                resolve();
              },
              (error, exists) => {
                if (error) {
                  clearTimeout(timer);
                  reject(error instanceof Error ? error : new Error(`ZooKeeper: ${error.toString()}`));
                } else if (!exists) {
                  clearTimeout(timer);
                  resolve(); // gone before the watch was set: look again
                }
              },
            );
          });
        }
      } catch (error) {
        await remove(node).catch(() => undefined);
        throw error;
      }
    };
    return {
      name: 'zookeeper',
      packageName: 'node-zookeeper-client',
      version: installedVersion('node-zookeeper-client'),
      configuration: {
        server: `ZooKeeper ${server.version}, ${server.endpoints.length} servers on loopback, forceSync=yes (every transaction fsynced by a quorum)`,
        session: `one per client, sessionTimeout ${sessionTimeout} ms`,
        acquire:
          'create EPHEMERAL_SEQUENTIAL <resource>/lock-, getChildren + exists; lowest holds; token = czxid',
        release: 'delete the node',
      },
      waitStrategy: 'exists watch on the next-lower node (the recipe), then getChildren again',
      serverCpuSeconds: () => processCpuSeconds(server.pids),
      serverCpuOf: `${server.pids.length} ZooKeeper servers`,
      peer: true,
      acquire: (resource) => acquire(resource, undefined),
      acquireWaiting: (resource, _ttlMs, waitMs) => acquire(resource, waitMs),
      close: async () => {
        zk.close();
        await server.stop();
      },
    };
  } catch (error) {
    client?.close();
    await server.stop();
    throw error;
  }
}

const PG_TABLE = 'fenced_bench_peer_lease';
const PG_POLL_MS = 10;

/**
 * Postgres: a lease row per resource whose counter column is bumped in the same statement (one committed
 * transaction, synchronous_commit on) that takes the lease: granted when the row is new or its lease has
 * expired or been released; the counter is the token. On the guard's own database. Waiting polls every 10 ms.
 */
export async function createPostgresLeasePeer(context: PeerContext): Promise<FencingPeer> {
  // node-postgres' default pool size (10).
  const pool = new pg.Pool({ connectionString: context.postgresUrl });
  pool.on('error', () => undefined);
  try {
    // Kept across runs (tokens only rise); two processes creating it at once: the loser's error is harmless.
    await pool
      .query(
        `CREATE TABLE IF NOT EXISTS ${PG_TABLE} (
         resource text PRIMARY KEY,
         holder uuid,
         token bigint NOT NULL,
         expires_at timestamptz NOT NULL
       )`,
      )
      .catch((error: unknown) => {
        if ((error as { code?: string }).code !== '23505') throw error;
      });
    const synchronousCommit = (await pool.query<{ synchronous_commit: string }>('SHOW synchronous_commit'))
      .rows[0]?.synchronous_commit;
    const tryAcquire = async (resource: string, ttlMs: number): Promise<PeerHold> => {
      const holder = randomUUID();
      const { rows } = await pool.query<{ token: string }>(
        `INSERT INTO ${PG_TABLE} AS l (resource, holder, token, expires_at)
           VALUES ($1, $2, 1, clock_timestamp() + $3 * interval '1 millisecond')
         ON CONFLICT (resource) DO UPDATE
           SET holder = EXCLUDED.holder, token = l.token + 1, expires_at = EXCLUDED.expires_at
           WHERE l.expires_at <= clock_timestamp()
         RETURNING token`,
        [resource, holder, ttlMs],
      );
      const reply = rows[0];
      if (reply === undefined) throw new PeerNotGranted('postgres-lease', resource);
      const token = parsePgToken(reply.token);
      return {
        token,
        release: async () =>
          void (await pool.query(
            `UPDATE ${PG_TABLE} SET holder = NULL, expires_at = '-infinity'
               WHERE resource = $1 AND holder = $2 AND token = $3`,
            [resource, holder, token.toString()],
          )),
      };
    };
    const pid = context.postgresPid;
    return {
      name: 'postgres-lease',
      packageName: 'pg',
      version: installedVersion('pg'),
      configuration: {
        server: `the bench's Postgres (the guard's database), synchronous_commit ${synchronousCommit ?? '?'}`,
        pool: 'pg.Pool, default size (10)',
        acquire:
          'INSERT … ON CONFLICT DO UPDATE SET token = token + 1 … WHERE expired, RETURNING token (one committed transaction)',
        release: 'UPDATE … SET holder = NULL, expires_at = -infinity WHERE holder and token match',
      },
      waitStrategy: `polling: every ${PG_POLL_MS} ms`,
      ...(pid === undefined
        ? {}
        : {
            serverCpuSeconds: () => processCpuSeconds([pid], true),
            serverCpuOf: 'Postgres (postmaster and backends)',
          }),
      peer: true,
      acquire: (resource, ttlMs) => tryAcquire(resource, ttlMs),
      acquireWaiting: (resource, ttlMs, waitMs) =>
        pollUntil(() => tryAcquire(resource, ttlMs), PG_POLL_MS, waitMs),
      close: () => pool.end(),
    };
  } catch (error) {
    await pool.end().catch(() => undefined);
    throw error;
  }
}

/**
 * The single-node INCR lock (a port of the algorithm of Redisson's RFencedLock and SyncGuard's Redis backend,
 * not their code): one script sets the lock key NX PX and INCRs the resource's fence counter; the counter is the
 * token. One node only (node 0 of the bench), so its token is only as durable as that node's last fsync
 * (bench/probes/incr-amnesia.ts shows it going backwards). Waiting polls every 10 ms.
 */
export function createRedisIncrPeer(context: PeerContext): FencingPeer {
  const url = context.redisUrls[0];
  if (url === undefined) throw new Error('redis-incr needs at least one Redis node, got none');
  const client = new Redis(url, { enableAutoPipelining: true });
  // A lost connection fails the acquire that meets it; the event itself needs no handler's output.
  client.on('error', () => undefined);
  const acquireScript = {
    numberOfKeys: 2,
    lua: `if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('incr', KEYS[2]) end return false`,
  };
  const releaseScript = {
    numberOfKeys: 1,
    lua: `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`,
  };
  client.defineCommand('incrLockAcquire', acquireScript);
  client.defineCommand('incrLockRelease', releaseScript);
  const commands = client as Redis & {
    incrLockAcquire(lock: string, fence: string, owner: string, ttlMs: number): Promise<number | null>;
    incrLockRelease(lock: string, owner: string): Promise<number>;
  };
  const tryAcquire = async (resource: string, ttlMs: number): Promise<PeerHold> => {
    const owner = randomUUID();
    const lock = `incr:{${resource}}`;
    const token = await commands.incrLockAcquire(lock, `${lock}:fence`, owner, ttlMs);
    if (token === null) throw new PeerNotGranted('redis-incr', resource);
    return { token: BigInt(token), release: async () => void (await commands.incrLockRelease(lock, owner)) };
  };
  return {
    name: 'redis-incr',
    packageName: 'ioredis',
    version: installedVersion('ioredis'),
    configuration: {
      port: "of the algorithm of Redisson's RFencedLock / SyncGuard (not their code)",
      nodes: '1 (node 0 of the bench: appendonly yes, appendfsync always)',
      acquire: 'one script: SET lock NX PX ttl, then INCR fence counter; token = the INCR',
      release: 'one script: DEL lock if it holds this owner',
      clients: 'ioredis, enableAutoPipelining: true',
    },
    waitStrategy: `polling: every ${PG_POLL_MS} ms`,
    peer: true,
    leftoverKeyPattern: 'incr:{*}:fence',
    acquire: (resource, ttlMs) => tryAcquire(resource, ttlMs),
    acquireWaiting: (resource, ttlMs, waitMs) =>
      pollUntil(() => tryAcquire(resource, ttlMs), PG_POLL_MS, waitMs),
    close: async () => void (await client.quit().catch(() => client.disconnect())),
  };
}
