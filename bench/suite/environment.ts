import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { findOrStartPostgres, type PostgresServer } from '@fenced/test-utils/postgres';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { summarizeLatencies } from './statistics.js';

/** What the numbers were measured on. */
export interface MachineInfo {
  cores: number;
  memoryGiB: number;
  cpuModel: string;
  platform: string;
  /** 1-minute load average when the run started and ended: above ~0.5 on 2 cores, something else was busy. */
  loadAverageAtStart: number;
  loadAverageAtEnd?: number;
}

export interface ServerVersions {
  node: string;
  redisServer: string;
  postgres: string;
}

/**
 * The servers of one benchmark run: five `redis-server` processes started here with the persistence of
 * DESIGN §3 (appendonly yes, appendfsync always, maxmemory-policy noeviction), and a Postgres cluster started
 * here too (initdb + pg_ctl, fsync and synchronous_commit on) unless FENCED_DATABASE_URL names one.
 * Every library runs against these same nodes.
 */
export interface BenchEnvironment {
  readonly redis: RedisNodes;
  readonly postgres: PostgresServer;
  readonly versions: ServerVersions;
  /** `CONFIG GET` of the settings that matter, from node 0, as evidence in the results. */
  readonly redisConfig: Record<string, string>;
  /** Plain (unpipelined) clients for INFO and housekeeping, one per node; no library uses them. */
  readonly admin: Redis[];
  stop(): Promise<void>;
}

/** Stalls at least this long are recorded by every node's latency monitor and slow log (see `takeStalls`). */
export const STALL_THRESHOLD_MS = 100;
/** Entries each node's slow log keeps between two `takeStalls`. */
const SLOWLOG_LENGTH = 128;

/**
 * @param redisSettings CONFIG SET on every node before anything runs (`--redis-config`); recorded with the
 *   settings of DESIGN §3 in `redisConfig`.
 */
export async function startBenchEnvironment(
  redisSettings: Readonly<Record<string, string>> = {},
): Promise<BenchEnvironment> {
  const redis = await startRedisNodes(5, { useExisting: false });
  let postgres: PostgresServer | undefined;
  const admin: Redis[] = [];
  try {
    postgres = await findOrStartPostgres({ forceThrowaway: process.env.FENCED_DATABASE_URL === undefined });
    admin.push(...redis.urls.map((url) => new Redis(url, { enableAutoPipelining: false })));
    // Redis' own latency monitor records every stall longer than this (fsync, AOF write, fork for a rewrite), so
    // the results can say what a slow moment was. Monitoring only: nothing else changes.
    for (const client of admin) {
      await client.config('SET', 'latency-monitor-threshold', String(STALL_THRESHOLD_MS));
      // The slow log names the command behind a "command" stall (the latency monitor only times it).
      await client.config('SET', 'slowlog-log-slower-than', String(STALL_THRESHOLD_MS * 1_000));
      await client.config('SET', 'slowlog-max-len', String(SLOWLOG_LENGTH));
      await client.call('SLOWLOG', 'RESET');
      for (const [name, value] of Object.entries(redisSettings)) await client.config('SET', name, value);
    }
    const redisConfig = await readRedisConfig(admin[0]!, Object.keys(redisSettings));
    const versions: ServerVersions = {
      node: process.version,
      redisServer: redisServerVersion(),
      postgres: await postgresVersion(postgres.url),
    };
    const started = postgres;
    return {
      redis,
      postgres: started,
      versions,
      redisConfig,
      admin,
      stop: async () => {
        await Promise.all(admin.map((c) => c.quit().catch(() => c.disconnect())));
        await started.stop();
        await redis.stop();
      },
    };
  } catch (error) {
    for (const c of admin) c.disconnect();
    await postgres?.stop().catch(() => undefined);
    await redis.stop();
    throw error;
  }
}

export function machineInfo(): MachineInfo {
  let cpuModel = os.cpus()[0]?.model ?? 'unknown';
  try {
    const line = readFileSync('/proc/cpuinfo', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('model name'));
    if (line !== undefined) cpuModel = line.slice(line.indexOf(':') + 1).trim();
  } catch {
    // not Linux: os.cpus() it is
  }
  return {
    cores: os.cpus().length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    cpuModel,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    loadAverageAtStart: os.loadavg()[0]!,
  };
}

function redisServerVersion(): string {
  const result = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  const match = /v=(\S+)/.exec(result.stdout ?? '');
  return match?.[1] ?? 'unknown';
}

async function postgresVersion(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ server_version: string }>('show server_version');
    return rows[0]?.server_version ?? 'unknown';
  } finally {
    await client.end();
  }
}

