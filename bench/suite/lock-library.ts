import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Coordinator, type CoordinatorOptions } from '@fenced/coordinator';
import { Redlock as SesameRedlock } from '@sesamecare-oss/redlock';
import { Redis, type RedisOptions } from 'ioredis';
import { RedlockMutex } from 'redis-semaphore';
import type { default as RedlockClass } from '../../node_modules/redlock/dist/index.js';
import { PEER_NAMES } from '../peers/peer-config.js';

// redlock 5's package.json "exports" has no "types" condition, so under NodeNext TypeScript cannot find its
// typings through the package name: the types come from the file, the class from the package.
const redlockPackage: string = 'redlock';
const { default: Redlock } = (await import(redlockPackage)) as { default: typeof RedlockClass };

/** The libraries compared, in the order their columns appear. */
export const LIBRARY_NAMES = [
  'fenced',
  'redlock',
  'sesame-redlock',
  'redis-semaphore',
  ...PEER_NAMES,
] as const;
export type LibraryName = (typeof LIBRARY_NAMES)[number];

/** A held lock, whatever the library: all the scenarios need from it is its release. */
export interface HeldLock {
  release(): Promise<void>;
}

/** The common face of the four libraries, so every scenario drives them the same way. */
export interface LockLibrary {
  /** A LibraryName, or `fenced@<ref>` for an earlier fenced (`--baseline-ref`, bench/suite/baseline.ts). */
  readonly name: string;
  /** For `fenced@<ref>`: the commit its sources were checked out at. */
  readonly baselineCommit?: string;
  /**
   * For fenced: its token retention and how often its fold passes start, so the scale scenario knows how long
   * idle registers stay (nodes/fold.ts `foldIntervalMs`).
   */
  readonly folding?: {
    readonly retentionMs: number;
    readonly intervalMs: number;
    /** SCAN MATCH pattern of its token registers. */
    readonly registerPattern: string;
  };
  /**
   * SCAN MATCH pattern of keys the library writes and nothing ever removes: no release deletes them, no expiry,
   * no fold pass (the floor's token registers). The scale scenario deletes them after each of the library's
   * passes, once the pass is measured, so they do not weigh on the passes and the fold waits after it.
   */
  readonly leftoverKeyPattern?: string;
  /**
   * For a library that works in the background between calls (fenced: its fold passes, which SCAN every key of
   * every node): stops that work, and starts it again. The scale scenario stops it while another library's pass
   * is measured, so that pass pays only for its own library. Both are idempotent.
   */
  readonly background?: LibraryBackground;
  /** npm package name and the version read from its package.json. */
  readonly packageName: string;
  readonly version: string;
  /** The configuration used, as printed in the report (retry delays, pipelining, ...). */
  readonly configuration: Readonly<Record<string, unknown>>;
  /**
   * For a fencing peer with its own server (etcd, ZooKeeper, Postgres): CPU seconds that server has used so far,
   * so the throughput scenario reports its CPU per cycle instead of the Redis nodes' (bench/peers/).
   */
  serverCpuSeconds?(): number;
  /** What `serverCpuSeconds` measures, in words. */
  readonly serverCpuOf?: string;
  /**
   * A fencing peer (bench/peers/): measured in the throughput, latency and hand-off scenarios, not in the scale
   * scenario (which reads the Redis nodes' memory).
   */
  readonly peer?: boolean;
  /** How it waits for a held resource, in words, for the hand-off table. */
  readonly waitStrategy: string;
  /** One uncontended acquire (no waiting). Throws when not granted. */
  acquire(resource: string, ttlMs: number): Promise<HeldLock>;
  /** Acquire that waits up to `waitMs` while another holder has the resource, by the library's own mechanism. */
  acquireWaiting(resource: string, ttlMs: number, waitMs: number): Promise<HeldLock>;
  /**
   * The same wait from a second client instance with its own connections, as another process would wait (for
   * libraries whose waiting depends on sharing the holder's instance; the polling peers do not).
   */
  acquireWaitingElsewhere?(resource: string, ttlMs: number, waitMs: number): Promise<HeldLock>;
  close(): Promise<void>;
}

/** See {@link LockLibrary.background}. */
export interface LibraryBackground {
  stop(): Promise<void>;
  start(): Promise<void>;
}

/**
 * The background of a library whose background work lives in objects it can close and create again (fenced's
 * coordinators, whose fold timers stop on close): `stop` closes them, `start` opens new ones.
 */
export function reopeningBackground(
  open: () => Promise<void>,
  close: () => Promise<void>,
): LibraryBackground {
  let running = true;
  return {
    stop: async () => {
      if (!running) return;
      running = false;
      await close();
    },
    start: async () => {
      if (running) return;
      await open();
      running = true;
    },
  };
}

const require = createRequire(import.meta.url);

