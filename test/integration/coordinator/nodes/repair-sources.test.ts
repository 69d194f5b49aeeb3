// F22 on real nodes: two of five nodes restart empty at once, and the repair of one must not count the other as a
// source. Any N − quorum + 1 = 3 sources meet every majority that excludes the repaired node — but only if each of
// them really holds its state: repair-read.lua checks, in the same atomic call as the read, that the source holds
// its incarnation key and is not under repair itself, and nodes/repair.ts refuses a source that says otherwise.
//
// The split: the last grant's token (HIGH + 9) was promised by nodes 0, 1 and 4; nodes 2 and 3 hold an older one
// (HIGH + 5). Nodes 0 and 1 lose their state and node 4 is down: the only valid sources are nodes 2 and 3, too few.
// Counting empty node 1 as a third source would "repair" node 0 to the older token, below a completed grant.
//
// Kills mutants 09 and 10 of test/mutants/ (docs/mutation-testing.md).
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Coordinator } from '@fenced/coordinator';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { eventually, keysOf, nodeKeysOf } from '../../../fixtures/coordinator-fixture.js';

let env: RedisNodes;
const HIGH = 1n << 62n;
const RESOURCE = 'repaired-resource';
const TOKEN_KEY = keysOf(RESOURCE).token;

beforeAll(async () => {
  env = await startRedisNodes(5, { useExisting: false });
});

afterAll(async () => {
  await env?.stop();
});

describe('restart repair on real nodes (F22)', () => {
  it('refuses to copy from a node that is itself empty, then repairs once enough valid sources answer', async (ctx) => {
    const why = env.missing('restartWithoutData', 'kill');
    if (why) ctx.skip(why);
    const c = new Coordinator({
      nodes: env.urls,
      maxTtlMs: 1_000,
      // No folding into the floor during the test: the registers stay where the split put them.
      tokenRetentionMs: 3_600_000,
    });
    const raw = env.urls.map((url) => {
      const redis = new Redis(url);
      redis.on('error', () => undefined); // node 4 is killed on purpose
      return redis;
    });
    try {
      await c.ready();
      await Promise.all(
        raw.map((r, i) => r.set(TOKEN_KEY, (HIGH + ([0, 1, 4].includes(i) ? 9n : 5n)).toString())),
      );
      await env.nodes[0]!.restart({ keepData: false });
      await env.nodes[1]!.restart({ keepData: false });
      await env.nodes[4]!.kill();
      await eventually(async () => {
        const status = await c.nodeStatus();
        return status[0]!.reachable && status[1]!.reachable;
      });

      const error: unknown = await c.repairNode(0).then(
        () => null,
        (e: unknown) => e,
      );

      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toMatch(/only 2 of the 3 source nodes needed could be read/);
      expect((error as Error).message).toMatch(
        /node 1 \([^)]*\): it (has no incarnation key|is under repair)/,
      );
      expect(await raw[0]!.exists(nodeKeysOf().incarnation)).toBe(0);
      expect((await c.nodeStatus())[0]!.voting).toBe(false);

      // Node 4 comes back with its data: now three valid sources answer, and node 0 gets the last grant's token.
      await env.nodes[4]!.restart({ keepData: true });
      for (;;) {
        // A repair started in the background while node 4 was still down fails like the one above; try again.
        const done = await c.repairNode(0).then(
          () => true,
          () => false,
        );
        if (done) break;
      }
      expect(await raw[0]!.get(TOKEN_KEY)).toBe((HIGH + 9n).toString());
    } finally {
      raw.forEach((r) => r.disconnect());
      await c.close();
    }
  });
});
