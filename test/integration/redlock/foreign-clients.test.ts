import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// Three different ioredis modules: fenced's own (the workspace's ioredis 5), a second copy of ioredis 5 and an
// ioredis 4, installed under npm aliases, as an application with its own ioredis would have them.
import { Cluster as OwnCluster } from 'ioredis';
import { Redis as CopyRedis, Cluster as CopyCluster } from 'ioredis-copy';
import V4Redis from 'ioredis-v4';
import Redlock, { ExecutionError } from '@fenced/redlock';
import { Coordinator } from '@fenced/coordinator';
import { InvalidRequestError } from '@fenced/shared';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { lockValue, storedToken } from './redlock-fixture.js';

// Issue 19 item 5: a client passed in is recognised by what it can do, not by `instanceof` against fenced's own
// copy of ioredis. Both foreign kinds run the whole lock life cycle on three real nodes, with a second Redlock on
// the same nodes to show the locks exclude each other and the tokens keep growing.

interface ClientLike {
  quit(): Promise<unknown>;
  disconnect(): void;
}

let env: RedisNodes;
const opened: ClientLike[] = [];
const redlocks: Redlock[] = [];

function ports(): number[] {
  return env.urls.map((url) => Number(new URL(url).port));
}

function track<T extends ClientLike>(client: T): T {
  opened.push(client);
  return client;
}

beforeAll(async () => {
  env = await startRedisNodes(3);
});

afterAll(async () => {
  await Promise.all(redlocks.map((r) => r.coordinator.close()));
  for (const client of opened) client.disconnect();
  await env?.stop();
});

const kinds: Record<string, (port: number) => ClientLike> = {
  'ioredis 4': (port) => track(new V4Redis({ host: '127.0.0.1', port })),
  'a second copy of ioredis 5': (port) => track(new CopyRedis({ host: '127.0.0.1', port })),
};

describe.each(Object.entries(kinds))('@fenced/redlock with clients of %s', (kind, connect) => {
  it('acquires, extends and releases; a second Redlock is excluded; tokens grow', async () => {
    const clients = ports().map(connect);
    // Typed as fenced's own ioredis: the point is that a client of another module works at run time.
    const redlock = new Redlock(clients as never);
    redlocks.push(redlock);
    const other = new Redlock(ports().map(connect) as never, { retryCount: 1 });
    redlocks.push(other);
    const resource = `{foreign}${kind}`;

    let lock = await redlock.acquire([resource], 10_000);
    for (const client of clients) {
      expect(await lockValue(client as never, resource)).toBe(lock.value);
      expect(await storedToken(client as never, resource)).toBe(lock.token);
    }
    const first = lock.token!;
    lock = await lock.extend(20_000);
    expect(lock.token).toBe(first);

    const refused: unknown = await other.acquire([resource], 1_000).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ExecutionError);
    expect((refused as ExecutionError).attempts.length).toBe(2);

    await lock.release();
    for (const client of clients) expect(await lockValue(client as never, resource)).toBeNull();
    const next = await other.acquire([resource], 1_000);
    expect(next.token! > first).toBe(true);
    await next.release();
  });

  it('runs a coordinator over them directly', async () => {
    // Its own key prefix: the Redlocks above initialized these nodes in redlock's key layout (a setting of the
    // cluster), and a coordinator in the default layout is another cluster.
    const coordinator = new Coordinator({ nodes: ports().map(connect) as never, keyPrefix: 'fenced-direct' });
    try {
      await coordinator.ready();
      const lease = await coordinator.acquire(`{foreign-coordinator}${kind}`, { ttlMs: 5_000 });
      expect(lease.token > 0n).toBe(true);
      await lease.release();
    } finally {
      await coordinator.close();
    }
  });
});

describe('clients that cannot be nodes', () => {
  const clusters = {
    "fenced's own ioredis": () => new OwnCluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true }),
    'a second copy of ioredis 5': () =>
      new CopyCluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true }),
    'ioredis 4': () => new V4Redis.Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true }),
  } as const;

  it.each(Object.entries(clusters))(
    'accepts a Cluster client of %s as one quorum member (DESIGN §3c; run on real clusters in test/integration/coordinator/cluster/)',
    async (_kind, create) => {
      const cluster = track(create());
      const redlock = new Redlock([cluster as never]);
      await redlock.quit();
    },
  );

  it('refuses an object that is not a client, naming what was given and the supported versions', () => {
    expect(() => new Coordinator({ nodes: [new Map() as never] })).toThrow(
      new InvalidRequestError(
        'nodes[0] must be a redis:// or rediss:// URL or an ioredis client (ioredis ^4.28.0 || ^5.0.0), got object (Map)',
      ),
    );
  });

  it('refuses a client-like object missing what the coordinator calls, naming it and the supported versions', () => {
    const partial = { sendCommand: () => undefined, options: {}, status: 'ready' };
    const error: unknown = (() => {
      try {
        new Coordinator({ nodes: [partial as never] });
        return undefined;
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect((error as Error).message).toMatch(
      /^nodes\[0\] looks like a Redis client but lacks duplicate, on, off, once, connect, quit, disconnect, ping, config, info, exists, scan, subscribe: ioredis clients of versions \^4\.28\.0 \|\| \^5\.0\.0 are supported, got object$/,
    );
  });
});
