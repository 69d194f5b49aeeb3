// What the client's CPU costs per batched acquire and release (issue 37, item 2: each batch encoded once):
//   node --conditions=@fenced/source --import tsx bench/probes/client-cost.ts [--concurrency 64] [--rounds 15]
//        [--batches 20] [--cycles 40] [--baseline-ref REF]
// Starts five redis-servers of its own (DESIGN §3 persistence: appendonly, fsync always; free ports, temporary
// directories) and a Coordinator over them; with `--baseline-ref`, also the Coordinator of that revision (its
// sources in a temporary git worktree, bench/suite/baseline.ts; its own key prefix on the same nodes). Then, in
// `--rounds` rounds, each of (the variants in turn, the order alternating, so drift in the load hits both alike):
//   batched     `--batches` batches: `--concurrency` acquires of distinct resources started in one event-loop turn
//               (one batch per node), all awaited, then their releases the same way. This process's CPU
//               (`process.cpuUsage`, user + system, all threads) over the acquires and over the releases,
//               divided by the calls: the client's CPU per batched acquire and per batched release. The variants
//               take turns batch by batch.
//   closed loop `--concurrency` workers, each `--cycles` acquire+release cycles back to back on resources of its
//               own (scenario 1's shape): CPU per cycle and cycles per second; one run per variant and round.
// CPU, not wall time, is the figure: the machine is shared, and at 64 on 2 cores the client's CPU per cycle is
// what it can change. Prints medians with [p10–p90], and this revision ÷ the baseline both as the ratio of the
// medians and as the median of the ratios of pairs run moments apart. Servers are stopped by their process ids.
// Measures; never fails on a figure.
import { loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Coordinator } from '@fenced/coordinator';
import { startRedisNodes } from '@fenced/test-utils/redis-cluster';
import { BASELINE_KEY_PREFIX, checkOutBaseline, type BaselineCheckout } from '../suite/baseline.js';
import { positiveInteger } from '../suite/options.js';
import { median, quantileSorted } from '../suite/statistics.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TTL_MS = 10_000;

const { values } = parseArgs({
  options: {
    concurrency: { type: 'string', default: '64' },
    rounds: { type: 'string', default: '15' },
    batches: { type: 'string', default: '20' },
    cycles: { type: 'string', default: '40' },
    'baseline-ref': { type: 'string' },
  },
});
const concurrency = positiveInteger('--concurrency', values.concurrency, 1, 1_000);
const rounds = positiveInteger('--rounds', values.rounds, 1, 10_000);
const batches = positiveInteger('--batches', values.batches, 1, 100_000);
const cycles = positiveInteger('--cycles', values.cycles, 1, 100_000);

interface Held {
  release(): Promise<void>;
}
interface Lock {
  acquire(resource: string, options: { ttlMs: number }): Promise<Held>;
  ready(): Promise<void>;
  close(): Promise<void>;
  on(event: 'nodeError', listener: () => void): unknown;
}
interface Variant {
  readonly name: string;
  readonly lock: Lock;
  readonly acquireUs: number[];
  readonly releaseUs: number[];
  readonly cycleUs: number[];
  readonly cyclesPerSecond: number[];
}

/** CPU µs of this process since `from` (user + system). */
function cpuSince(from: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(from);
  return used.user + used.system;
}

