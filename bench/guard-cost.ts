// What one guarded write costs besides its round trips, at concurrency 1 (issue 21, item 4):
//   node --conditions=@fenced/source --import tsx bench/guard-cost.ts [--transactions N] [--rounds N]
// Starts a throw-away Postgres (as the bench does), then runs, rounds interleaved, N transactions each of: a plain
// one-UPDATE transaction (Kysely `transaction()`), the same UPDATE through `GuardedStore.run`, and an empty
// guarded transaction (a fence-in). Per transaction: wall time, this process's CPU (`process.cpuUsage`), the
// CPU of the pool's backend (/proc/<pid>/stat, 10 ms ticks: coarse), and the WAL it wrote
// (pg_current_wal_insert_lsn before and after, nothing else writing). Measures; never fails on a figure.
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { createDatabase, GuardedStore } from '@fenced/guarded-store';
import { createTestSchema, findOrStartPostgres } from '@fenced/test-utils/postgres';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { median } from './statistics.js';

interface Tables {
  bench_account: { id: number; balance: bigint };
}

const { values } = parseArgs({
  options: { transactions: { type: 'string', default: '2000' }, rounds: { type: 'string', default: '3' } },
});
const transactions = Number(values.transactions);
const rounds = Number(values.rounds);
if (!Number.isInteger(transactions) || transactions < 1 || !Number.isInteger(rounds) || rounds < 1) {
  throw new Error(
    `--transactions and --rounds must be positive integers, got ${values.transactions} and ${values.rounds}`,
  );
}

const APPLICATION = 'fenced-guard-cost';
const server = await findOrStartPostgres({ forceThrowaway: process.env.FENCED_DATABASE_URL === undefined });
const schema = await createTestSchema(server, 'fenced_guard_cost');
const db: Kysely<Tables> = createDatabase<Tables>({
  connectionString: server.url,
  searchPath: schema.schema,
  maxConnections: 1,
  applicationName: APPLICATION,
});
const admin = new pg.Client({ connectionString: server.url });
try {
  await admin.connect();
  const store = new GuardedStore(db, { schema: schema.schema });
  await store.migrate();
  await sql`create table bench_account (id int primary key, balance bigint not null default 0)`.execute(db);
  await sql`insert into bench_account (id) values (1)`.execute(db);

  const walBytes = async (): Promise<bigint> => {
    const { rows } = await admin.query<{ b: string }>(
      `select pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint::text as b`,
    );
    return BigInt(rows[0]!.b);
  };
  /** CPU µs of the pool's backends so far (utime + stime at 100 ticks per second). */
  const backendUs = async (): Promise<number> => {
    const { rows } = await admin.query<{ pid: number }>(
      `select pid from pg_stat_activity where application_name = $1`,
      [APPLICATION],
    );
    let ticks = 0;
    for (const { pid } of rows) {
      const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    }
    return ticks * 10_000;
  };

  let token = 0n;
  const update = (trx: Kysely<Tables>) =>
    sql`update bench_account set balance = balance + 1 where id = ${1}`.execute(trx);
  const variants: Record<string, () => Promise<unknown>> = {
    plain: () => db.transaction().setIsolationLevel('read committed').execute(update),
    guarded: () => store.run({ resource: 'account-1', token: ++token, leaseId: 'lease-1' }, update),
    'fence-in': () => store.fenceIn({ resource: 'account-2', token: ++token, leaseId: 'lease-1' }),
  };
  const results = new Map<
    string,
    { wallUs: number[]; clientUs: number[]; backendUs: number[]; wal: number[] }
  >();
  for (let round = 0; round < rounds; round++) {
    for (const [name, op] of Object.entries(variants)) {
      for (let i = 0; i < 100; i++) await op(); // warm-up (and the first write of each resource)
      const wal0 = await walBytes();
      const backend0 = await backendUs();
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      for (let i = 0; i < transactions; i++) await op();
      const wall = performance.now() - t0;
      const cpu = process.cpuUsage(cpu0);
      const backend = (await backendUs()) - backend0;
      const wal = Number((await walBytes()) - wal0);
      const entry = results.get(name) ?? { wallUs: [], clientUs: [], backendUs: [], wal: [] };
      entry.wallUs.push((wall * 1_000) / transactions);
      entry.clientUs.push((cpu.user + cpu.system) / transactions);
      entry.backendUs.push(backend / transactions);
      entry.wal.push(wal / transactions);
      results.set(name, entry);
    }
  }
  process.stdout.write(
    `${transactions} transactions per variant and round, ${rounds} rounds interleaved; medians [min–max] per transaction\n\n` +
      '| variant | wall µs | client CPU µs | backend CPU µs | WAL bytes |\n| --- | --- | --- | --- | --- |\n',
  );
  const cell = (list: number[]) =>
    `${median(list).toFixed(0)} [${Math.min(...list).toFixed(0)}–${Math.max(...list).toFixed(0)}]`;
  for (const [name, r] of results) {
    process.stdout.write(
      `| ${name} | ${cell(r.wallUs)} | ${cell(r.clientUs)} | ${cell(r.backendUs)} | ${cell(r.wal)} |\n`,
    );
  }
} finally {
  await admin.end().catch(() => undefined);
  await db.destroy();
  await schema.drop();
  await server.stop();
}
