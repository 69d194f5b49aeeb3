// What one guarded write costs besides its round trips (issue 21, item 4):
//   node --conditions=@fenced/source --import tsx bench/probes/guard-cost.ts [--transactions N] [--rounds N]
//        [--concurrency 1,32] [--baseline-ref REF] [--same-token]
// Starts a throw-away Postgres (as the bench does), then, per concurrency, runs rounds interleaved of N
// transactions of each variant: a plain one-UPDATE transaction (Kysely `transaction()`), the same UPDATE through
// `GuardedStore.run`, an empty guarded transaction (a fence-in), and with `--baseline-ref` the same UPDATE through
// the guarded store of that revision (its own pool and schema). At concurrency C, C workers each write their own
// row under their own resource on a pool of C connections. Per transaction: wall time, this process's CPU
// (`process.cpuUsage`), the CPU of the variant's backends (/proc/<pid>/stat, 10 ms ticks: coarse) and the WAL it
// wrote (pg_current_wal_insert_lsn before and after, nothing else writing). With `--same-token`, also the guarded
// UPDATE of a lease that writes again with its token (one token per worker, the fence row already at it: the
// equal-token fence), for this revision and the baseline's. CPU is what a busy machine moves
// least: at 32 writers on 2 cores the run is CPU-bound and time per write follows CPU per write. Measures;
// never fails on a figure.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { createDatabase, GuardedStore } from '@fenced/guarded-store';
import { createTestSchema, findOrStartPostgres, type TestSchema } from '@fenced/test-utils/postgres';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { checkOutBaseline, type BaselineCheckout } from '../suite/baseline.js';
import { median } from '../suite/statistics.js';

interface Tables {
  bench_account: { id: number; balance: bigint };
}
interface GuardModule {
  createDatabase: typeof createDatabase;
  GuardedStore: typeof GuardedStore;
}

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { values } = parseArgs({
  options: {
    transactions: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '1' },
    'baseline-ref': { type: 'string' },
    'same-token': { type: 'boolean', default: false },
  },
});
const transactions = Number(values.transactions);
const rounds = Number(values.rounds);
const concurrencies = values.concurrency.split(',').map(Number);
if (
  !Number.isInteger(transactions) ||
  transactions < 1 ||
  !Number.isInteger(rounds) ||
  rounds < 1 ||
  !concurrencies.every((c) => Number.isInteger(c) && c >= 1 && c <= 100)
) {
  throw new Error(
    `--transactions and --rounds must be positive integers and --concurrency whole numbers from 1 to 100, got ${values.transactions}, ${values.rounds} and ${values.concurrency}`,
  );
}
const maxConcurrency = Math.max(...concurrencies);

const server = await findOrStartPostgres({ forceThrowaway: process.env.FENCED_DATABASE_URL === undefined });
const admin = new pg.Client({ connectionString: server.url });
const schemas: TestSchema[] = [];
const pools: Kysely<Tables>[] = [];
let baseline: BaselineCheckout | undefined;

/** A pool of its own (its backends told apart by application name) with the bench table and a migrated store. */
async function setUp(module: GuardModule, application: string) {
  const schema = await createTestSchema(server, 'fenced_guard_cost');
  schemas.push(schema);
  const db = module.createDatabase<Tables>({
    connectionString: server.url,
    searchPath: schema.schema,
    maxConnections: maxConcurrency,
    applicationName: application,
  });
  pools.push(db);
  const store = new module.GuardedStore(db, { schema: schema.schema });
  await store.migrate();
  await sql`create table bench_account (id int primary key, balance bigint not null default 0)`.execute(db);
  await sql`insert into bench_account (id) select generate_series(0, ${maxConcurrency - 1})`.execute(db);
  return { db, store };
}

