// Where a lone acquire's time goes (issue 21, item 2: acquire p50 at concurrency 1 against redlock's):
//   node --conditions=@fenced/source --import tsx bench/probes/acquire-path.ts [--samples 1000] [--idle-samples 60]
//        [--idle-ms 100]
// Starts five redis-servers of its own (DESIGN §3 persistence: appendonly, fsync always; free ports, temporary
// directories), initializes them with a Coordinator, and times, one call at a time and interleaved call by call
// (ABCDEF ABCDEF …, so drift in the machine spreads over all of them), the acquire of:
//   fenced           Coordinator.acquire, as scenario 2 times it;
//   fenced script    acquire.lua with the keys and arguments NodeConnection sends for one acquire, by five plain
//                    ioredis clients, resolved at the third reply: the nodes' part of fenced's acquire, with no
//                    client library around it (every reply is checked to be a grant with its promise);
//   redlock script   node-redlock 5's own acquire script (read from its installed package), the same way: the
//                    nodes' part of a redlock acquire, at the same quorum;
//   redlock          node-redlock 5's acquire (it waits for all five replies);
//   SET, 3 of 5      a bare SET on every node, resolved at the third reply: the machine's part (loopback, one
//                    script-less write and its fsync);
//   GET, one node    a bare GET on one node: a round trip with no write and no fsync.
// Each acquire is released before the next call (not timed). Three ways of spacing the calls:
//   back to back     the next call as soon as the release resolved, as scenario 2 does (fenced's release
//                    resolves at a majority, so its next acquire meets the last two nodes' release replies);
//   settled          after each release, one PING per node through the plain clients, and only then the next
//                    call: nothing of the last cycle is still in flight;
//   idle             each call after --idle-ms with nothing running (the machine's wake-up from idle).
// The fenced − fenced script and fenced script − redlock script rows of each spacing are the client's and the
// nodes' shares of the difference to redlock. Servers are stopped by their process ids. Measures; never fails on
// a figure.
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { Coordinator } from '@fenced/coordinator';
import { startRedisNodes } from '@fenced/test-utils/redis-cluster';
import { Redis } from 'ioredis';
import type { default as RedlockClass } from '../../node_modules/redlock/dist/index.js';
import { nodeStateKeys, resourceKeys } from '../../packages/coordinator/src/keys/key-layout.js';
import { loadScriptSource } from '../../packages/coordinator/src/scripts/scripts.js';
import { positiveInteger } from '../suite/options.js';
import { redlockSources } from './redlock-scripts.js';
import { quantileSorted } from '../suite/statistics.js';
import { scriptKeys } from '../../packages/coordinator/src/scripts/script-keys.js';

// redlock 5's package.json "exports" has no "types" condition (see lock-library.ts).
const redlockPackage: string = 'redlock';
const { default: Redlock } = (await import(redlockPackage)) as { default: typeof RedlockClass };

const PREFIX = 'fenced';
const TTL_MS = 10_000;
/** Resources each variant cycles over, as scenario 2's worker does. */
const RESOURCES = 100;
/** Untimed calls of each variant first: JIT, connections, the nodes' scripts cache. */
const WARMUP = 100;
const IDLE_WARMUP = 5;

const { values } = parseArgs({
  options: {
    samples: { type: 'string', default: '1000' },
    'idle-samples': { type: 'string', default: '60' },
    'idle-ms': { type: 'string', default: '100' },
  },
});
const samples = positiveInteger('--samples', values.samples, 10, 1_000_000);
const idleSamples = positiveInteger('--idle-samples', values['idle-samples'], 5, 10_000);
const idleMs = positiveInteger('--idle-ms', values['idle-ms'], 1, 10_000);

/** One timed call: resolves with the release to run before the next one. */
type Variant = { readonly name: string; readonly acquire: (i: number) => Promise<() => Promise<unknown>> };

/** Resolves once `needed` of the promises resolved (any rejection rejects). */
function firstOf(promises: readonly Promise<unknown>[], needed: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let done = 0;
    for (const promise of promises) {
      promise.then(() => {
        if (++done === needed) resolve();
      }, reject);
    }
  });
}

