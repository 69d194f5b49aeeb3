import { randomBytes } from 'node:crypto';
import { LeaseLostError, type ErrorBody, type LeaseResponseBody, type LockStatusBody } from '@fenced/shared';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { CoordinatorClient } from '@fenced/coordinator/client';
import { resourceKeys } from '../../fixtures/keys.js';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { RespConnection } from '@fenced/test-utils/resp-connection';
import {
  eventually,
  lockPath,
  startServiceProcess,
  unique,
  type ServiceProcess,
} from '../../fixtures/service-fixture.js';

// Several service processes over the same Redis nodes, as an operator runs them behind a load balancer. The
// service keeps no state of its own (DESIGN §5): a lease is its id and the nodes' keys, so any replica can
// extend or release it, a release through one replica wakes a waiter on another (the release is published on
// the nodes), and a replica that dies takes nothing with it — its leases live on in Redis until their ttl.
//
// Each replica is started as `fenced-coordinator` is in production (node + the bin entry, configuration in
// the environment) and driven over HTTP only. No assertion depends on timing beyond liveness bounds: the
// bounds that are asserted follow from the ttl (a lease's keys live at least ttlMs from before its request).

const KEY = randomBytes(24).toString('base64');
const PREFIX = 'replicas';

interface Reply<T> {
  status: number;
  body: T;
}

async function call<T>(
  replica: ServiceProcess,
  method: string,
  path: string,
  json?: unknown,
): Promise<Reply<T>> {
  const response = await fetch(`${replica.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${KEY}`,
      ...(json !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
    signal: AbortSignal.timeout(30_000),
  });
  const text = await response.text();
  return { status: response.status, body: (text === '' ? null : JSON.parse(text)) as T };
}