async function readRedisConfig(client: Redis, more: readonly string[]): Promise<Record<string, string>> {
  const config: Record<string, string> = {};
  for (const name of ['appendonly', 'appendfsync', 'maxmemory-policy', 'save', ...more]) {
    const reply = (await client.config('GET', name)) as string[];
    config[name] = reply[1] ?? '';
  }
  return config;
}

/** `used_memory` of every node, in bytes, in node order. */
export async function usedMemory(admin: readonly Redis[]): Promise<number[]> {
  return Promise.all(
    admin.map(async (client) => {
      const info = await client.info('memory');
      const match = /^used_memory:(\d+)/m.exec(info);
      if (match === null) throw new Error('INFO memory has no used_memory line');
      return Number(match[1]);
    }),
  );
}

/** Key count of every node, in node order. */
export function keyCounts(admin: readonly Redis[]): Promise<number[]> {
  return Promise.all(admin.map((client) => client.dbsize()));
}

/**
 * Deletes the keys matching `pattern` on every node (SCAN + UNLINK, bounded by the key count), so one
 * library's leftovers do not sit in the next measurement. Never touches the coordinator's own keys unless
 * asked to.
 */
export async function deleteKeys(admin: readonly Redis[], pattern: string): Promise<number> {
  let deleted = 0;
  for (const client of admin) {
    let cursor = '0';
    // SCAN ends when the cursor comes back to 0; the bound only guards against a server that never says so.
    const maxCalls = Math.ceil(((await client.dbsize()) + 1) / 1_000) * 4 + 100;
    for (let call = 0; call < maxCalls; call++) {
      const [next, keys] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 5_000);
      if (keys.length > 0) deleted += await client.unlink(...keys);
      cursor = next;
      if (cursor === '0') break;
    }
  }
  return deleted;
}

/**
 * fdatasync latency of the disk the Redis data directories live on (the system temp folder): the floor under
 * every write a node acknowledges with `appendfsync always`. Measured with the same small appends an AOF gets.
 */
export async function probeFsync(samples = 200): Promise<{ samples: number; p50Ms: number; p99Ms: number }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'fenced-bench-fsync-'));
  const file = await fs.open(path.join(dir, 'probe'), 'a');
  const times: number[] = [];
  try {
    const chunk = Buffer.alloc(128, 0x61);
    for (let i = 0; i < samples; i++) {
      await file.write(chunk);
      const t0 = performance.now();
      await file.datasync();
      times.push(performance.now() - t0);
    }
  } finally {
    await file.close();
    await fs.rm(dir, { recursive: true, force: true });
  }
  const summary = summarizeLatencies(times);
  return { samples, p50Ms: summary.p50, p99Ms: summary.p99 };
}

/** CPU seconds (user + sys) every node has used so far, summed over the nodes: INFO cpu. */
export async function redisCpuSeconds(admin: readonly Redis[]): Promise<number> {
  let total = 0;
  for (const client of admin) {
    const info = await client.info('cpu');
    for (const field of ['used_cpu_user', 'used_cpu_sys']) {
      const match = new RegExp(`^${field}:([\\d.]+)`, 'm').exec(info);
      if (match === null) throw new Error(`INFO cpu has no ${field} line`);
      total += Number(match[1]);
    }
  }
  return total;
}

/**
 * I/O counters of every node, summed over the nodes: socket reads it processed (INFO stats
 * `total_reads_processed`: one per batch of commands a client sent that arrived together, so a round trip's
 * worth) and commands it executed (INFO commandstats, every command, scripts' inner calls included).
 */
export async function redisIoCounters(admin: readonly Redis[]): Promise<{ reads: number; commands: number }> {
  let reads = 0;
  let commands = 0;
  for (const client of admin) {
    const stats = /^total_reads_processed:(\d+)/m.exec(await client.info('stats'));
    reads += stats === null ? Number.NaN : Number(stats[1]);
    for (const match of (await client.info('commandstats')).matchAll(/^cmdstat_[^:]+:calls=(\d+)/gm)) {
      commands += Number(match[1]);
    }
  }
  return { reads, commands };
}

/** `aof_current_size` of every node, in node order (it drops when Redis rewrites the AOF). */
export async function aofSizes(admin: readonly Redis[]): Promise<number[]> {
  return Promise.all(
    admin.map(async (client) => {
      const match = /^aof_current_size:(\d+)/m.exec(await client.info('persistence'));
      return match === null ? Number.NaN : Number(match[1]);
    }),
  );
}

