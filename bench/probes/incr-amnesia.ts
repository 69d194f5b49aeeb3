// `npm run bench:incr-amnesia`: the fault row beside the fencing peers. The single-node INCR lock (the
// redis-incr peer, a port of the Redisson / SyncGuard algorithm) takes a few grants, its node restarts having
// lost what it had not fsynced, and the next grant's token is compared with the last one before; fenced faces the
// same event on one of its five nodes. Real redis-server processes, killed with SIGKILL by pid. It prints a table
// and exits 0 whatever the tokens did: this is a demonstration of the algorithms, not a test of time.
import { randomUUID } from 'node:crypto';
import { Coordinator } from '@fenced/coordinator';
import { RedisNode, type Persistence } from '@fenced/test-utils/redis-node';
import { startRedisNodes } from '@fenced/test-utils/redis-cluster';
import { fencedCoordinatorOptions } from '../suite/lock-library.js';
import { createRedisIncrPeer } from '../peers/fencing-peers.js';

const GRANTS_BEFORE = 5;
const TTL_MS = 5_000;

interface Row {
  lock: string;
  nodes: string;
  event: string;
  before: bigint;
  after: bigint;
}

async function incrRow(persistence: Persistence, keepData: boolean, event: string): Promise<Row> {
  const node = await RedisNode.start({ persistence });
  const peer = createRedisIncrPeer({ redisUrls: [node.url], postgresUrl: '', maxTtlMs: TTL_MS });
  try {
    const resource = `amnesia-${randomUUID().slice(0, 8)}`;
    let before = 0n;
    for (let i = 0; i < GRANTS_BEFORE; i++) {
      const held = await peer.acquire(resource, TTL_MS);
      before = held.token;
      await held.release();
    }
    await node.restart({ keepData });
    // ioredis reconnects by itself; the first acquire after the restart may meet the reconnection.
    const held = await retry(() => peer.acquire(resource, TTL_MS));
    await held.release();
    return {
      lock: 'redis-incr (port)',
      nodes: `1, ${persistence === 'none' ? 'appendonly no' : `appendonly yes, ${persistence}`}`,
      event,
      before,
      after: held.token,
    };
  } finally {
    await peer.close();
    await node.stop();
  }
}

async function fencedRow(): Promise<Row> {
  const redis = await startRedisNodes(5, { useExisting: false });
  const coordinator = new Coordinator(
    fencedCoordinatorOptions(redis.urls, { maxTtlMs: TTL_MS, tokenRetentionMs: TTL_MS }),
  );
  coordinator.on('nodeError', () => undefined);
  try {
    await coordinator.ready();
    const resource = `amnesia-${randomUUID().slice(0, 8)}`;
    let before = 0n;
    for (let i = 0; i < GRANTS_BEFORE; i++) {
      const lease = await coordinator.acquire(resource, { ttlMs: TTL_MS });
      before = lease.token;
      await lease.release();
    }
    await redis.nodes[0]!.restart({ keepData: false });
    const lease = await retry(() => coordinator.acquire(resource, { ttlMs: TTL_MS }));
    await lease.release();
    return {
      lock: 'fenced',
      nodes: '5, appendonly yes, appendfsync always',
      event: 'node 0 SIGKILLed, restarted empty (lost everything, as if never fsynced)',
      before,
      after: lease.token,
    };
  } finally {
    await coordinator.close();
    await redis.stop();
  }
}

async function retry<T>(attempt: () => Promise<T>, tries = 50): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await attempt();
    } catch (error) {
      if (i >= tries) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

async function main(): Promise<void> {
  const rows = [
    await incrRow('none', true, 'node SIGKILLed and restarted: nothing was fsynced (no AOF, no snapshot)'),
    await incrRow(
      'fsync-always',
      false,
      'node SIGKILLed, restarted empty (lost everything, as if never fsynced)',
    ),
    await incrRow('fsync-always', true, 'node SIGKILLed and restarted with its fsynced AOF (control)'),
    await fencedRow(),
  ];
  const lines = [
    `| lock | nodes | event | last token before | first token after | token went backwards |`,
    `| --- | --- | --- | --- | --- | --- |`,
    ...rows.map(
      (r) =>
        `| ${r.lock} | ${r.nodes} | ${r.event} | ${r.before} | ${r.after} | ${r.after <= r.before ? '**yes**' : 'no'} |`,
    ),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(
      `incr-amnesia failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  },
);