/** The version in an installed package's package.json (what is installed, not what was asked for). */
export function installedVersion(packageName: string): string {
  if (packageName === '@fenced/coordinator') {
    return readPackageVersion(new URL('../../packages/coordinator/package.json', import.meta.url));
  }
  // Some exports maps hide package.json: find the package's folder from its resolved entry point instead.
  const entry = require.resolve(packageName);
  const marker = `/node_modules/${packageName}/`;
  const at = entry.lastIndexOf(marker);
  if (at < 0) throw new Error(`cannot locate the folder of ${packageName} from ${entry}`);
  return readPackageVersion(entry.slice(0, at + marker.length) + 'package.json');
}

function readPackageVersion(file: string | URL): string {
  return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
}

/**
 * ioredis options of the peers' clients: auto-pipelining on (the "best documented configuration": it
 * groups the commands of one tick into one write), everything else at ioredis' defaults. The fenced coordinator
 * is given URLs and creates its own clients, as its documentation recommends; it batches its calls itself, so
 * its clients do not auto-pipeline.
 */
const PEER_CLIENT_OPTIONS: RedisOptions = { enableAutoPipelining: true };

function peerClients(urls: readonly string[]): Redis[] {
  return urls.map((url) => new Redis(url, PEER_CLIENT_OPTIONS));
}

async function quitAll(clients: readonly Redis[]): Promise<void> {
  await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
}

/** What the benchmark changes from the fenced defaults (see `fencedCoordinatorOptions`). */
export interface FencedBenchOptions {
  /** `nodeTimeoutMs` of the coordinator; undefined keeps the library default. */
  nodeTimeoutMs?: number | undefined;
  /**
   * `maxTtlMs` and `tokenRetentionMs`: the plan's largest lease ttl and the smallest retention allowed with it
   * (plan.ts `fencedLimits`), so the scale scenario can wait for the fold passes within the run.
   */
  maxTtlMs: number;
  tokenRetentionMs: number;
}

/** How often the coordinator starts fold passes for a retention: half of it, 1 s to 60 s (nodes/fold.ts). */
export function foldIntervalMs(tokenRetentionMs: number): number {
  return Math.min(60_000, Math.max(1_000, Math.floor(tokenRetentionMs / 2)));
}

/**
 * The options of every Coordinator the benchmark creates (the library column and the HTTP service): URLs, so
 * the coordinator makes its own auto-pipelined clients, and its defaults except what `bench` says.
 */
export function fencedCoordinatorOptions(
  urls: readonly string[],
  bench: FencedBenchOptions,
): CoordinatorOptions {
  return {
    nodes: [...urls],
    maxTtlMs: bench.maxTtlMs,
    tokenRetentionMs: bench.tokenRetentionMs,
    ...(bench.nodeTimeoutMs === undefined ? {} : { nodeTimeoutMs: bench.nodeTimeoutMs }),
  };
}

/** fenced: the Coordinator (retryDelayMs 100 + 0..50 jitter as the fallback of its pub/sub wake-ups). */
async function createFenced(urls: readonly string[], bench: FencedBenchOptions): Promise<LockLibrary> {
  let coordinator: Coordinator;
  // A second coordinator for waiters in "another process": its own connections and its own waiter queue.
  let elsewhere: Coordinator;
  const open = async (): Promise<void> => {
    coordinator = new Coordinator(fencedCoordinatorOptions(urls, bench));
    elsewhere = new Coordinator(fencedCoordinatorOptions(urls, bench));
    // Node errors never fail a benchmark by themselves; an acquire that cannot get a majority throws.
    coordinator.on('nodeError', () => undefined);
    elsewhere.on('nodeError', () => undefined);
    await Promise.all([coordinator.ready(), elsewhere.ready()]);
  };
  const close = async (): Promise<void> => {
    await Promise.all([coordinator.close(), elsewhere.close()]);
  };
  await open();
  const background = reopeningBackground(open, close);
  const settings = coordinator!.settings;
  return {
    name: 'fenced',
    packageName: '@fenced/coordinator',
    version: installedVersion('@fenced/coordinator'),
    configuration: {
      nodes: urls.length,
      clients:
        'created by the coordinator from URLs (auto-pipelining off: it batches its own calls per node)',
      nodeTimeoutMs: settings.nodeTimeoutMs,
      retryDelayMs: settings.retryDelayMs,
      retryJitterMs: settings.retryJitterMs,
      driftFactor: settings.driftFactor,
      maxTtlMs: settings.maxTtlMs,
      tokenRetentionMs: settings.tokenRetentionMs,
    },
    folding: {
      retentionMs: settings.tokenRetentionMs,
      intervalMs: foldIntervalMs(settings.tokenRetentionMs),
      registerPattern: `${settings.keyPrefix}:{*}:token`,
    },
    background,
    waitStrategy: `pub/sub wake-up on release (fallback timer: holder's remaining ttl, or ${settings.retryDelayMs} ms + 0..${settings.retryJitterMs} ms)`,
    acquire: (resource, ttlMs) => coordinator.acquire(resource, { ttlMs }),
    acquireWaiting: (resource, ttlMs, waitMs) => coordinator.acquire(resource, { ttlMs, waitMs }),
    acquireWaitingElsewhere: (resource, ttlMs, waitMs) => elsewhere.acquire(resource, { ttlMs, waitMs }),
    // Closing what is closed is harmless: the coordinators may be stopped (see `background`).
    close,
  };
}

