import { spawn } from 'node:child_process';
import path from 'node:path';
import type { PostgresServer } from '@fenced/test-utils/postgres';

/** Runs pg_ctl on our own throw-away cluster (as the postgres user when we are root). */
function pgCtl(args: string[]): Promise<void> {
  const [command, argv] =
    process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', 'pg_ctl', ...args]] : ['pg_ctl', args];
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`pg_ctl ${args.join(' ')} exited ${code}: ${stderr}`)),
    );
  });
}

function clusterOf(server: PostgresServer): NonNullable<PostgresServer['cluster']> {
  if (!server.cluster) throw new Error('this Postgres is not a throw-away cluster of ours');
  return server.cluster;
}

/**
 * Crashes our own cluster: an immediate shutdown (SIGQUIT to the postmaster, which SIGQUITs every backend):
 * no checkpoint, no flush of the WAL buffers — on the next start Postgres runs crash recovery, exactly as after
 * a kill -9 of the whole server.
 */
export async function crashPostgres(server: PostgresServer): Promise<void> {
  await pgCtl(['-D', clusterOf(server).dataDir, '-m', 'immediate', '-w', 'stop']);
}

/** Starts the crashed cluster again on the same port, with the settings `findOrStartPostgres` used. */
export async function restartPostgres(server: PostgresServer): Promise<void> {
  const { dataDir, port } = clusterOf(server);
  const options = `-p ${port} -k ${dataDir} -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c max_connections=200`;
  await pgCtl(['-D', dataDir, '-o', options, '-l', path.join(dataDir, 'server.log'), '-w', 'start']);
}
