// Node state changes as an operator and an application see them, on real redis-server processes and a real
// Postgres port: the service logs each change once (warn when bad, info when good), and the library publishes
// the same changes on the `fenced:node` diagnostics channel besides its `nodeState` event.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Coordinator, NODE_STATE_CHANNEL, type NodeStateEvent } from '@fenced/coordinator';
import { findOrStartPostgres, type PostgresServer } from '@fenced/test-utils/postgres';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { eventually, startTestService, type TestService } from '../../fixtures/service-fixture.js';

interface LogLine {
  level: number;
  msg: string;
  change?: string;
  node?: number | null;
  detail?: string;
  settings?: string[];
}

const WARN = 40;
const INFO = 30;
const PREFIX = 'nodestate';

describe('node state changes: service log lines and the fenced:node channel', () => {
  let redis: RedisNodes;
  let postgres: PostgresServer;
  const published: NodeStateEvent[] = [];
  const onMessage = (message: unknown): void => void published.push(message as NodeStateEvent);

  beforeAll(async () => {
    redis = await startRedisNodes(3, { useExisting: false, backend: 'process' });
    postgres = await findOrStartPostgres();
    subscribe(NODE_STATE_CHANNEL, onMessage);
  });
  afterAll(async () => {
    unsubscribe(NODE_STATE_CHANNEL, onMessage);
    await redis?.stop();
    await postgres?.stop();
  });

  const linesOf = (service: TestService, from = 0): LogLine[] =>
    service.logs.slice(from).map((line) => JSON.parse(line) as LogLine);
  const changesOf = (service: TestService, node: number, from = 0): LogLine[] =>
    linesOf(service, from).filter((line) => line.change !== undefined && line.node === node);

  it('logs a node killed and restarted once each way, and publishes the same changes', async () => {
    const service = await startTestService(redis.urls, { FENCED_KEY_PREFIX: PREFIX });
    try {
      // The start-up view is logged too: every node up.
      expect(
        linesOf(service)
          .filter((l) => l.msg === 'node up')
          .map((l) => l.node),
      ).toEqual([0, 1, 2]);
      const start = published.length;
      const from = service.logs.length;
      await redis.nodes[2]!.kill();
      await eventually(() => Promise.resolve(changesOf(service, 2, from).some((l) => l.change === 'down')), {
        timeoutMs: 20_000,
        what: 'the service logs node 2 down',
      });
      await redis.nodes[2]!.restart({ keepData: true });
      await eventually(
        () => Promise.resolve(changesOf(service, 2, from).some((l) => l.change === 'voting')),
        { timeoutMs: 20_000, what: 'the service logs node 2 voting again' },
      );

      const lines = changesOf(service, 2, from).map((l) => [l.msg, l.level]);
      expect(lines).toEqual([
        ['node down', WARN],
        ['node not voting', WARN],
        ['node up', INFO],
        ['node voting', INFO],
      ]);
      const down = changesOf(service, 2, from)[0]!;
      expect(down.detail).toMatch(/unreachable/);
      // Two of three still vote: the quorum was never lost.
      expect(linesOf(service).filter((l) => l.msg === 'quorum lost')).toEqual([]);

      const seen = published.slice(start).filter((e) => e.node === 2);
      expect(seen.map((e) => e.change)).toEqual(['down', 'not-voting', 'up', 'voting']);
      expect(seen[0]).toMatchObject({ node: 2, address: `127.0.0.1:${redis.nodes[2]!.port}`, quorum: 2 });
    } finally {
      await service.close();
    }
  });

  it('says a Postgres port given as a node is not a Redis server, in the log and on the channel', async () => {
    const pgPort = new URL(postgres.url).port || '5432';
    const urls = [redis.urls[0]!, redis.urls[1]!, `redis://127.0.0.1:${pgPort}`];
    const start = published.length;
    // Nodes 0 and 1 initialized under this key prefix (all three are, once): two of three vote, the service starts.
    const init = new Coordinator({ nodes: redis.urls, keyPrefix: PREFIX, clusterSettings: 'adopt' });
    await init.ready();
    await init.close();
    const service = await startTestService(urls, { FENCED_KEY_PREFIX: PREFIX });
    try {
      await eventually(() => Promise.resolve(changesOf(service, 2).some((l) => l.change === 'not-redis')), {
        timeoutMs: 20_000,
        what: 'the service logs node 2 as not a Redis server: ' + JSON.stringify(changesOf(service, 2)),
      });
      const line = changesOf(service, 2).find((l) => l.change === 'not-redis')!;
      expect(line).toMatchObject({ level: WARN, msg: 'node not redis' });
      expect(line.detail).toMatch(/not a Redis server/);
      // Said once, however many times the background re-check probes it.
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      expect(changesOf(service, 2).filter((l) => l.change === 'not-redis')).toHaveLength(1);
      expect(published.slice(start).filter((e) => e.node === 2 && e.change === 'not-redis')).toHaveLength(1);
      expect((await service.call('/readyz')).text).toMatch(/not a Redis server/);
    } finally {
      await service.close();
    }
  });

  it('warns once through process.emitWarning when a node is refused as unsafe and nobody listens', async () => {
    unsubscribe(NODE_STATE_CHANNEL, onMessage);
    const warnings: Error[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning);
    process.on('warning', onWarning);
    await redis.nodes[1]!.restart({ keepData: true, options: { persistence: 'none' } });
    const coordinator = new Coordinator({ nodes: redis.urls, keyPrefix: PREFIX, clusterSettings: 'adopt' });
    try {
      await expect(coordinator.ready()).rejects.toMatchObject({ code: 'UNSAFE_NODE' });
      await coordinator.nodeStatus();
      await new Promise((resolve) => setImmediate(resolve));
      const ours = warnings.filter((w) => (w as { code?: string }).code === 'FENCED_UNSAFE_NODE');
      expect(ours).toHaveLength(1);
      expect(ours[0]!.message).toMatch(/node 1 \(127\.0\.0\.1:\d+\) refused: appendonly is 'no'/);

      // With a listener, the listener hears it and nothing is written to the process warnings.
      const listened: NodeStateEvent[] = [];
      const second = new Coordinator({ nodes: redis.urls, keyPrefix: PREFIX, clusterSettings: 'adopt' });
      second.on('nodeState', (event) => listened.push(event));
      await second.ready().catch(() => undefined);
      await second.close();
      await new Promise((resolve) => setImmediate(resolve));
      expect(listened.filter((e) => e.change === 'unsafe').map((e) => e.node)).toEqual([1]);
      expect(warnings.filter((w) => (w as { code?: string }).code === 'FENCED_UNSAFE_NODE')).toHaveLength(1);
    } finally {
      process.off('warning', onWarning);
      subscribe(NODE_STATE_CHANNEL, onMessage);
      await coordinator.close();
      await redis.nodes[1]!.restart({ keepData: true });
    }
  });
});