/**
 * redlock 5 (beta): the README's configuration (driftFactor 0.01, retryCount 10, retryDelay 200, retryJitter
 * 200). Waiting is polling: a retry every 200 ± 200 ms; `acquireWaiting` only raises retryCount so the wait
 * covers `waitMs`.
 */
function createRedlock(urls: readonly string[]): LockLibrary {
  const clients = peerClients(urls);
  const settings = { driftFactor: 0.01, retryCount: 10, retryDelay: 200, retryJitter: 200 };
  const redlock = new Redlock(clients, settings);
  redlock.on('error', () => undefined); // it emits every vote against, even the expected ones
  return {
    name: 'redlock',
    packageName: 'redlock',
    version: installedVersion('redlock'),
    configuration: { ...settings, clients: 'ioredis, enableAutoPipelining: true' },
    waitStrategy: `polling: retryDelay ${settings.retryDelay} ms ± retryJitter ${settings.retryJitter} ms (README)`,
    acquire: async (resource, ttlMs) => {
      const lock = await redlock.acquire([`redlock:${resource}`], ttlMs);
      return { release: async () => void (await lock.release()) };
    },
    acquireWaiting: async (resource, ttlMs, waitMs) => {
      const retryCount = Math.ceil(waitMs / (settings.retryDelay - settings.retryJitter / 2));
      const lock = await redlock.acquire([`redlock:${resource}`], ttlMs, { retryCount });
      return { release: async () => void (await lock.release()) };
    },
    close: () => quitAll(clients),
  };
}

/** @sesamecare-oss/redlock: the maintained fork, same README configuration as redlock 5. */
function createSesameRedlock(urls: readonly string[]): LockLibrary {
  const clients = peerClients(urls);
  const settings = { driftFactor: 0.01, retryCount: 10, retryDelay: 200, retryJitter: 200 };
  const redlock = new SesameRedlock(clients, settings);
  redlock.on('error', () => undefined);
  return {
    name: 'sesame-redlock',
    packageName: '@sesamecare-oss/redlock',
    version: installedVersion('@sesamecare-oss/redlock'),
    configuration: { ...settings, clients: 'ioredis, enableAutoPipelining: true' },
    waitStrategy: `polling: retryDelay ${settings.retryDelay} ms ± retryJitter ${settings.retryJitter} ms (README)`,
    acquire: async (resource, ttlMs) => {
      const lock = await redlock.acquire([`sesame:${resource}`], ttlMs);
      return { release: async () => void (await lock.release()) };
    },
    acquireWaiting: async (resource, ttlMs, waitMs) => {
      const retryCount = Math.ceil(waitMs / (settings.retryDelay - settings.retryJitter / 2));
      const lock = await redlock.acquire([`sesame:${resource}`], ttlMs, { retryCount });
      return { release: async () => void (await lock.release()) };
    },
    close: () => quitAll(clients),
  };
}

/**
 * redis-semaphore's RedlockMutex with its documented defaults (retryInterval 10 ms, acquireTimeout 10 s),
 * except `refreshInterval: 0`: no other library auto-extends on a plain acquire, and a million held mutexes
 * would otherwise mean a million interval timers.
 */
function createRedisSemaphore(urls: readonly string[]): LockLibrary {
  const clients = peerClients(urls);
  const acquireWith = async (resource: string, lockTimeout: number, acquireTimeout: number) => {
    const mutex = new RedlockMutex(clients, resource, { lockTimeout, acquireTimeout, refreshInterval: 0 });
    await mutex.acquire();
    return { release: () => mutex.release() };
  };
  return {
    name: 'redis-semaphore',
    packageName: 'redis-semaphore',
    version: installedVersion('redis-semaphore'),
    configuration: {
      mutex: 'RedlockMutex',
      retryInterval: 10,
      acquireTimeout: 10_000,
      refreshInterval: 0,
      clients: 'ioredis, enableAutoPipelining: true',
    },
    waitStrategy: 'polling: retryInterval 10 ms (default)',
    acquire: (resource, ttlMs) => acquireWith(resource, ttlMs, 10_000),
    acquireWaiting: (resource, ttlMs, waitMs) => acquireWith(resource, ttlMs, waitMs),
    close: () => quitAll(clients),
  };
}

/** All four libraries, connected to the same Redis nodes. */
export async function createLockLibraries(
  urls: readonly string[],
  fenced: FencedBenchOptions,
  names: readonly LibraryName[] = LIBRARY_NAMES,
): Promise<LockLibrary[]> {
  const libraries: LockLibrary[] = [];
  for (const name of names) {
    switch (name) {
      case 'fenced':
        libraries.push(await createFenced(urls, fenced));
        break;
      case 'redlock':
        libraries.push(createRedlock(urls));
        break;
      case 'sesame-redlock':
        libraries.push(createSesameRedlock(urls));
        break;
      case 'redis-semaphore':
        libraries.push(createRedisSemaphore(urls));
        break;
    }
  }
  return libraries;
}
