import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './free-port.js';

/**
 * A Postgres server the tests, the demo and the benchmarks may use, found or started in this order:
 * `FENCED_DATABASE_URL`; a local server on 127.0.0.1:5432 (trust auth); a throw-away cluster made with
 * `initdb` + `pg_ctl` on a free port, stopped by `stop()` (DESIGN §6).
 */
export interface PostgresServer {
  readonly url: string;
  /** Whether this process started the server (and so stops it). */
  readonly owned: boolean;
  /** The data directory and `pg_ctl` of an owned cluster, for faults such as killing Postgres (F13). */
  readonly cluster?: { dataDir: string; port: number; pid: () => Promise<number | null> };
  stop(): Promise<void>;
}

const LOCAL_URLS = ['postgres://postgres@127.0.0.1:5432/postgres', 'postgres://127.0.0.1:5432/postgres'];

export async function findOrStartPostgres(
  options: { forceThrowaway?: boolean } = {},
): Promise<PostgresServer> {
  const fromEnv = process.env.FENCED_DATABASE_URL;
  if (fromEnv && !options.forceThrowaway) {
    if (!(await canConnect(fromEnv)))
      throw new Error('FENCED_DATABASE_URL is set but no server answers there');
    return { url: fromEnv, owned: false, stop: async () => {} };
  }
  if (!options.forceThrowaway) {
    for (const url of LOCAL_URLS)
      if (await canConnect(url)) return { url, owned: false, stop: async () => {} };
  }
  return startThrowawayCluster();
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
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'fenced-pg-'));
  if (process.getuid?.() === 0) spawnSync('chown', ['postgres:postgres', dataDir]);
  const port = await freePort();
  run('initdb', ['-D', dataDir, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  const options = `-p ${port} -k ${dataDir} -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c max_connections=200`;
  run('pg_ctl', ['-D', dataDir, '-o', options, '-l', path.join(dataDir, 'server.log'), '-w', 'start']);
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
    cluster: { dataDir, port, pid: pidOf },
    stop: async () => {
      await new Promise<void>((resolve) => {
        const [cmd, argv] = asPostgresUser('pg_ctl', ['-D', dataDir, '-m', 'immediate', '-w', 'stop']);
        spawn(cmd, argv, { stdio: 'ignore' }).once('exit', () => resolve());
      });
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
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
