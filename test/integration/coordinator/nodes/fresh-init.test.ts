// fresh-init.lua on a real node: the three steps nodes/fresh-cluster.ts builds its safety argument on. A node that
// restarts empty after being marked refuses to be initialized; a process whose mark is not there is refused; an
// initialized node is never marked or re-initialized. Kills mutant 18 of test/mutants/.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  freshMarkKey,
  incarnationKey,
  nodeStateKeys,
  settingsKey,
} from '../../../../packages/coordinator/src/keys/key-layout.js';
import { interpretReply } from '../../../../packages/coordinator/src/scripts/script-results.js';
import { loadScripts, runScript } from '../../../../packages/coordinator/src/scripts/scripts.js';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';

let env: RedisNodes;

beforeAll(async () => {
  env = await startRedisNodes(1, { useExisting: false });
});

afterAll(async () => {
  await env?.stop();
});

async function connect(): Promise<Redis> {
  const redis = new Redis(env.urls[0]!, { maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  await loadScripts(redis);
  return redis;
}

describe('fresh-init.lua', () => {
  /** Initialization `nonce`'s own mark on the node. */
  const markOf = (prefix: string, nonce: string): string => freshMarkKey(nodeStateKeys(prefix).fresh, nonce);

  const step = async (
    redis: Redis,
    prefix: string,
    name: 'mark' | 'check' | 'init',
    nonce: string,
    argument: string | number,
  ) =>
    interpretReply(
      'fresh-init',
      await runScript(
        redis,
        'fresh-init',
        [
          incarnationKey(prefix),
          markOf(prefix, nonce),
          settingsKey(prefix),
          nodeStateKeys(prefix).floor,
          nodeStateKeys(prefix).seal,
        ],
        [name, nonce, argument],
      ),
    );

  it('initializes a node that kept its mark, and deletes the mark', async () => {
    const redis = await connect();
    const prefix = `fresh-${randomUUID().slice(0, 8)}`;
    try {
      expect(await step(redis, prefix, 'mark', 'n1', 30_000)).toEqual({ kind: 'ok' });
      expect(await step(redis, prefix, 'check', 'n1', '')).toEqual({ kind: 'ok' });
      expect(await step(redis, prefix, 'init', 'n1', 'incarnation-1')).toEqual({ kind: 'ok' });
      expect(await redis.get(incarnationKey(prefix))).toBe('incarnation-1');
      expect(await redis.exists(markOf(prefix, 'n1'))).toBe(0);
      // Initialized: every step answers so and writes nothing.
      expect(await step(redis, prefix, 'mark', 'n2', 30_000)).toEqual({ kind: 'initialized' });
      expect(await redis.exists(markOf(prefix, 'n2'))).toBe(0);
      expect(await step(redis, prefix, 'init', 'n2', 'incarnation-2')).toEqual({ kind: 'initialized' });
      expect(await redis.get(incarnationKey(prefix))).toBe('incarnation-1');
    } finally {
      redis.disconnect();
    }
  });

  it('keeps every process’s mark: each may check and initialize on its own', async () => {
    const redis = await connect();
    const prefix = `fresh-${randomUUID().slice(0, 8)}`;
    try {
      await step(redis, prefix, 'mark', 'first', 30_000);
      await step(redis, prefix, 'mark', 'second', 30_000);
      // One key per initialization, holding its nonce, living the ttl its 'mark' gave.
      expect(await redis.get(markOf(prefix, 'first'))).toBe('first');
      expect(await redis.pttl(markOf(prefix, 'second'))).toBeGreaterThan(0);
      expect(await step(redis, prefix, 'check', 'first', '')).toEqual({ kind: 'ok' });
      expect(await step(redis, prefix, 'check', 'unknown', '')).toEqual({ kind: 'init-mark-lost' });
      expect(await step(redis, prefix, 'init', 'unknown', 'incarnation-0')).toEqual({
        kind: 'init-mark-lost',
      });
      expect(await redis.exists(incarnationKey(prefix))).toBe(0);
      expect(await step(redis, prefix, 'init', 'second', 'incarnation-2')).toEqual({ kind: 'ok' });
      expect(await step(redis, prefix, 'init', 'first', 'incarnation-1')).toEqual({ kind: 'initialized' });
      expect(await redis.get(incarnationKey(prefix))).toBe('incarnation-2');
      // 'init' deletes its own mark; another process's expires with its ttl.
      expect(await redis.exists(markOf(prefix, 'second'))).toBe(0);
      expect(await redis.exists(markOf(prefix, 'first'))).toBe(1);
    } finally {
      redis.disconnect();
    }
  });

  it('refuses to initialize a node that restarted empty after it was marked', async (ctx) => {
    const why = env.missing('restartWithoutData');
    if (why) ctx.skip(why);
    const prefix = `fresh-${randomUUID().slice(0, 8)}`;
    const before = await connect();
    try {
      expect(await step(before, prefix, 'mark', 'n1', 30_000)).toEqual({ kind: 'ok' });
    } finally {
      before.disconnect();
    }
    await env.nodes[0]!.restart({ keepData: false });
    const after = await connect();
    try {
      expect(await step(after, prefix, 'init', 'n1', 'incarnation-1')).toEqual({ kind: 'init-mark-lost' });
      expect(await after.exists(incarnationKey(prefix))).toBe(0);
    } finally {
      after.disconnect();
    }
  });
});
