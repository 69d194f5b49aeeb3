// What one guarded write costs the Postgres backend, counted in instructions (issue 21, item 4): a figure that
// other work on the machine does not move, unlike time and CPU.
//   node --conditions=@fenced/source --import tsx bench/probes/guard-instructions.ts [--transactions N] [--baseline-ref REF]
// Starts a throw-away Postgres of its own under `valgrind --tool=callgrind --trace-children=yes` (initdb in a
// temporary directory, a free port, fsync and synchronous_commit on, autovacuum off), so every backend writes its
// instruction count when it exits. Each variant runs on two fresh backends of its own: one does 50 transactions,
// the other 50 + N; (instructions of the second − of the first) ÷ N is what one transaction costs, with start-up,
// migrations and preparing statements cancelled out. Variants: a plain one-UPDATE transaction (Kysely
// `transaction()`), the same UPDATE through `GuardedStore.run`, an empty guarded transaction (a fence-in), and with
// `--baseline-ref` the guarded store of that revision (its own schema, migrated by its own migrations). The cluster
// is stopped with `pg_ctl stop` on its data directory and removed. Measures; never fails on a figure.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { createDatabase, GuardedStore } from '@fenced/guarded-store';
import { freePort } from '@fenced/test-utils/free-port';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { checkOutBaseline, type BaselineCheckout } from '../suite/baseline.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const WARM_UP = 50;

const { values } = parseArgs({
  options: { transactions: { type: 'string', default: '300' }, 'baseline-ref': { type: 'string' } },
});
const transactions = Number(values.transactions);
if (!Number.isInteger(transactions) || transactions < 1) {
  throw new Error(`--transactions must be a positive integer, got ${values.transactions}`);
}

interface Tables {
  bench_account: { id: number; balance: bigint };
}
interface GuardModule {
  createDatabase: typeof createDatabase;
  GuardedStore: typeof GuardedStore;
}

/** initdb and postgres refuse to run as root: as root the cluster belongs to the `postgres` user. */
function asPostgres(command: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
}

function pgBinary(name: string): string {
  const fromPath = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).stdout.trim();
  if (fromPath !== '') return fromPath;
  const versions = spawnSync('sh', ['-c', 'ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1'], {
    encoding: 'utf8',
  }).stdout.trim();
  return versions === '' ? name : path.join(versions, name);
}

