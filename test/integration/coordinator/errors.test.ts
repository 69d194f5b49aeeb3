// The coordinator's errors on real nodes: each case asserts the class and what the message tells an operator.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Coordinator, CoordinatorClosedError, UnsafeNodeError } from '@fenced/coordinator';
import { freePort } from '@fenced/test-utils/free-port';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';

let env: RedisNodes;

beforeAll(async () => {
  env = await startRedisNodes(3);
});

afterAll(async () => {
  await env?.stop();
});

describe('coordinator errors', () => {
  it('rejects ready() for a node without an append-only file, naming the node and the setting', async (ctx) => {
    const why = env.missing('restart');
    if (why) ctx.skip(why);
    const node = env.nodes[2]!;
    await node.restart({ keepData: true, options: { persistence: 'none' } });
    const coordinator = new Coordinator({ nodes: env.urls });
    try {
      const error: unknown = await coordinator.ready().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UnsafeNodeError);
      expect((error as UnsafeNodeError).nodes.map((n) => n.node)).toEqual([2]);
      expect((error as UnsafeNodeError).code).toBe('UNSAFE_NODE');
      expect((error as Error).message).toContain(`node 2 (127.0.0.1:${node.port})`);
      expect((error as Error).message).toMatch(/appendonly is 'no'; it must be 'yes'/);
      expect((error as Error).message).toMatch(/unsafeAllowUnsafeNodes/);
      // The opt-out stays: the same node is accepted, loudly, for development.
      const unsafe = new Coordinator({ nodes: env.urls, unsafeAllowUnsafeNodes: true });
      await expect(unsafe.ready()).resolves.toBeUndefined();
      await unsafe.close();
    } finally {
      await coordinator.close();
      await node.restart({ keepData: true, options: { persistence: 'fsync-always' } });
    }
  });

  it('rejects ready() for a node that fsyncs every second, not on every write', async (ctx) => {
    const why = env.missing('restart');
    if (why) ctx.skip(why);
    const node = env.nodes[1]!;
    await node.restart({ keepData: true, options: { persistence: 'fsync-everysec' } });
    const coordinator = new Coordinator({ nodes: env.urls });
    try {
      const error: unknown = await coordinator.ready().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UnsafeNodeError);
      expect((error as Error).message).toMatch(/node 1 .*appendfsync is 'everysec'; it must be 'always'/);
    } finally {
      await coordinator.close();
      await node.restart({ keepData: true, options: { persistence: 'fsync-always' } });
    }
  });

  it('says "connection refused" for a node nobody listens on', async () => {
    const port = await freePort();
    const coordinator = new Coordinator({
      nodes: [...env.urls, `redis://127.0.0.1:${port}`, `redis://127.0.0.1:${await freePort()}`],
      // Five nodes over three that already hold a three-node cluster: another cluster (another prefix).
      keyPrefix: 'five-nodes',
    });
    try {
      const status = await coordinator.nodeStatus();
      expect(status[3]!.reachable).toBe(false);
      expect(status[3]!.problems.join('; ')).toMatch(/^unreachable: connection refused/);
      expect(status[3]!.problems.join('; ')).not.toMatch(/Stream isn't writeable/);
    } finally {
      await coordinator.close();
    }
  });

  it('throws CoordinatorClosedError, not a quorum error, once closed', async () => {
    const coordinator = new Coordinator({ nodes: env.urls });
    await coordinator.ready();
    await coordinator.close();
    const error: unknown = await coordinator.acquire('closed', { ttlMs: 1_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CoordinatorClosedError);
    expect((error as Error).message).toMatch(/the coordinator is closed: create a new Coordinator/);
    await expect(coordinator.ready()).rejects.toBeInstanceOf(CoordinatorClosedError);
  });
});