describe('three coordinator processes over the same five Redis nodes', () => {
  let redis: RedisNodes;
  const replicas: ServiceProcess[] = [];
  const clients: CoordinatorClient[] = [];

  const replica = (n: 1 | 2 | 3): ServiceProcess => replicas[n - 1]!;
  const client = (n: 1 | 2 | 3): CoordinatorClient => clients[n - 1]!;

  beforeAll(async () => {
    redis = await startRedisNodes(5, { useExisting: false });
    const env = {
      FENCED_REDIS_URLS: redis.urls.join(','),
      FENCED_API_KEYS: KEY,
      FENCED_KEY_PREFIX: PREFIX,
      FENCED_LOG_LEVEL: 'info',
      FENCED_SHUTDOWN_GRACE_MS: '2000',
    };
    // Started together over fresh nodes, as in a first deployment: they initialize the nodes together (SET NX).
    const started = await Promise.allSettled([1, 2, 3].map(() => startServiceProcess({ env })));
    for (const result of started) if (result.status === 'fulfilled') replicas.push(result.value);
    const failed = started.find((result) => result.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    for (const r of replicas) clients.push(new CoordinatorClient({ baseUrl: r.url, apiKey: KEY }));
  });

  afterAll(async () => {
    for (const c of clients) c.close();
    // Every process by its pid: SIGTERM drains it; one that does not exit in time gets SIGKILL.
    await Promise.all(
      replicas.map(async (r) => {
        const timer = setTimeout(() => void r.kill('SIGKILL'), 10_000);
        await r.kill('SIGTERM');
        clearTimeout(timer);
      }),
    );
    await redis?.stop();
  });

  beforeEach(({ onTestFailed }) => {
    onTestFailed(() => {
      for (const [i, r] of replicas.entries()) {
        console.error(
          `--- replica ${i + 1} (pid ${r.pid}${r.exited() ? ', exited' : ''}), last lines:\n${r.tail()}`,
        );
      }
    });
  });

  /** Milliseconds of the lease key's remaining life on each node (-2: no key). */
  async function leaseKeyPttls(resource: string): Promise<number[]> {
    return Promise.all(
      redis.urls.map(async (url) => {
        const connection = await RespConnection.connect(Number(new URL(url).port));
        try {
          return Number(await connection.send('PTTL', resourceKeys(PREFIX, resource).lease));
        } finally {
          connection.close();
        }
      }),
    );
  }

  /** How many nodes have a subscriber on the resource's release channel. */
  async function nodesWithSubscribers(resource: string): Promise<number> {
    const counts = await Promise.all(
      redis.urls.map(async (url) => {
        const connection = await RespConnection.connect(Number(new URL(url).port));
        try {
          const reply = await connection.send('PUBSUB', 'NUMSUB', resourceKeys(PREFIX, resource).channel);
          return Array.isArray(reply) ? Number(reply[1]) : 0;
        } finally {
          connection.close();
        }
      }),
    );
    return counts.filter((count) => count > 0).length;
  }

  it('extends and releases through replica 2 a lease acquired through replica 1; replica 3 then grants a larger token', async () => {
    const resource = unique('replicas-handover');
    const lease = await client(1).acquire(resource, { ttlMs: 10_000 });

    const extended = await call<LeaseResponseBody>(
      replica(2),
      'POST',
      lockPath(resource, 'leases', lease.id, 'extend'),
      { ttlMs: 20_000 },
    );
    expect(extended.status).toBe(200);
    expect(extended.body).toMatchObject({
      resource,
      leaseId: lease.id,
      token: lease.token.toString(),
      ttlMs: 20_000,
    });
    expect(await client(3).inspect(resource)).toEqual({ held: true, token: lease.token });

    const refused = await call<ErrorBody>(replica(3), 'POST', lockPath(resource, 'leases'), { ttlMs: 1_000 });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('LOCKED');

    const released = await call<null>(replica(2), 'DELETE', lockPath(resource, 'leases', lease.id));
    expect(released.status).toBe(204);
    // Released, not expired (it had 20 s left): no wait needed for the next grant, and the old id is dead
    // everywhere.
    const next = await client(3).acquire(resource, { ttlMs: 10_000 });
    expect(next.token).toBeGreaterThan(lease.token);
    const stale = await call<ErrorBody>(
      replica(1),
      'POST',
      lockPath(resource, 'leases', lease.id, 'extend'),
      {
        ttlMs: 10_000,
      },
    );
    expect(stale.status).toBe(409);
    expect(stale.body.error.code).toBe('LEASE_LOST');
    await next.release();
    expect(await client(1).inspect(resource)).toEqual({ held: false });
  });

  it('wakes a waiter on replica 2 when the holder from replica 1 is released through replica 3', async () => {
    const resource = unique('replicas-wake');
    const TTL_MS = 30_000;
    const holderSentAt = performance.now();
    const holder = await client(1).acquire(resource, { ttlMs: TTL_MS });

    const waiting = client(2).acquire(resource, { ttlMs: 10_000, waitMs: 20_000 });
    waiting.catch(() => undefined);
    // Replica 2 subscribes to the release channel only after its first attempt was refused: from then on it
    // is waiting. Nobody else listens on that channel (the holder does not wait).
    await eventually(async () => (await nodesWithSubscribers(resource)) >= 3, {
      timeoutMs: 20_000,
      what: 'replica 2 waits on the release channel of a majority of nodes',
    });

    const released = await call<null>(replica(3), 'DELETE', lockPath(resource, 'leases', holder.id));
    expect(released.status).toBe(204);
    const waiter = await waiting;
    const grantedBy = performance.now();

    expect(waiter.resource).toBe(resource);
    expect(waiter.token).toBeGreaterThan(holder.token);
    // The holder's keys lived at least TTL_MS from before its acquire was sent, and the waiter gave up after
    // 20 s: a grant before then came from the release through replica 3, not from the holder's expiry. (Its
    // message is what wakes the waiter, unless the release landed while replica 2's one re-attempt right after
    // subscribing was still in flight; that attempt then wins. Either way, the release freed the resource.)
    expect(grantedBy - holderSentAt).toBeLessThan(TTL_MS);
    await waiter.release();
  });

  it('keeps the leases of a replica killed with SIGKILL until their ttl; the other replicas stay ready and grant them after', async () => {
    const TTL_MS = 8_000;
    const kept = unique('replicas-killed-kept');
    const raw = unique('replicas-killed-raw');

    const keptSentAt = performance.now();
    const lost: unknown[] = [];
    const keptLease = await client(1).acquire(kept, {
      ttlMs: TTL_MS,
      autoExtend: true,
      onLost: (error) => lost.push(error),
    });
    const rawSentAt = performance.now();
    const rawGrant = await call<LeaseResponseBody>(replica(1), 'POST', lockPath(raw, 'leases'), {
      ttlMs: TTL_MS,
    });
    expect(rawGrant.status).toBe(201);
    const rawToken = BigInt(rawGrant.body.token);

    await replica(1).kill('SIGKILL');
    expect(replica(1).exited()).toBe(true);

    for (const n of [2, 3] as const) {
      const ready = await call<{ ready: boolean }>(replica(n), 'GET', '/readyz');
      expect(ready.status).toBe(200);
      expect(ready.body.ready).toBe(true);
    }
    for (const [resource, token] of [
      [kept, keptLease.token],
      [raw, rawToken],
    ] as const) {
      // Held, as a majority of the nodes sees it, with the dead replica's token; a new acquire is refused.
      const status = await call<LockStatusBody>(replica(2), 'GET', lockPath(resource));
      expect(status.status).toBe(200);
      expect(status.body).toEqual({ resource, held: true, token: token.toString() });
      expect(await client(3).inspect(resource)).toEqual({ held: true, token });
      const refused = await call<ErrorBody>(replica(3), 'POST', lockPath(resource, 'leases'), {
        ttlMs: 1_000,
      });
      expect(refused.status).toBe(409);
      expect(refused.body.error.code).toBe('LOCKED');
      const living = (await leaseKeyPttls(resource)).filter((pttl) => pttl > 0);
      expect(living.length).toBeGreaterThanOrEqual(3);
    }

    // Waiting through the other replicas: granted once the keys expire, never before.
    const timed = async <T>(granting: Promise<T>): Promise<[T, number]> => [
      await granting,
      performance.now(),
    ];
    const [[keptAgain, keptGrantedBy], [rawAgain, rawGrantedBy]] = await Promise.all([
      timed(client(2).acquire(kept, { ttlMs: 5_000, waitMs: 30_000 })),
      timed(client(3).acquire(raw, { ttlMs: 5_000, waitMs: 30_000 })),
    ]);
    expect(keptAgain.token).toBeGreaterThan(keptLease.token);
    expect(rawAgain.token).toBeGreaterThan(rawToken);
    // Each old lease's keys were set no earlier than its request was sent and lived ttlMs; its validity is
    // less than that. Neither the kill nor anything else ended them early.
    expect(keptGrantedBy - keptSentAt).toBeGreaterThanOrEqual(keptLease.validityMs);
    expect(rawGrantedBy - rawSentAt).toBeGreaterThanOrEqual(rawGrant.body.validityMs);

    // The client that held a lease through the dead replica could not extend it, and reported it lost.
    await eventually(() => Promise.resolve(keptLease.signal.aborted), {
      timeoutMs: 10_000,
      what: 'the kept lease is reported lost',
    });
    expect(keptLease.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(lost).toHaveLength(1);

    // The survivors keep serving: release, acquire and release again through either of them.
    await keptAgain.release();
    await rawAgain.release();
    for (const n of [2, 3] as const) {
      const again = await client(n).acquire(kept, { ttlMs: 2_000 });
      expect(again.token).toBeGreaterThan(keptAgain.token);
      await again.release();
      expect((await call<{ ready: boolean }>(replica(n), 'GET', '/readyz')).status).toBe(200);
    }
  });
});
