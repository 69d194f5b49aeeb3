/**
 * The few statistics the benchmark reports. Everything is computed from raw measurements kept in memory; nothing
 * is rounded here (rounding happens only when a table is printed).
 */

/** The median of the values (the mean of the two middle ones for an even count); NaN for none. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/**
 * The q-quantile (0 ≤ q ≤ 1) of already sorted values by the nearest-rank method: the smallest value with at
 * least q of the samples at or below it. No interpolation, so a p99.9 of 3000 samples is a measured sample
 * (the third largest), never a value between two.
 */
export function quantileSorted(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil(q * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1]!;
}

/** p50, p99 and p99.9 of one run's latency samples (milliseconds). */
export interface LatencySummary {
  samples: number;
  p50: number;
  p99: number;
  p999: number;
  max: number;
  mean: number;
}

export function summarizeLatencies(samplesMs: readonly number[]): LatencySummary {
  const sorted = [...samplesMs].sort((a, b) => a - b);
  const sum = sorted.reduce((a, b) => a + b, 0);
  return {
    samples: sorted.length,
    p50: quantileSorted(sorted, 0.5),
    p99: quantileSorted(sorted, 0.99),
    p999: quantileSorted(sorted, 0.999),
    max: sorted.length === 0 ? Number.NaN : sorted[sorted.length - 1]!,
    mean: sorted.length === 0 ? Number.NaN : sum / sorted.length,
  };
}

/** Field-by-field median over runs of latency summaries (the median run's p99 etc., each taken separately). */
export function medianSummary(runs: readonly LatencySummary[]): LatencySummary {
  const pick = (key: keyof LatencySummary): number => median(runs.map((r) => r[key]));
  return {
    samples: runs.reduce((a, r) => a + r.samples, 0),
    p50: pick('p50'),
    p99: pick('p99'),
    p999: pick('p999'),
    max: pick('max'),
    mean: pick('mean'),
  };
}

/** Spread of repeated runs, to show how noisy a median is: min and max over the runs. */
export function range(values: readonly number[]): { min: number; max: number } {
  if (values.length === 0) return { min: Number.NaN, max: Number.NaN };
  return { min: Math.min(...values), max: Math.max(...values) };
}
