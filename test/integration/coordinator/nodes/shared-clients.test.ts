// Many coordinators over the same clients in one process — one Redlock per test, or per request, over the clients an
// application already has (node-redlock's own suite does this): they load the scripts once per connection, mark and
// initialize fresh nodes once, leave no listener on the clients after close, and make Node print no
// MaxListenersExceededWarning.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import Redlock from '@fenced/redlock';
import { eventually } from '@fenced/test-utils/eventually';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { SCRIPT_NAMES } from '../../../../packages/coordinator/src/scripts/scripts.js';
import { freshMarkKey, nodeKeysOf } from '../../../fixtures/keys.js';

let env: RedisNodes;
let admin: Redis[] = [];

beforeAll(async () => {
  env = await startRedisNodes(3, { useExisting: false });
  admin = env.urls.map((url) => new Redis(url));
});

afterAll(async () => {
  admin.forEach((a) => a.disconnect());
  await env?.stop();
});

/** Calls of `command` (as INFO commandstats names it) on each node since the last CONFIG RESETSTAT. */
async function calls(command: string): Promise<number[]> {
  return Promise.all(
    admin.map(async (a) =>
      Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(await a.info('commandstats'))?.[1] ?? 0),
    ),
  );
}

describe('twelve Redlocks made at once over the same three clients', () => {
  it('load the scripts and mark the fresh nodes once, warn about nothing, and leave no listener behind', async () => {
    const clients = env.urls.map((url) => new Redis(url));
    await Promise.all(clients.map((c) => c.ping()));
    await Promise.all(admin.map((a) => a.config('RESETSTAT')));
    const before = clients.map((c) => ({
      ready: c.listenerCount('ready'),
      error: c.listenerCount('error'),
      close: c.listenerCount('close'),
      max: c.getMaxListeners(),
    }));
    const warnings: Error[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning);
    process.on('warning', onWarning);
    // What each node runs, scripts' inner calls included: the marks are SETs of their own keys (fresh-init.lua).
    const monitors = await Promise.all(admin.map((a) => a.monitor()));
    const seen = monitors.map(() => [] as string[][]);
    monitors.forEach((m, i) => m.on('monitor', (_time: string, args: string[]) => void seen[i]!.push(args)));
    try {
      const redlocks = Array.from({ length: 12 }, () => new Redlock(clients, { keyPrefix: 'shared' }));
      const locks = await Promise.all(redlocks.map((r, i) => r.acquire([`shared-${i}`], 5_000)));
      await Promise.all(locks.map((l) => l.release()));
      // One SCRIPT LOAD per script per connection (twelve without sharing the load in flight).
      for (const loads of await calls('script\\|load')) expect(loads).toBe(SCRIPT_NAMES.length);
      // The fresh nodes were marked once (fresh-init.lua), not once per Redlock. An ECHO after everything else, seen
      // by each monitor, says it has seen all that came before.
      const marker = `marker-${process.pid}`;
      await Promise.all(admin.map((a) => a.echo(marker)));
      await eventually(() => seen.every((s) => s.some((args) => args[1] === marker)), {
        timeoutMs: 10_000,
        what: 'every monitor to see the marker',
      });
      const markStem = freshMarkKey(nodeKeysOf('shared').initMarks, '');
      const marks = seen.map(
        (s) => s.filter((args) => args[0]?.toLowerCase() === 'set' && args[1]?.startsWith(markStem)).length,
      );
      expect(marks).toEqual([1, 1, 1]);
      // Each node was looked at once per Redlock (MGET is the probe's read, node-connection.ts): the eleven that
      // waited for the first one's initialization took its outcome instead of looking at every node again.
      expect(await calls('mget')).toEqual([12, 12, 12]);
      await Promise.all(redlocks.map((r) => r.coordinator.close()));
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning')).toEqual([]);
      expect(
        clients.map((c) => ({
          ready: c.listenerCount('ready'),
          error: c.listenerCount('error'),
          close: c.listenerCount('close'),
          max: c.getMaxListeners(),
        })),
      ).toEqual(before);
    } finally {
      process.off('warning', onWarning);
      monitors.forEach((m) => m.disconnect());
      clients.forEach((c) => c.disconnect());
    }
  });
});

describe('Redlocks made one after another over the same clients', () => {
  it('load the scripts once per connection, and again on a new connection', async () => {
    const clients = env.urls.map((url) => new Redis(url));
    await Promise.all(clients.map((c) => c.ping()));
    await Promise.all(admin.map((a) => a.config('RESETSTAT')));
    const lockAndClose = async (i: number): Promise<void> => {
      const redlock = new Redlock(clients, { keyPrefix: 'sequential' });
      const lock = await redlock.acquire([`sequential-${i}`], 5_000);
      await lock.release();
      await redlock.coordinator.close();
    };
    try {
      for (let i = 0; i < 4; i++) await lockAndClose(i);
      // The node keeps its script cache: the connection that loaded them needs no second load.
      for (const loads of await calls('script\\|load')) expect(loads).toBe(SCRIPT_NAMES.length);
      // A new connection (a server restart closes the old one, and its cache is gone) loads them again.
      await Promise.all(
        clients.map(async (c) => {
          c.disconnect(true);
          await new Promise((resolve) => c.once('ready', resolve));
        }),
      );
      await lockAndClose(4);
      for (const loads of await calls('script\\|load')) expect(loads).toBe(2 * SCRIPT_NAMES.length);
    } finally {
      clients.forEach((c) => c.disconnect());
    }
  });
});
