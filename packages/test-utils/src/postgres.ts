import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { defaultBackend, dockerReachable, onPath, type Backend } from './container-runtime.js';
import { freePort } from './free-port.js';
import { onExit } from './owned-processes.js';

/** Where a Postgres server came from: named or found (`external`), a throw-away cluster, or a container. */
export type PostgresBackendKind = 'external' | 'process' | 'container';

/**
 * A Postgres server the tests, the demo and the benchmarks may use, found or started in this order:
 * `FENCED_DATABASE_URL`; a local server on 127.0.0.1:5432 (trust auth); a throw-away cluster made with
 * `initdb` + `pg_ctl` on a free port, stopped by `stop()`; a `postgres:15` container when none of those is
 * possible and a Docker engine answers (DESIGN §6).
 */
export interface PostgresServer {
  readonly url: string;
  /** Whether this process started the server (and so stops it). */
  readonly owned: boolean;
  readonly backend: PostgresBackendKind;
  /** The data directory and `pg_ctl` of an owned cluster, for faults such as killing Postgres (F13). */
  readonly cluster?: { dataDir: string; port: number; pid: () => Promise<number | null> };
  stop(): Promise<void>;
}

const LOCAL_URLS = ['postgres://postgres@127.0.0.1:5432/postgres', 'postgres://127.0.0.1:5432/postgres'];

export interface FindOrStartPostgresOptions {
  /** Always start a throw-away cluster this process owns (e.g. to kill it, F13). @defaultValue `false` */
  forceThrowaway?: boolean;
  /**
   * `process`: a local server or a throw-away cluster, never `FENCED_DATABASE_URL` nor a container;
   * `container`: a `postgres:15` container; `auto`: the order described on `PostgresServer`, local before
   * Docker for the reasons given on `chooseRedisBackend`.
   * @defaultValue `FENCED_TEST_BACKEND`, else `'auto'`
   */
  backend?: Backend;
  /** Image for the container backend. @defaultValue `'postgres:15'` */
  image?: string;
}

export async function findOrStartPostgres(options: FindOrStartPostgresOptions = {}): Promise<PostgresServer> {
  const backend = options.backend ?? defaultBackend();
  if (backend === 'container') {
    const docker = await dockerReachable();
    if (!docker.reachable) throw new Error(`backend: container, but ${docker.reason}`);
    return startPostgresContainer(options.image ?? 'postgres:15');
  }
  const fromEnv = process.env.FENCED_DATABASE_URL;
  if (backend === 'auto' && fromEnv && !options.forceThrowaway) {
    if (!(await canConnect(fromEnv)))
      throw new Error('FENCED_DATABASE_URL is set but no server answers there');
    return { url: fromEnv, owned: false, backend: 'external', stop: async () => {} };
  }
  if (!options.forceThrowaway) {
    for (const url of LOCAL_URLS)
      if (await canConnect(url)) return { url, owned: false, backend: 'external', stop: async () => {} };
  }
  if (backend === 'auto' && !(await pgBinary('initdb')) && !options.forceThrowaway) {
    const docker = await dockerReachable();
    if (docker.reachable) return startPostgresContainer(options.image ?? 'postgres:15');
  }
  return startThrowawayCluster();
}

/**
 * `initdb`/`pg_ctl` from PATH, else from the newest `/usr/lib/postgresql/<version>/bin` (Debian and Ubuntu
 * keep them off PATH); null when neither has it.
 */
async function pgBinary(name: 'initdb' | 'pg_ctl'): Promise<string | null> {
  if (await onPath(name)) return name;
  const root = '/usr/lib/postgresql';
  const versions = await fs.readdir(root).catch(() => [] as string[]);
  for (const version of versions.sort((a, b) => Number(b) - Number(a))) {
    const candidate = path.join(root, version, 'bin', name);
    if (
      await fs.access(candidate, fs.constants.X_OK).then(
        () => true,
        () => false,
      )
    )
      return candidate;
  }
  return null;
}

