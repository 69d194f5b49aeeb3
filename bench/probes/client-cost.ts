// What the client's CPU costs per batched acquire and release (issue 37, item 2: each batch encoded once):
//   node --conditions=@fenced/source --import tsx bench/probes/client-cost.ts [--concurrency 64] [--rounds 15]
//        [--batches 20] [--cycles 40] [--baseline-ref REF]
// Starts five redis-servers of its own (DESIGN §3 persistence: appendonly, fsync always; free ports, temporary
// directories) and a Coordinator over them; with `--baseline-ref`, also the Coordinator of that revision (its
// sources in a temporary git worktree, bench/suite/baseline.ts; its own key prefix on the same nodes). Then, in
// rounds, each variant in turn (the order alternating round by round, so drift in the machine spreads over both):
//   batched     `--batches` times: `--concurrency` acquires of distinct resources started in one event-loop turn
//               (one batch per node), all awaited, then their releases the same way. This process's CPU
//               (`process.cpuUsage`, user + system, all threads) over the acquires and over the releases,
//               divided by the calls: the client's CPU per batched acquire and per batched release.
//   closed loop `--concurrency` workers, each `--cycles` acquire+release cycles back to back on resources of its
//               own (scenario 1's shape): CPU per cycle and cycles per second.
// CPU, not wall time, is the figure: the machine is shared, and at 64 on 2 cores the client's CPU per cycle is
// what it can change. Prints the medians over the rounds with [min–max]. Servers are stopped by their process ids.
// Measures; never fails on a figure.
import { loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Coordinator } from '@fenced/coordinator';
import { startRedisNodes } from '@fenced/test-utils/redis-cluster';
import { BASELINE_KEY_PREFIX, checkOutBaseline, type BaselineCheckout } from '../suite/baseline.js';
import { positiveInteger } from '../suite/options.js';
import { median } from '../suite/statistics.js';

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

  const batched = async (v: Variant, round: number): Promise<void> => {
    let acquireUs = 0;
    let releaseUs = 0;
    for (let b = 0; b < batches; b++) {
      const names = Array.from({ length: concurrency }, (_, i) => `cost:${(round * batches + b) % 50}:${i}`);
      let from = process.cpuUsage();
      const held = await Promise.all(names.map((name) => v.lock.acquire(name, { ttlMs: TTL_MS })));
      acquireUs += cpuSince(from);
      from = process.cpuUsage();
      await Promise.all(held.map((lease) => lease.release()));
      releaseUs += cpuSince(from);
    }
    v.acquireUs.push(acquireUs / (batches * concurrency));
    v.releaseUs.push(releaseUs / (batches * concurrency));
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

  // Warm-up: JIT, connections, the nodes' script caches; not counted.
  for (const v of variants) {
    await batched(v, 0);
    await closedLoop(v);
    v.acquireUs.length = v.releaseUs.length = v.cycleUs.length = v.cyclesPerSecond.length = 0;
  }
  const loadBefore = loadavg()[0]!;
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? variants : [...variants].reverse();
    for (const v of order) await batched(v, round);
    for (const v of order) await closedLoop(v);
    process.stderr.write(`round ${round + 1}/${rounds}\n`);
  }
  const loadAfter = loadavg()[0]!;

  const cell = (list: number[], digits = 2): string =>
    `${median(list).toFixed(digits)} [${Math.min(...list).toFixed(digits)}–${Math.max(...list).toFixed(digits)}]`;
  console.log(
    `Client CPU per call at concurrency ${concurrency} (process.cpuUsage, user + system, µs; median [min–max] of ${rounds} rounds; ` +
      `batched: ${batches} × ${concurrency} acquires then their releases per round; closed loop: ${concurrency} workers × ${cycles} cycles). ` +
      `Load average ${loadBefore.toFixed(2)} before, ${loadAfter.toFixed(2)} after.\n`,
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
    const ratio = (a: number[], b: number[]): string => (median(a) / median(b)).toFixed(3);
    console.log(
      `| this ÷ baseline | ${ratio(now.acquireUs, before.acquireUs)}× | ${ratio(now.releaseUs, before.releaseUs)}× | ${ratio(now.cycleUs, before.cycleUs)}× | ${ratio(now.cyclesPerSecond, before.cyclesPerSecond)}× |`,
    );
  }
} finally {
  for (const { lock } of variants) await lock.close().catch(() => undefined);
  await nodes.stop();
  await baseline?.remove();
}
