import type { BenchPlan } from '../plan.js';
import type { LockLibrary } from '../lock-library.js';
import { interleave, type RunState } from '../runner.js';
import { medianSummary, summarizeLatencies, type LatencySummary } from '../statistics.js';
import type { BenchResults } from '../results.js';
import { num, ratio, table, type SectionView } from '../markdown.js';

export interface LatencyCell {
  /** Field-by-field median over the runs (p50 of the median run, p99 of the median run, …). */
  acquire: LatencySummary;
  release: LatencySummary;
  /** Percentiles of all runs' acquire samples pooled: p99.9 from every sample, not from one run's few. */
  acquirePooled: LatencySummary;
  /** Per-run acquire summaries, in run order. */
  acquireRuns: LatencySummary[];
  errors: number;
}

export interface LatencyResult {
  unit: 'milliseconds';
  samplesPerRun: number;
  byLibrary: Record<string, LatencyCell>;
}

/**
 * Scenario 2: latency at concurrency 1. One caller acquires a fresh-ish resource, then releases it, back to
 * back; acquire and release are timed separately (monotonic clock, sub-millisecond resolution).
 */
export async function runLatency(
  libraries: readonly LockLibrary[],
  plan: BenchPlan['latency'],
  state: RunState,
): Promise<LatencyResult> {
  const measure = async (library: LockLibrary, tag: string, samples: number) => {
    const acquire: number[] = [];
    const release: number[] = [];
    let errors = 0;
    for (let i = 0; i < samples; i++) {
      if (i % 100 === 0) state.progress.update(`latency ${library.name} ${tag} ${i}/${samples}`);
      try {
        const t0 = performance.now();
        const held = await library.acquire(`lat:${tag}:${i % 100}`, plan.ttlMs);
        const t1 = performance.now();
        await held.release();
        const t2 = performance.now();
        acquire.push(t1 - t0);
        release.push(t2 - t1);
      } catch (error) {
        errors++;
        state.failures.record('latency', library.name, error);
      }
    }
    return { acquire, release, errors };
  };
  for (const library of libraries) await measure(library, 'warmup', plan.warmupSamples);
  const results = await interleave(libraries, state.runs, (library, run) =>
    measure(library, `r${run}`, plan.samples),
  );
  const byLibrary: Record<string, LatencyCell> = {};
  for (const [name, runs] of results) {
    const acquireRuns = runs.map((r) => summarizeLatencies(r.acquire));
    byLibrary[name] = {
      acquire: medianSummary(acquireRuns),
      release: medianSummary(runs.map((r) => summarizeLatencies(r.release))),
      acquirePooled: summarizeLatencies(runs.flatMap((r) => r.acquire)),
      acquireRuns,
      errors: runs.reduce((a, r) => a + r.errors, 0),
    };
  }
  state.progress.log(
    `latency: acquire p50 ${Object.entries(byLibrary)
      .map(([name, cell]) => `${name} ${cell.acquire.p50.toFixed(3)} ms`)
      .join(', ')}`,
  );
  return { unit: 'milliseconds', samplesPerRun: plan.samples, byLibrary };
}

/**
 * Scenario 2's table in the report: acquire and release percentiles per library at concurrency 1.
 */
export function renderLatency(results: BenchResults, { columns, chart }: SectionView): string[] {
  const r = results.results;
  if (r.latency === undefined) return [];
  const out: string[] = [];
  const lat = r.latency.byLibrary;
  out.push(
    `### 2. Latency at concurrency 1`,
    '',
    ...chart('latency'),
    `Milliseconds (lower is better); median over ${results.runs} runs of ${num(r.latency.samplesPerRun)} acquire+release cycles each (p99.9 pooled over all runs in brackets).`,
    '',
    table(
      [
        'library',
        'acquire p50',
        'acquire p99',
        'acquire p99.9',
        'release p50',
        'release p99',
        'fenced ÷ library (acquire p50)',
      ],
      columns
        .filter((n) => lat[n] !== undefined)
        .map((n) => {
          const cell = lat[n]!;
          return [
            n,
            num(cell.acquire.p50, 3),
            num(cell.acquire.p99, 3),
            `${num(cell.acquire.p999, 3)} [${num(cell.acquirePooled.p999, 3)}]`,
            num(cell.release.p50, 3),
            num(cell.release.p99, 3),
            n === 'fenced' ? '' : ratio(lat.fenced?.acquire.p50, cell.acquire.p50),
          ];
        }),
    ),
    '',
  );
  return out;
}