const nodes = await startRedisNodes(5, { useExisting: false });
const options = { nodes: nodes.urls, maxTtlMs: 40_000 };
let baseline: BaselineCheckout | undefined;
const variants: Variant[] = [];
const variant = (name: string, lock: Lock): Variant => ({
  name,
  lock,
  acquireUs: [],
  releaseUs: [],
  cycleUs: [],
  cyclesPerSecond: [],
});
try {
  variants.push(variant('this revision', new Coordinator({ ...options, tokenRetentionMs: 40_000 })));
  if (values['baseline-ref'] !== undefined) {
    baseline = await checkOutBaseline(ROOT, values['baseline-ref']);
    const entry = path.join(baseline.dir, 'packages', 'coordinator', 'src', 'index.ts');
    const module = (await import(pathToFileURL(entry).href)) as {
      Coordinator: new (options: Record<string, unknown>) => Lock;
    };
    variants.push(
      variant(
        `${baseline.ref} (${baseline.commit.slice(0, 7)})`,
        new module.Coordinator({ ...options, keyPrefix: BASELINE_KEY_PREFIX, tokenRetentionMs: 40_000 }),
      ),
    );
  }
  for (const { lock } of variants) {
    lock.on('nodeError', () => undefined);
    await lock.ready();
  }

  /** One batch: `concurrency` acquires started in one turn, then their releases; CPU per call of each. */
  const batched = async (v: Variant, index: number): Promise<void> => {
    const names = Array.from({ length: concurrency }, (_, i) => `cost:${index % 50}:${i}`);
    let from = process.cpuUsage();
    const held = await Promise.all(names.map((name) => v.lock.acquire(name, { ttlMs: TTL_MS })));
    v.acquireUs.push(cpuSince(from) / concurrency);
    from = process.cpuUsage();
    await Promise.all(held.map((lease) => lease.release()));
    v.releaseUs.push(cpuSince(from) / concurrency);
  };
  const closedLoop = async (v: Variant): Promise<void> => {
    const from = process.cpuUsage();
    const start = performance.now();
    await Promise.all(
      Array.from({ length: concurrency }, async (_, worker) => {
        for (let c = 0; c < cycles; c++) {
          const lease = await v.lock.acquire(`loop:${worker}:${c % 10}`, { ttlMs: TTL_MS });
          await lease.release();
        }
      }),
    );
    const seconds = (performance.now() - start) / 1_000;
    v.cycleUs.push(cpuSince(from) / (concurrency * cycles));
    v.cyclesPerSecond.push((concurrency * cycles) / seconds);
  };
  const inTurn = (index: number): Variant[] => (index % 2 === 0 ? variants : [...variants].reverse());

  // Warm-up: JIT, connections, the nodes' script caches; not counted.
  for (const v of variants) {
    for (let b = 0; b < batches; b++) await batched(v, b);
    await closedLoop(v);
    v.acquireUs.length = v.releaseUs.length = v.cycleUs.length = v.cyclesPerSecond.length = 0;
  }
  const loadBefore = loadavg()[0]!;
  for (let round = 0; round < rounds; round++) {
    // Batch by batch, the variants in turn (pairs taken moments apart, so the machine's load hits both alike).
    for (let b = 0; b < batches; b++) {
      const index = round * batches + b;
      for (const v of inTurn(index)) await batched(v, index);
    }
    for (const v of inTurn(round)) await closedLoop(v);
    process.stderr.write(`round ${round + 1}/${rounds}\n`);
  }
  const loadAfter = loadavg()[0]!;

  const sortedOf = (list: readonly number[]): number[] => [...list].sort((a, b) => a - b);
  const cell = (list: readonly number[], digits = 2): string => {
    const sorted = sortedOf(list);
    const q = (p: number) => quantileSorted(sorted, p).toFixed(digits);
    return `${q(0.5)} [${q(0.1)}–${q(0.9)}]`;
  };
  console.log(
    `Client CPU per call at concurrency ${concurrency} (process.cpuUsage, user + system, µs): median [p10–p90] of ` +
      `${rounds * batches} batches (${concurrency} acquires started in one turn, then their releases) and of ${rounds} ` +
      `closed-loop runs (${concurrency} workers × ${cycles} cycles) per variant, the variants in turn batch by batch ` +
      `and run by run. Load average ${loadBefore.toFixed(2)} before, ${loadAfter.toFixed(2)} after.\n`,
  );
  console.log(
    '| variant | CPU per batched acquire | CPU per batched release | CPU per cycle, closed loop | cycles/s, closed loop |',
  );
  console.log('| --- | --- | --- | --- | --- |');
  for (const v of variants) {
    console.log(
      `| ${v.name} | ${cell(v.acquireUs)} | ${cell(v.releaseUs)} | ${cell(v.cycleUs)} | ${cell(v.cyclesPerSecond, 0)} |`,
    );
  }
  if (variants.length === 2) {
    const [now, before] = variants as [Variant, Variant];
    // The ratio of the medians, then the median of the pairs' own ratios (each pair run moments apart).
    const ratio = (a: readonly number[], b: readonly number[]): string => {
      const paired = sortedOf(a.map((x, i) => x / b[i]!));
      return `${(median(a) / median(b)).toFixed(3)}× (pairs ${quantileSorted(paired, 0.5).toFixed(3)}×)`;
    };
    console.log(
      `| this ÷ baseline | ${ratio(now.acquireUs, before.acquireUs)} | ${ratio(now.releaseUs, before.releaseUs)} | ${ratio(now.cycleUs, before.cycleUs)} | ${ratio(now.cyclesPerSecond, before.cyclesPerSecond)} |`,
    );
  }
} finally {
  for (const { lock } of variants) await lock.close().catch(() => undefined);
  await nodes.stop();
  await baseline?.remove();
}