/** What the nodes' latency monitors and persistence counters saw during one scenario. */
export interface NodeStalls {
  /** Event → the longest stall (ms) any node recorded, and how many nodes recorded it (LATENCY LATEST). */
  events: Record<string, { maxMs: number; nodes: number }>;
  /** AOF rewrites (fork + rewrite while fsyncing) the nodes ran, summed (INFO persistence). */
  aofRewrites: number;
  /**
   * Commands that ran at least the stall threshold (SLOWLOG GET), by what they were (see `slowCommandName`): the
   * longest (ms), on how many nodes, how many times in all. Absent in older results.
   */
  slowCommands?: Record<string, { maxMs: number; nodes: number; count: number }>;
}

/**
 * What a slow-log entry's arguments say the command was, without its values: the command's name, and for a
 * script its key count and first key (whose name tells whose script it is: fenced's `<prefix>:node:…`, a
 * resource's lock key for redlock); for anything else, its first argument (a key or a subcommand). A key's hash
 * tag becomes `{…}` and a number `N`, so that the calls of one kind count together.
 */
export function slowCommandName(argv: readonly string[]): string {
  const name = (argv[0] ?? '?').toUpperCase();
  // A key's hash tag (a resource name) and a number (a SCAN cursor) are values: one name for all of them.
  const cut = (text: string | undefined): string => {
    if (text === undefined) return '';
    const shape = /^\d+$/.test(text) ? 'N' : text.replace(/\{[^}]*\}/g, '{…}');
    return shape.length > 48 ? `${shape.slice(0, 47)}…` : shape;
  };
  if (['EVAL', 'EVALSHA', 'EVAL_RO', 'EVALSHA_RO', 'FCALL', 'FCALL_RO'].includes(name)) {
    return `${name} (${argv[2] ?? '?'} keys, first ${cut(argv[3]) || 'none'})`;
  }
  return argv.length > 1 ? `${name} ${cut(argv[1])}` : name;
}

/** Reads and resets the latency monitor of every node; `rewritesBefore` is the previous `aofRewrites` total. */
export async function takeStalls(
  admin: readonly Redis[],
  rewritesBefore: number,
): Promise<NodeStalls & { rewritesTotal: number }> {
  const events: NodeStalls['events'] = {};
  const slowCommands: NonNullable<NodeStalls['slowCommands']> = {};
  let rewritesTotal = 0;
  for (const client of admin) {
    const latest = (await client.call('LATENCY', 'LATEST')) as [string, number, number, number][];
    for (const [event, , , maxMs] of latest) {
      const entry = (events[event] ??= { maxMs: 0, nodes: 0 });
      entry.maxMs = Math.max(entry.maxMs, Number(maxMs));
      entry.nodes++;
    }
    await client.call('LATENCY', 'RESET');
    const slowlog = (await client.call('SLOWLOG', 'GET', String(SLOWLOG_LENGTH))) as [
      number,
      number,
      number,
      string[],
      ...unknown[],
    ][];
    const seenHere = new Set<string>();
    for (const [, , durationUs, argv] of slowlog) {
      const key = slowCommandName(argv.map(String));
      const entry = (slowCommands[key] ??= { maxMs: 0, nodes: 0, count: 0 });
      entry.maxMs = Math.max(entry.maxMs, Math.round(Number(durationUs) / 1_000));
      entry.count++;
      if (!seenHere.has(key)) entry.nodes++;
      seenHere.add(key);
    }
    await client.call('SLOWLOG', 'RESET');
    const match = /^aof_rewrites:(\d+)/m.exec(await client.info('persistence'));
    rewritesTotal += match === null ? 0 : Number(match[1]);
  }
  return { events, aofRewrites: rewritesTotal - rewritesBefore, slowCommands, rewritesTotal };
}

/**
 * The commit the run measured, and the files under packages/ that differed from it (the benchmark runs the
 * sources in the working tree, so a modified coordinator is what was measured).
 */
export function sourceRevision(root: string): { commit: string; modifiedPackageFiles: string[] } {
  const git = (args: string[]): string =>
    spawnSync('git', args, { cwd: root, encoding: 'utf8' }).stdout ?? '';
  return {
    commit: git(['rev-parse', 'HEAD']).trim() || 'unknown',
    // Not trimmed: each line is `XY path`, and the first one's X is a space when the change is not staged
    // (trimming the output dropped it, and the first path then lost its first character to `slice(3)`).
    modifiedPackageFiles: modifiedPaths(git(['status', '--porcelain', '--', 'packages'])),
  };
}

/**
 * The paths of `git status --porcelain` output: `XY path` per line, a rename as `XY old -> new` (the new path
 * counts).
 */
export function modifiedPaths(porcelain: string): string[] {
  return porcelain
    .split('\n')
    .filter((line) => line.length > 3)
    .map((line) => {
      const path = line.slice(3);
      const arrow = path.indexOf(' -> ');
      return arrow === -1 ? path : path.slice(arrow + 4);
    });
}
