// What a signed token costs per guarded write (DESIGN §4b). Not part of `npm run bench`; run it briefly:
//
//   node --conditions=@fenced/source --import tsx bench/probes/signing-cost.ts [--seconds 2] [--runs 3] [--concurrency 4]
//
// Three stores over one pool write the same UPDATE through `GuardedStore.run`, each worker under its own lease
// (one resource, one token, one lease id, the proof the coordinator would send):
// - `unsigned`: no `verifyKeys` (the default);
// - `signed, cached`: `verifyKeys`, the default proof cache: a lease's first write verifies, the rest hit the cache;
// - `signed, uncached`: `verifyKeys` with `proofCacheSize: 0`: every write pays one Ed25519 verification.
// The runs are interleaved; medians are reported. Also: one Ed25519 sign and one verify on their own.
import { generateKeyPairSync } from 'node:crypto';
import { parseArgs } from 'node:util';
import { sql, type Kysely } from 'kysely';
import { GuardedStore, createDatabase } from '@fenced/guarded-store';
import { leaseIdDigest, signProof, verifyProof } from '@fenced/shared';
import { createTestSchema, findOrStartPostgres } from '@fenced/test-utils/postgres';
import { runWorkers } from '../suite/runner.js';
import { median, summarizeLatencies } from '../suite/statistics.js';

interface Tables {
  signing_bench: { id: number; n: bigint };
}

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '2' },
    runs: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '4' },
  },
  strict: true,
});
const seconds = Number(values.seconds);
const runs = Number(values.runs);
const concurrency = Number(values.concurrency);
if (![seconds, runs, concurrency].every((n) => Number.isFinite(n) && n > 0)) {
  throw new Error('--seconds, --runs and --concurrency must be positive numbers');
}

const pair = generateKeyPairSync('ed25519');
const keys = new Map([['bench', pair.publicKey]]);

function microbenchmark(): { signUs: number; verifyUs: number } {
  const claims = { keyId: 'bench', resource: 'bench:0', token: 1n, leaseIdDigest: leaseIdDigest('lease-0') };
  const n = 2_000;
  let proof = '';
  let t = performance.now();
  for (let i = 0; i < n; i++) proof = signProof(pair.privateKey, { ...claims, token: BigInt(i + 1) });
  const signUs = ((performance.now() - t) * 1_000) / n;
  t = performance.now();
  for (let i = 0; i < n; i++) verifyProof(keys, proof, { ...claims, token: BigInt(n) });
  const verifyUs = ((performance.now() - t) * 1_000) / n;
  return { signUs, verifyUs };
}

const server = await findOrStartPostgres();
const schema = await createTestSchema(server, 'fenced_signing_bench');
const db: Kysely<Tables> = createDatabase<Tables>({
  connectionString: server.url,
  searchPath: schema.schema,
  maxConnections: concurrency,
  applicationName: 'fenced-signing-bench',
});
try {
  const publicKey = { bench: pair.publicKey };
  const variants = [
    { name: 'unsigned', store: new GuardedStore(db, { schema: schema.schema }) },
    { name: 'signed, cached', store: new GuardedStore(db, { schema: schema.schema, verifyKeys: publicKey }) },
    {
      name: 'signed, uncached',
      store: new GuardedStore(db, { schema: schema.schema, verifyKeys: publicKey, proofCacheSize: 0 }),
    },
  ];
  await variants[0]!.store.migrate();
  await sql`create table signing_bench (id int primary key, n bigint not null default 0)`.execute(db);
  await sql`insert into signing_bench (id) select generate_series(0, ${concurrency - 1})`.execute(db);

  const fences = variants.map((_, v) =>
    Array.from({ length: concurrency }, (_, worker) => {
      const resource = `signing-bench:${v}:${worker}`;
      const leaseId = `bench-lease-${v}-${worker}-0123456789`;
      const token = 1_000n + BigInt(worker);
      const proof = signProof(pair.privateKey, {
        keyId: 'bench',
        resource,
        token,
        leaseIdDigest: leaseIdDigest(leaseId),
      });
      return { resource, token, leaseId, proof };
    }),
  );
  const write = (v: number, worker: number) =>
    variants[v]!.store.run(fences[v]![worker]!, (trx) =>
      sql`update signing_bench set n = n + 1 where id = ${worker}`.execute(trx),
    );

  const results = variants.map(() => [] as { perSecond: number; meanMs: number; p50Ms: number }[]);
  for (let run = -1; run < runs; run++) {
    for (let v = 0; v < variants.length; v++) {
      const r = await runWorkers({
        concurrency,
        durationMs: run < 0 ? 500 : seconds * 1_000, // run -1 warms up
        recordLatency: true,
        onError: (error) => {
          throw error;
        },
        op: async (worker) => {
          await write(v, worker);
        },
      });
      if (run < 0) continue;
      const summary = summarizeLatencies(r.latenciesMs);
      results[v]!.push({
        perSecond: r.ops / (r.elapsedMs / 1_000),
        meanMs: r.latenciesMs.reduce((a, b) => a + b, 0) / r.latenciesMs.length,
        p50Ms: summary.p50,
      });
    }
  }
  const micro = microbenchmark();
  console.log(
    `guarded writes, concurrency ${concurrency}, ${runs} interleaved runs of ${seconds} s (${server.backend} Postgres):`,
  );
  const base = median(results[0]!.map((r) => r.meanMs));
  for (const [v, variant] of variants.entries()) {
    const perSecond = median(results[v]!.map((r) => r.perSecond));
    const meanMs = median(results[v]!.map((r) => r.meanMs));
    const p50Ms = median(results[v]!.map((r) => r.p50Ms));
    const delta = v === 0 ? '' : ` (${((meanMs - base) * 1_000).toFixed(0)} µs per write vs unsigned)`;
    console.log(
      `  ${variant.name.padEnd(17)} ${Math.round(perSecond).toString().padStart(6)} writes/s, mean ${meanMs.toFixed(3)} ms, p50 ${p50Ms.toFixed(3)} ms${delta}`,
    );
  }
  console.log(`Ed25519 alone: sign ${micro.signUs.toFixed(1)} µs, verify ${micro.verifyUs.toFixed(1)} µs`);
} finally {
  await db.destroy();
  await schema.drop();
  await server.stop();
}
