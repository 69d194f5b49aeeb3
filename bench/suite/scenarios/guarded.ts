import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createDatabase, GuardedStore } from '@fenced/guarded-store';
import { sql, type Kysely } from 'kysely';
import type { BaselineCheckout } from '../baseline.js';
import { createTestSchema, type PostgresServer } from '@fenced/test-utils/postgres';
import type { BenchPlan } from '../plan.js';
import { interleave, runWorkers, type RunState } from '../runner.js';
import { median, range, summarizeLatencies } from '../statistics.js';
import type { BenchResults } from '../results.js';
import { num, table } from '../markdown.js';

export interface GuardedVariantCell {
  /** Median over the runs of committed write transactions per second. */
  medianPerSecond: number;
  min: number;
  max: number;
  runs: number[];
  /** Median over the runs of the per-transaction p50 and p99, in ms. */
  p50Ms: number;
  p99Ms: number;
  errors: number;
}

export interface GuardedResult {
  statement: string;
  isolation: 'read committed';
  /** concurrency → { plain, guarded, cost } */
  byConcurrency: Record<
    string,
    {
      plain: GuardedVariantCell;
      guarded: GuardedVariantCell;
      /** Time per write, guarded over plain (plain ops/s ÷ guarded ops/s): the target is ≤ 1.15. */
      costRatio: number;
      /** p50 latency, guarded over plain. */
      p50Ratio: number;
      /**
       * `--baseline-ref`: the guarded store of that revision (its own createDatabase pool and schema), run as
       * a third variant interleaved with the other two; its cost ratio is over the same plain runs.
       */
      baseline?: GuardedVariantCell & { costRatio: number; p50Ratio: number };
    }
  >;
  /** `--baseline-ref`: the revision whose guarded store ran as the third variant. */
  baseline?: { ref: string; commit: string };
}

/** The two exports of the guarded store the scenario uses, from this checkout or an earlier one. */
interface GuardModule {
  createDatabase: typeof createDatabase;
  GuardedStore: typeof GuardedStore;
}

/** The guarded store of an earlier revision's sources (bench/suite/baseline.ts checked them out). */
async function loadBaselineGuard(checkout: BaselineCheckout): Promise<GuardModule> {
  const entry = path.join(checkout.dir, 'packages', 'guarded-store', 'src', 'index.ts');
  return (await import(pathToFileURL(entry).href)) as GuardModule;
}

interface BenchTables {
  bench_account: { id: number; balance: bigint };
}

/**
 * Scenario 5: a guarded write vs the same write without the guard. Both run the same UPDATE in a READ
 * COMMITTED read-write transaction on the same pool; the guarded one goes through `GuardedStore.run`, which
 * first raises the fence row (one more statement in the same transaction). Each worker writes its own row
 * under its own resource with rising tokens, so the comparison measures the guard, not row contention.
 */