try {
  await admin.connect();
  const current = await setUp({ createDatabase, GuardedStore }, 'fenced-guard-cost');
  let earlier: { db: Kysely<Tables>; store: GuardedStore<Tables>; ref: string } | undefined;
  if (values['baseline-ref'] !== undefined) {
    baseline = await checkOutBaseline(ROOT, values['baseline-ref']);
    const entry = path.join(baseline.dir, 'packages', 'guarded-store', 'src', 'index.ts');
    const module = (await import(pathToFileURL(entry).href)) as GuardModule;
    earlier = { ...(await setUp(module, 'fenced-guard-cost-before')), ref: baseline.ref };
  }

  const walBytes = async (): Promise<bigint> => {
    const { rows } = await admin.query<{ b: string }>(
      `select pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint::text as b`,
    );
    return BigInt(rows[0]!.b);
  };
  /** CPU µs of a pool's backends so far (utime + stime at 100 ticks per second). */
  const backendUs = async (application: string): Promise<number> => {
    const { rows } = await admin.query<{ pid: number }>(
      `select pid from pg_stat_activity where application_name = $1`,
      [application],
    );
    let ticks = 0;
    for (const { pid } of rows) {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    }
    return ticks * 10_000;
  };

  const tokens = new Map<string, bigint>();
  const next = (key: string): bigint => {
    const token = (tokens.get(key) ?? 0n) + 1n;
    tokens.set(key, token);
    return token;
  };
  const update = (trx: Kysely<Tables>, id: number) =>
    sql`update bench_account set balance = balance + 1 where id = ${id}`.execute(trx);
  const variants: { name: string; application: string; op: (worker: number) => Promise<unknown> }[] = [
    {
      name: 'plain',
      application: 'fenced-guard-cost',
      op: (w) =>
        current.db
          .transaction()
          .setIsolationLevel('read committed')
          .execute((trx) => update(trx, w)),
    },
    {
      name: 'guarded',
      application: 'fenced-guard-cost',
      op: (w) =>
        current.store.run({ resource: `account-${w}`, token: next(`a${w}`), leaseId: 'lease-1' }, (trx) =>
          update(trx, w),
        ),
    },
  ];
  if (earlier !== undefined) {
    const { store, ref } = earlier;
    variants.push({
      name: `guarded@${ref}`,
      application: 'fenced-guard-cost-before',
      op: (w) =>
        store.run({ resource: `account-${w}`, token: next(`b${w}`), leaseId: 'lease-1' }, (trx) =>
          update(trx, w),
        ),
    });
  }
  if (values['same-token']) {
    variants.push({
      name: 'guarded same token',
      application: 'fenced-guard-cost',
      op: (w) =>
        current.store.run({ resource: `same-${w}`, token: 1n, leaseId: 'lease-1' }, (trx) => update(trx, w)),
    });
    if (earlier !== undefined) {
      const { store, ref } = earlier;
      variants.push({
        name: `guarded same token@${ref}`,
        application: 'fenced-guard-cost-before',
        op: (w) =>
          store.run({ resource: `same-${w}`, token: 1n, leaseId: 'lease-1' }, (trx) => update(trx, w)),
      });
    }
  }
  variants.push({
    name: 'fence-in',
    application: 'fenced-guard-cost',
    op: (w) => current.store.fenceIn({ resource: `fence-in-${w}`, token: next(`f${w}`), leaseId: 'lease-1' }),
  });

  const workers = async (concurrency: number, count: number, op: (worker: number) => Promise<unknown>) => {
    let started = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async (_, worker) => {
        while (started < count) {
          started++;
          await op(worker);
        }
      }),
    );
  };
  let output = `${transactions} transactions per variant and round, ${rounds} rounds interleaved; medians [min–max] per transaction; load average ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} at the start\n`;
  for (const concurrency of concurrencies) {
    const results = new Map<
      string,
      { wallUs: number[]; clientUs: number[]; backendUs: number[]; wal: number[] }
    >();
    for (let round = 0; round < rounds; round++) {
      // Rotated each round (ABC BCA CAB), so drift in the machine spreads over every variant.
      const order = variants.map((_, i) => variants[(i + round) % variants.length]!);
      for (const { name, application, op } of order) {
        await workers(concurrency, 20 * concurrency, op); // warm-up (and the first write of each resource)
        const wal0 = await walBytes();
        const backend0 = await backendUs(application);
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        await workers(concurrency, transactions, op);
        const wall = performance.now() - t0;
        const cpu = process.cpuUsage(cpu0);
        const backend = (await backendUs(application)) - backend0;
        const wal = Number((await walBytes()) - wal0);
        const entry = results.get(name) ?? { wallUs: [], clientUs: [], backendUs: [], wal: [] };
        entry.wallUs.push((wall * 1_000) / transactions);
        entry.clientUs.push((cpu.user + cpu.system) / transactions);
        entry.backendUs.push(backend / transactions);
        entry.wal.push(wal / transactions);
        results.set(name, entry);
      }
    }
    output +=
      `\nconcurrency ${concurrency}\n\n` +
      '| variant | wall µs | wall ÷ plain | client CPU µs | backend CPU µs | client + backend ÷ plain | WAL bytes |\n| --- | --- | --- | --- | --- | --- | --- |\n';
    const cell = (list: number[]) =>
      `${median(list).toFixed(0)} [${Math.min(...list).toFixed(0)}–${Math.max(...list).toFixed(0)}]`;
    const plain = results.get('plain')!;
    const plainCpu = median(plain.clientUs) + median(plain.backendUs);
    for (const [name, r] of results) {
      const ratio = (median(r.clientUs) + median(r.backendUs)) / plainCpu;
      const wallRatio = median(r.wallUs) / median(plain.wallUs);
      output += `| ${name} | ${cell(r.wallUs)} | ${wallRatio.toFixed(2)}× | ${cell(r.clientUs)} | ${cell(r.backendUs)} | ${ratio.toFixed(2)}× | ${cell(r.wal)} |\n`;
    }
  }
  process.stdout.write(output);
} finally {
  await admin.end().catch(() => undefined);
  for (const db of pools) await db.destroy();
  for (const schema of schemas) await schema.drop();
  await server.stop();
  await baseline?.remove();
}