/** Not exercised on machines without a Docker engine. No fault controls: `cluster` is absent. */
async function startPostgresContainer(image: string): Promise<PostgresServer> {
  const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
  // Postgres' defaults are what G1 needs (fsync and synchronous_commit on); they are spelled out anyway.
  const container = await new PostgreSqlContainer(image)
    .withDatabase('postgres')
    .withUsername('postgres')
    .withPassword('postgres')
    .withCommand(['postgres', '-c', 'fsync=on', '-c', 'synchronous_commit=on', '-c', 'max_connections=200'])
    .start();
  return {
    url: container.getConnectionUri(),
    owned: true,
    backend: 'container',
    stop: async () => {
      await container.stop();
    },
  };
}

async function canConnect(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** initdb refuses to run as root, so as root the cluster belongs to the `postgres` user. */
function asPostgresUser(command: string, args: string[]): [string, string[]] {
  if (process.getuid?.() === 0) return ['runuser', ['-u', 'postgres', '--', command, ...args]];
  return [command, args];
}

function run(command: string, args: string[]): void {
  const [cmd, argv] = asPostgresUser(command, args);
  const result = spawnSync(cmd, argv, { encoding: 'utf8' });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} failed: ${result.stderr || result.stdout || result.error?.message}`,
    );
  }
}

async function startThrowawayCluster(): Promise<PostgresServer> {
  const initdb = (await pgBinary('initdb')) ?? 'initdb';
  const pgCtl = (await pgBinary('pg_ctl')) ?? 'pg_ctl';
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'fenced-pg-'));
  if (process.getuid?.() === 0) spawnSync('chown', ['postgres:postgres', dataDir]);
  const port = await freePort();
  run(initdb, ['-D', dataDir, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  const options = `-p ${port} -k ${dataDir} -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c max_connections=200`;
  run(pgCtl, ['-D', dataDir, '-o', options, '-l', path.join(dataDir, 'server.log'), '-w', 'start']);
  // pg_ctl daemonises the postmaster, so it is no child of ours: stop it by pid if this process exits or
  // is interrupted before stop() (a timed-out or killed test run).
  const cancelExitHook = onExit(() => killPostmaster(dataDir));
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const pidOf = async (): Promise<number | null> => {
    try {
      const text = await fs.readFile(path.join(dataDir, 'postmaster.pid'), 'utf8');
      return Number(text.split('\n')[0]) || null;
    } catch {
      return null;
    }
  };
  return {
    url,
    owned: true,
    backend: 'process',
    cluster: { dataDir, port, pid: pidOf },
    stop: async () => {
      await new Promise<void>((resolve) => {
        const [cmd, argv] = asPostgresUser(pgCtl, ['-D', dataDir, '-m', 'immediate', '-w', 'stop']);
        spawn(cmd, argv, { stdio: 'ignore' }).once('exit', () => resolve());
      });
      cancelExitHook();
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * SIGQUIT (immediate shutdown) to the postmaster of our own cluster, named by its postmaster.pid, and only
 * if that pid still runs a postgres on this data directory: a stale pid file after a crash (F13) must not
 * make us signal an unrelated process that reused the pid.
 */
function killPostmaster(dataDir: string): void {
  let pid: number;
  try {
    pid = Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return;
  }
  if (!Number.isInteger(pid) || pid <= 1) return;
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    if (!cmdline.includes(dataDir)) return;
  } catch {
    return;
  }
  process.kill(pid, 'SIGQUIT');
}

/** A fresh schema per test file: isolation without global wipes, and it works on any server we may use. */
export interface TestSchema {
  readonly url: string;
  readonly schema: string;
  drop(): Promise<void>;
}

export async function createTestSchema(server: PostgresServer, prefix = 'fenced_test'): Promise<TestSchema> {
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: server.url });
  await client.connect();
  try {
    await client.query(`create schema "${schema}"`);
  } finally {
    await client.end();
  }
  return {
    url: server.url,
    schema,
    drop: async () => {
      const c = new pg.Client({ connectionString: server.url });
      await c.connect();
      try {
        await c.query(`drop schema if exists "${schema}" cascade`);
      } finally {
        await c.end();
      }
    },
  };
}
