// The background re-check finds a node that went down and came back empty, with no vote and no status call to
// reveal it: the repair starts on its own.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Coordinator } from '@fenced/coordinator';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { nodeKeysOf } from '../../../fixtures/coordinator-fixture.js';

let env: RedisNodes;

beforeAll(async () => {
  env = await startRedisNodes(3);
});

afterAll(async () => {
  await env?.stop();
});

describe('the background re-check', () => {
  it('repairs a node that was unreachable at its last probe and came back empty, unasked', async (ctx) => {
    const why = env.missing('kill', 'restartWithoutData');
    if (why) ctx.skip(why);
    const prefix = `recheck-${randomUUID().slice(0, 8)}`;
    const coordinator = new Coordinator({ nodes: env.urls, keyPrefix: prefix, maxTtlMs: 1_000 });
    const direct = new Redis(env.urls[2]!).on('error', () => undefined);
    try {
      await coordinator.ready();
      const target = env.nodes[2]!;
      await target.kill();
      // The last probe sees the node unreachable; it still counts as initialized (it may come back with its data).
      expect((await coordinator.nodeStatus())[2]!.reachable).toBe(false);
      await target.restart({ keepData: false });
      // From here on nothing asks the coordinator anything: only its own re-check can notice the empty node.
      const deadline = Date.now() + 20_000;
      while ((await direct.exists(nodeKeysOf(prefix).incarnation).catch(() => 0)) === 0) {
        if (Date.now() > deadline) throw new Error('the node was never repaired');
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      expect((await coordinator.nodeStatus())[2]).toMatchObject({ reachable: true, voting: true });
    } finally {
      direct.disconnect();
      await coordinator.close();
    }
  });
});