function run(command: string, args: string[]): void {
  const [cmd, argv] = asPostgres(command, args);
  const result = spawnSync(cmd, argv, { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`${command} failed: ${result.stderr || result.stdout}`);
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

if (spawnSync('valgrind', ['--version']).status !== 0) throw new Error('valgrind is not installed');
const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'fenced-guard-instructions-'));
const dataDir = path.join(dir, 'data');
const countsDir = path.join(dir, 'callgrind');
await fs.mkdir(countsDir);
if (process.getuid?.() === 0) spawnSync('chown', ['-R', 'postgres:postgres', dir]);
run(pgBinary('initdb'), ['-D', dataDir, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
const port = await freePort();
const [cmd, argv] = asPostgres('valgrind', [
  '--tool=callgrind',
  '--trace-children=yes',
  `--callgrind-out-file=${countsDir}/backend.%p`,
  pgBinary('postgres'),
  '-D',
  dataDir,
  '-p',
  String(port),
  '-k',
  dir,
  '-c',
  'listen_addresses=127.0.0.1',
  '-c',
  'fsync=on',
  '-c',
  'synchronous_commit=on',
  '-c',
  'autovacuum=off',
  '-c',
  'huge_pages=off',
]);
const server = spawn(cmd, argv, { stdio: 'ignore' });
const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
let baseline: BaselineCheckout | undefined;
try {
  await until(
    'Postgres under valgrind to accept connections',
    async () => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.end();
      return true;
    },
    120_000,
  );
  const modules: [string, GuardModule][] = [['guarded', { createDatabase, GuardedStore }]];
  if (values['baseline-ref'] !== undefined) {
    baseline = await checkOutBaseline(ROOT, values['baseline-ref']);
    const entry = path.join(baseline.dir, 'packages', 'guarded-store', 'src', 'index.ts');
    modules.push([`guarded@${baseline.ref}`, (await import(pathToFileURL(entry).href)) as GuardModule]);
  }
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  let token = 0n;
  /** One backend: `count` transactions of the variant, then the pool ends; its pid. */
  const backend = async (variant: string, module: GuardModule, count: number): Promise<number> => {
    const schema = `instr_${variant.replace(/[^a-z0-9]/g, '_')}`;
    const application = `instr-${variant}-${count}`.slice(0, 63);
    const db: Kysely<Tables> = module.createDatabase<Tables>({
      connectionString: url,
      searchPath: schema,
      maxConnections: 1,
      applicationName: application,
    });
    try {
      const store = new module.GuardedStore(db, { schema });
      await store.migrate();
      await sql`create table if not exists bench_account (id int primary key, balance bigint not null default 0)`.execute(
        db,
      );
      await sql`insert into bench_account (id) values (1) on conflict do nothing`.execute(db);
      const update = (trx: Kysely<Tables>) =>
        sql`update bench_account set balance = balance + 1 where id = ${1}`.execute(trx);
      const op =
        variant === 'plain'
          ? () => db.transaction().setIsolationLevel('read committed').execute(update)
          : variant === 'fence-in'
            ? () => store.fenceIn({ resource: 'account-2', token: ++token, leaseId: 'lease-1' })
            : () => store.run({ resource: 'account-1', token: ++token, leaseId: 'lease-1' }, update);
      for (let i = 0; i < count; i++) await op();
      const { rows } = await admin.query<{ pid: number }>(
        'select pid from pg_stat_activity where application_name = $1',
        [application],
      );
      return rows[0]!.pid;
    } finally {
      await db.destroy();
    }
  };
  const instructions = (pid: number): Promise<number> =>
    until(
      `the instruction count of backend ${pid}`,
      async () => {
        const text = await fs.readFile(path.join(countsDir, `backend.${pid}`), 'utf8');
        const match = /^summary: (\d+)/m.exec(text) ?? /^totals: (\d+)/m.exec(text);
        return match === null ? undefined : Number(match[1]);
      },
      60_000,
    );
  const variants: [string, GuardModule][] = [
    ['plain', { createDatabase, GuardedStore }],
    ...modules,
    ['fence-in', { createDatabase, GuardedStore }],
  ];
  const counts: [string, number][] = [];
  for (const [variant, module] of variants) {
    const short = await backend(variant, module, WARM_UP);
    const long = await backend(variant, module, WARM_UP + transactions);
    counts.push([variant, ((await instructions(long)) - (await instructions(short))) / transactions]);
  }
  await admin.end();
  const plain = counts[0]![1];
  process.stdout.write(
    `Postgres backend instructions per transaction (callgrind), ${transactions} transactions per variant\n\n` +
      '| variant | instructions | ÷ plain |\n| --- | --- | --- |\n' +
      counts
        .map(
          ([variant, count]) =>
            `| ${variant} | ${Math.round(count).toLocaleString('en-US')} | ${(count / plain).toFixed(2)}× |`,
        )
        .join('\n') +
      '\n',
  );
} finally {
  await baseline?.remove();
  // The postmaster of our own data directory (its pid file), as pg_ctl stops it.
  try {
    run(pgBinary('pg_ctl'), ['-D', dataDir, '-m', 'fast', '-w', 'stop']);
  } catch {
    // Never started far enough to write its pid file: the valgrind process is our child.
    if (server.pid !== undefined && server.exitCode === null) process.kill(server.pid, 'SIGTERM');
  }
  await new Promise<void>((resolve) => {
    if (server.exitCode !== null || server.signalCode !== null) resolve();
    else server.once('exit', () => resolve());
  });
  await fs.rm(dir, { recursive: true, force: true });
}
