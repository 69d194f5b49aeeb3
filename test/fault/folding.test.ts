// F21: registers are folded into the floor while acquires, promises and repairs of the same resources run.
//
// Three clients lock a few resources at random, with pauses long enough for them to go idle; a folding loop
// folds every register without a live lease on every node as fast as it can (fold.lua with no idle minimum: the
// most hostile timing folding can have, far more often than the coordinator's own passes); one node restarts
// empty midway and is repaired while the folding goes on. Registers start far above the time-derived first proposal,
// so only the registers and the floor keep tokens ordered. The token checker (G2) judges the history.
//
// Negative control: the same run with a fold that deletes registers *without* raising the floor — tokens must go
// backwards, or the checker is not checking.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { Coordinator } from '@fenced/coordinator';
import { loadScripts, runScript } from '../../packages/coordinator/src/scripts/scripts.js';
import { checkTokens } from '@fenced/test-utils/checkers';
import { History } from '@fenced/test-utils/history';
import { keysOf, nodeKeysOf, tokenKeyPattern } from '../fixtures/keys.js';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { seededRandom } from '@fenced/test-utils/seeded-random';
import { recordedAcquire, recordedRelease, sleep } from '../fixtures/fault/verdict.js';

let env: RedisNodes;
let raw: Redis[];

beforeAll(async () => {
  env = await startRedisNodes(3);
  raw = env.urls.map((url) => new Redis(url).on('error', () => undefined)); // restarts below reset them
});

afterAll(async () => {
  for (const client of raw ?? []) client.disconnect();
  await env?.stop();
});

async function foldingRun(fold: 'atomic-into-floor' | 'delete-only', seed: number): Promise<History> {
  const prefix = `f21-${randomUUID().slice(0, 8)}`;
  const options = { nodes: env.urls, keyPrefix: prefix, maxTtlMs: 1_000, tokenRetentionMs: 1_000 };
  const resources = Array.from({ length: 6 }, (_, i) => `f21:${i}`);
  const init = new Coordinator(options);
  await init.ready();
  await init.close();
  const ahead = (BigInt(Date.now()) << 21n) + 1_000n;
  await Promise.all(
    raw.map((client) =>
      Promise.all(resources.map((r) => client.set(keysOf(r, prefix).token, ahead.toString()))),
    ),
  );
  await Promise.all(raw.map((client) => loadScripts(client)));

  const history = new History();
  const random = seededRandom(seed);
  const deadline = performance.now() + 12_000;
  let stop = false;

  const foldLoop = async (): Promise<void> => {
    while (!stop) {
      for (const client of raw) {
        try {
          if (fold === 'atomic-into-floor') {
            let cursor = '0';
            do {
              const reply = (await runScript(
                client,
                'fold',
                [nodeKeysOf(prefix).incarnation, nodeKeysOf(prefix).floor, nodeKeysOf(prefix).foldLock],
                [cursor, 100, tokenKeyPattern(prefix), 0, 1],
              )) as [number, string?];
              cursor = reply[0] === 1 ? reply[1]! : '0';
            } while (cursor !== '0');
          } else {
            // The broken fold: the register goes, the floor does not rise.
            for (const r of resources) {
              if ((await client.exists(keysOf(r, prefix).lease)) === 0)
                await client.del(keysOf(r, prefix).token);
            }
          }
        } catch {
          // the node is restarting
        }
      }
      await sleep(20);
    }
  };

  const client = async (name: string): Promise<void> => {
    const coordinator = new Coordinator(options);
    try {
      while (performance.now() < deadline) {
        const resource = resources[Math.floor(random() * resources.length)]!;
        const lease = await recordedAcquire(history, name, coordinator, resource, {
          ttlMs: 800,
          waitMs: 800,
        }).catch(() => null);
        if (lease !== null) {
          await sleep(Math.floor(random() * 50));
          await recordedRelease(history, name, lease);
        }
        await sleep(Math.floor(random() * 1_500));
      }
    } finally {
      await coordinator.close();
    }
  };

  const restart = async (): Promise<void> => {
    await sleep(4_000);
    if (env.missing('restartWithoutData') === null) await env.nodes[2]!.restart({ keepData: false });
  };

  const folding = foldLoop();
  await Promise.all([client('A'), client('B'), client('C'), restart()]);
  stop = true;
  await folding;
  return history;
}

describe('folding while acquires, promises and repairs run (F21)', () => {
  it('keeps tokens unique and increasing per resource', async () => {
    const history = await foldingRun('atomic-into-floor', 21);
    const verdict = checkTokens(history);
    expect(verdict.violations).toEqual([]);
    const grants = history.events.filter((e) => e.op === 'acquire' && e.kind === 'ok').length;
    expect(grants).toBeGreaterThan(10);
  });

  it('negative control: a fold that deletes registers without raising the floor sends tokens backwards', async () => {
    const history = await foldingRun('delete-only', 21);
    expect(checkTokens(history).violations.join('\n')).toMatch(/its token is not larger|granted \d+ times/);
  });
});
