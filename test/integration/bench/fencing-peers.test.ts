import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOrStartPostgres, type PostgresServer } from '@fenced/test-utils/postgres';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { createPeer, PeerNotGranted, type FencingPeer } from '../../../bench/peers/fencing-peers.js';
import { PEER_NAMES, type PeerName } from '../../../bench/peers/peer-config.js';
import { locateEtcd, locateZookeeper } from '../../../bench/peers/peer-servers.js';

// Each fencing peer of the bench on its real server: acquire, a second acquire refused while held, release,
// tokens that rise with every grant, and a waiter granted after the holder's release with a larger token.
// etcd and ZooKeeper are skipped (with the reason) where the machine does not have them.

const missing: Record<PeerName, string | undefined> = {
  etcd: (() => {
    const found = locateEtcd();
    return 'missing' in found ? found.missing : undefined;
  })(),
  zookeeper: (() => {
    const found = locateZookeeper();
    return 'missing' in found ? found.missing : undefined;
  })(),
  'postgres-lease': undefined,
  'redis-incr': undefined,
};

let redis: RedisNodes;
let postgres: PostgresServer;

beforeAll(async () => {
  redis = await startRedisNodes(1, { useExisting: false });
  postgres = await findOrStartPostgres();
});
afterAll(async () => {
  await postgres?.stop();
  await redis?.stop();
});

for (const name of PEER_NAMES) {
  const reason = missing[name];
  describe.skipIf(reason !== undefined)(
    `fencing peer ${name}${reason === undefined ? '' : ` (skipped: ${reason})`}`,
    () => {
      let peer: FencingPeer;

      beforeAll(async () => {
        const created = await createPeer(name, {
          redisUrls: redis.urls,
          postgresUrl: postgres.url,
          postgresPid: (await postgres.cluster?.pid()) ?? undefined,
          maxTtlMs: 10_000,
        });
        if ('skipped' in created) throw new Error(`${name} was found but skipped: ${created.skipped}`);
        peer = created.peer;
      }, 90_000);
      afterAll(async () => {
        await peer?.close();
      });

      it('grants one holder at a time, with a token that rises on every grant of a resource', async () => {
        const resource = `peer-test-${Date.now()}`;
        const first = await peer.acquire(resource, 10_000);
        expect(first.token).toBeGreaterThan(0n);
        await expect(peer.acquire(resource, 10_000)).rejects.toBeInstanceOf(PeerNotGranted);
        await first.release();
        const tokens = [first.token];
        for (let i = 0; i < 5; i++) {
          const held = await peer.acquire(resource, 10_000);
          tokens.push(held.token);
          await held.release();
        }
        for (let i = 1; i < tokens.length; i++) expect(tokens[i]!).toBeGreaterThan(tokens[i - 1]!);
      });

      it('hands the resource to a waiter after the release, with a larger token', async () => {
        const resource = `peer-wait-${Date.now()}`;
        const holder = await peer.acquire(resource, 10_000);
        let granted = false;
        const waiter = peer.acquireWaiting(resource, 10_000, 20_000).then((held) => {
          granted = true;
          return held;
        });
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect(granted).toBe(false);
        await holder.release();
        const next = await waiter;
        expect(next.token).toBeGreaterThan(holder.token);
        await next.release();
      });

      it('gives up a wait that outlasts waitMs', async () => {
        const resource = `peer-timeout-${Date.now()}`;
        const holder = await peer.acquire(resource, 10_000);
        await expect(peer.acquireWaiting(resource, 10_000, 300)).rejects.toBeInstanceOf(PeerNotGranted);
        await holder.release();
      });

      it('reports its server CPU where it has its own server', () => {
        if (peer.serverCpuSeconds === undefined) {
          expect(['redis-incr', 'postgres-lease']).toContain(name);
          return;
        }
        expect(peer.serverCpuSeconds()).toBeGreaterThan(0);
      });
    },
  );
}