const nodes = await startRedisNodes(5, { useExisting: false });
const coordinator = new Coordinator({ nodes: nodes.urls, maxTtlMs: 40_000, tokenRetentionMs: 40_000 });
coordinator.on('nodeError', () => undefined);
const clients = nodes.urls.map((url) => new Redis(url, { maxRetriesPerRequest: 0 }));
const redlock = new Redlock(clients, { driftFactor: 0.01, retryCount: 0 });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let unexpected = 0;
try {
  await coordinator.ready();
  const state = nodeStateKeys(PREFIX);
  const seals = await Promise.all(clients.map(async (c) => (await c.get(state.seal)) ?? ''));
  const load = (source: string) =>
    Promise.all(clients.map((c) => c.script('LOAD', source) as Promise<string>));
  const fencedAcquire = await load(loadScriptSource('acquire'));
  const fencedRelease = await load(loadScriptSource('release'));
  const redlockScripts = redlockSources();
  const redlockAcquire = await load(redlockScripts.acquire);
  // Above every token the nodes hold (a fresh cluster's floor is time-derived, about 1.9e18 today) and far below
  // the 2^63 − 1 limit, so every proposal is promised.
  let proposal = 5n * 10n ** 18n;
  const leaseId = () => randomBytes(16).toString('base64url');

  const variants: Variant[] = [
    {
      name: 'fenced',
      acquire: async (i) => {
        const lease = await coordinator.acquire(`path:${i % RESOURCES}`, { ttlMs: TTL_MS });
        return () => lease.release();
      },
    },
    {
      name: 'fenced script',
      acquire: async (i) => {
        const k = resourceKeys(PREFIX, `raw:${i % RESOURCES}`);
        const keys = [...scriptKeys.acquire(state), ...scriptKeys.acquireItem(k)];
        const id = leaseId();
        const token = (++proposal).toString();
        await firstOf(
          clients.map(async (c, n) => {
            const reply = (await c.evalsha(
              fencedAcquire[n]!,
              keys.length,
              ...keys,
              id,
              TTL_MS,
              token,
              seals[n]!,
              clients.length,
            )) as unknown[][];
            if (JSON.stringify(reply) !== '[[1,1]]') unexpected++;
          }),
          3,
        );
        return () =>
          Promise.all(
            clients.map((c, n) => c.evalsha(fencedRelease[n]!, 2, k.lease, k.record, id, k.channel)),
          );
      },
    },
    {
      name: 'redlock script',
      acquire: async (i) => {
        const key = `raw-redlock:${i % RESOURCES}`;
        const id = leaseId();
        await firstOf(
          clients.map((c, n) => c.evalsha(redlockAcquire[n]!, 1, key, id, TTL_MS)),
          3,
        );
        return () => Promise.all(clients.map((c) => c.del(key)));
      },
    },
    {
      name: 'redlock',
      acquire: async (i) => {
        const lock = await redlock.acquire([`redlock:${i % RESOURCES}`], TTL_MS);
        return () => lock.release();
      },
    },
    {
      name: 'SET, 3 of 5',
      acquire: async (i) => {
        const key = `set:${i % RESOURCES}`;
        await firstOf(
          clients.map((c) => c.set(key, 'x', 'PX', TTL_MS)),
          3,
        );
        return () => Promise.all(clients.map((c) => c.del(key)));
      },
    },
    {
      name: 'GET, one node',
      acquire: async (i) => {
        await clients[0]!.get(`set:${i % RESOURCES}`);
        return () => Promise.resolve();
      },
    },
  ];

  const spacings = [
    {
      name: 'back to back',
      count: samples,
      warmup: WARMUP,
      before: () => Promise.resolve(),
      after: () => Promise.resolve(),
    },
    {
      name: 'settled',
      count: samples,
      warmup: WARMUP,
      before: () => Promise.resolve(),
      after: () => Promise.all(clients.map((c) => c.ping())),
    },
    {
      name: `idle ${idleMs} ms`,
      count: idleSamples,
      warmup: IDLE_WARMUP,
      before: () => sleep(idleMs),
      after: () => Promise.resolve(),
    },
  ];
  const rows: string[] = [];
  for (const spacing of spacings) {
    const times = new Map<string, number[]>(variants.map((v) => [v.name, []]));
    for (let i = 0; i < spacing.warmup + spacing.count; i++) {
      for (const variant of variants) {
        await spacing.before();
        const start = performance.now();
        const release = await variant.acquire(i);
        const elapsed = performance.now() - start;
        if (i >= spacing.warmup) times.get(variant.name)!.push(elapsed);
        await release();
        await spacing.after();
      }
    }
    process.stderr.write(`${spacing.name}: ${spacing.warmup + spacing.count} calls of each variant\n`);
    const p50 = new Map<string, number>();
    for (const [name, list] of times) {
      const sorted = [...list].sort((a, b) => a - b);
      const median = quantileSorted(sorted, 0.5);
      p50.set(name, median);
      rows.push(
        `| ${spacing.name} | ${name} | ${median.toFixed(3)} | ${quantileSorted(sorted, 0.9).toFixed(3)} | ${list.length} |`,
      );
    }
    const diff = (a: string, b: string) => ((p50.get(a)! - p50.get(b)!) * 1_000).toFixed(0);
    rows.push(
      `| ${spacing.name} | fenced − fenced script (the client) | ${diff('fenced', 'fenced script')} µs | | |`,
      `| ${spacing.name} | fenced script − redlock script (the nodes) | ${diff('fenced script', 'redlock script')} µs | | |`,
      `| ${spacing.name} | fenced ÷ redlock | ${(p50.get('fenced')! / p50.get('redlock')!).toFixed(2)}× | | |`,
    );
  }
  const load1 = loadavg()[0]!.toFixed(2);
  console.log(
    `Acquire latency at concurrency 1, ms (p50, p90); five local nodes; interleaved call by call; load average ${load1} at the end.\n`,
  );
  console.log('| spacing | variant | p50 | p90 | samples |\n| --- | --- | --- | --- | --- |');
  console.log(rows.join('\n'));
  if (unexpected > 0)
    console.log(`\n${unexpected} replies of the fenced script were not a grant with its promise.`);
} finally {
  await coordinator.close();
  await redlock.quit().catch(() => undefined);
  for (const client of clients) client.disconnect();
  await nodes.stop();
}