export async function runGuarded(
  server: PostgresServer,
  plan: BenchPlan['guarded'],
  state: RunState,
  baselineCheckout?: BaselineCheckout,
): Promise<GuardedResult> {
  const rows = Math.max(...plan.concurrencies);
  const schema = await createTestSchema(server, 'fenced_bench');
  // The earlier store gets its own pool and its own schema (its own fence table), as a second application would.
  const earlier =
    baselineCheckout === undefined
      ? undefined
      : {
          checkout: baselineCheckout,
          module: await loadBaselineGuard(baselineCheckout),
          schema: await createTestSchema(server, 'fenced_bench_before'),
        };
  const earlierDb =
    earlier === undefined
      ? undefined
      : earlier.module.createDatabase<BenchTables>({
          connectionString: server.url,
          searchPath: earlier.schema.schema,
          maxConnections: rows,
          applicationName: 'fenced-bench-before',
        });
  const db: Kysely<BenchTables> = createDatabase<BenchTables>({
    connectionString: server.url,
    searchPath: schema.schema,
    maxConnections: rows,
    applicationName: 'fenced-bench',
  });
  try {
    const store = new GuardedStore(db, { schema: schema.schema });
    await store.migrate();
    await sql`create table bench_account (id int primary key, balance bigint not null default 0)`.execute(db);
    await sql`insert into bench_account (id) select generate_series(0, ${rows - 1})`.execute(db);

    const update = (trx: Kysely<BenchTables>, id: number) =>
      sql`update bench_account set balance = balance + 1 where id = ${id}`.execute(trx);
    const tokens: bigint[] = Array.from({ length: rows }, () => 0n);
    let earlierStore: GuardedStore<BenchTables> | undefined;
    if (earlier !== undefined && earlierDb !== undefined) {
      earlierStore = new earlier.module.GuardedStore(earlierDb, { schema: earlier.schema.schema });
      await earlierStore.migrate();
      await sql`create table bench_account (id int primary key, balance bigint not null default 0)`.execute(
        earlierDb,
      );
      await sql`insert into bench_account (id) select generate_series(0, ${rows - 1})`.execute(earlierDb);
    }
    const earlierTokens: bigint[] = Array.from({ length: rows }, () => 0n);
    const baselineName = earlier === undefined ? undefined : `guarded@${earlier.checkout.ref}`;
    const variants: { name: string; write: (worker: number) => Promise<unknown> }[] = [
      {
        name: 'plain',
        write: (worker: number) =>
          db
            .transaction()
            .setIsolationLevel('read committed')
            .execute((trx) => update(trx, worker)),
      },
      {
        name: 'guarded',
        write: (worker: number) =>
          store.run(
            {
              resource: `bench-account-${worker}`,
              token: ++tokens[worker]!,
              leaseId: `bench-lease-${worker}`,
            },
            (trx) => update(trx, worker),
          ),
      },
    ];
    if (earlierStore !== undefined && baselineName !== undefined) {
      const store = earlierStore;
      variants.push({
        name: baselineName,
        write: (worker: number) =>
          store.run(
            {
              resource: `bench-account-${worker}`,
              token: ++earlierTokens[worker]!,
              leaseId: `bench-lease-${worker}`,
            },
            (trx) => update(trx, worker),
          ),
      });
    }

    const byConcurrency: GuardedResult['byConcurrency'] = {};
    for (const concurrency of plan.concurrencies) {
      const measure = (variant: (typeof variants)[number], tag: string, durationMs: number) => {
        state.progress.update(`guarded c=${concurrency} ${variant.name} ${tag}`);
        return runWorkers({
          concurrency,
          durationMs,
          recordLatency: true,
          onError: (error) => state.failures.record('guarded', variant.name, error),
          op: async (worker) => {
            await variant.write(worker);
          },
        });
      };
      for (const variant of variants) await measure(variant, 'warmup', plan.warmupMs);
      const results = await interleave(variants, state.runs, (variant, run) =>
        measure(variant, `r${run}`, plan.durationMs),
      );
      const cell = (name: string): GuardedVariantCell => {
        const runs = results.get(name)!;
        const perSecond = runs.map((r) => r.ops / (r.elapsedMs / 1_000));
        const summaries = runs.map((r) => summarizeLatencies(r.latenciesMs));
        return {
          medianPerSecond: median(perSecond),
          ...range(perSecond),
          runs: perSecond,
          p50Ms: median(summaries.map((s) => s.p50)),
          p99Ms: median(summaries.map((s) => s.p99)),
          errors: runs.reduce((a, r) => a + r.errors, 0),
        };
      };
      const plain = cell('plain');
      const guarded = cell('guarded');
      const before = baselineName === undefined ? undefined : cell(baselineName);
      byConcurrency[String(concurrency)] = {
        plain,
        guarded,
        costRatio: plain.medianPerSecond / guarded.medianPerSecond,
        p50Ratio: guarded.p50Ms / plain.p50Ms,
        ...(before === undefined
          ? {}
          : {
              baseline: {
                ...before,
                costRatio: plain.medianPerSecond / before.medianPerSecond,
                p50Ratio: before.p50Ms / plain.p50Ms,
              },
            }),
      };
      state.progress.log(
        `guarded c=${concurrency}: plain ${Math.round(plain.medianPerSecond)}/s, guarded ${Math.round(guarded.medianPerSecond)}/s (cost ×${(plain.medianPerSecond / guarded.medianPerSecond).toFixed(3)})` +
          (before === undefined
            ? ''
            : `, ${baselineName} ${Math.round(before.medianPerSecond)}/s (cost ×${(plain.medianPerSecond / before.medianPerSecond).toFixed(3)})`),
      );
    }
    return {
      statement: 'update bench_account set balance = balance + 1 where id = $1',
      isolation: 'read committed',
      byConcurrency,
      ...(earlier === undefined
        ? {}
        : { baseline: { ref: earlier.checkout.ref, commit: earlier.checkout.commit } }),
    };
  } finally {
    await db.destroy();
    await schema.drop();
    await earlierDb?.destroy();
    await earlier?.schema.drop();
  }
}

/**
 * Scenario 5's table in the report: guarded writes against plain ones (and an earlier guard's, with
 * `--baseline-ref`).
 */
export function renderGuarded(results: BenchResults): string[] {
  const r = results.results;
  if (r.guarded === undefined) return [];
  const out: string[] = [];
  const guarded = r.guarded;
  const earlier = guarded.baseline === undefined ? undefined : `guarded@${guarded.baseline.ref}`;
  out.push(
    `### 5. Guarded write vs plain write (Postgres)`,
    '',
    `\`${guarded.statement}\` in a ${guarded.isolation} transaction; guarded = \`GuardedStore.run\` (fence statement + the same UPDATE). Median of ${results.runs} runs.` +
      (guarded.baseline === undefined
        ? ''
        : ` ${earlier} is the guarded store of ${guarded.baseline.ref} (commit ${guarded.baseline.commit.slice(0, 7)}), its own pool and schema, interleaved with the other two in the same run; its ratio is over the same plain runs.`),
    '',
    table(
      [
        'concurrency',
        'plain writes/s',
        'guarded writes/s',
        'time per write, guarded ÷ plain',
        ...(earlier === undefined ? [] : [`${earlier} writes/s`, `${earlier} ÷ plain`]),
        'plain p50 ms',
        'guarded p50 ms',
        'plain p99 ms',
        'guarded p99 ms',
      ],
      Object.entries(guarded.byConcurrency).map(([c, cell]) => [
        c,
        `${num(cell.plain.medianPerSecond)} [${num(cell.plain.min)}–${num(cell.plain.max)}]`,
        `${num(cell.guarded.medianPerSecond)} [${num(cell.guarded.min)}–${num(cell.guarded.max)}]`,
        `${cell.costRatio.toFixed(3)}×`,
        ...(earlier === undefined
          ? []
          : cell.baseline === undefined
            ? ['–', '–']
            : [
                `${num(cell.baseline.medianPerSecond)} [${num(cell.baseline.min)}–${num(cell.baseline.max)}]`,
                `${cell.baseline.costRatio.toFixed(3)}×`,
              ]),
        num(cell.plain.p50Ms, 3),
        num(cell.guarded.p50Ms, 3),
        num(cell.plain.p99Ms, 3),
        num(cell.guarded.p99Ms, 3),
      ]),
    ),
    '',
  );
  return out;
}
