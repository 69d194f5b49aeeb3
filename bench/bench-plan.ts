/** The scenarios, in the order they run. */
export const SCENARIO_NAMES = ['throughput', 'latency', 'handoff', 'scale', 'guarded', 'http'] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

/**
 * How much each scenario measures. The full plan is sized to finish in about 15 minutes on 2 cores; the quick
 * plan is a smoke run (well under a minute) that only proves every library still runs every scenario.
 */
export interface BenchPlan {
  throughput: { concurrencies: number[]; warmupMs: number; durationMs: number; ttlMs: number };
  latency: { warmupSamples: number; samples: number; ttlMs: number };
  handoff: {
    /**
     * Waiters queued on the one resource in each round, one cell per count; each waiter is granted once, so a
     * round has that many hand-offs.
     */
    waiterCounts: number[];
    /** Hand-offs measured per run (rounds of `waiters` each, rounded up). */
    handoffsPerRun: number;
    /** How long each holder keeps the lease before releasing it. */
    holdMs: number;
    /** Time for every waiter to fail its first attempt and start waiting before the first release. */
    settleMs: number;
    ttlMs: number;
    waitMs: number;
  };
  scale: {
    levels: number[];
    concurrency: number;
    /** Repetitions of a level, at most: small levels get `runs`, large ones 1 (see `repetitionsFor`). */
    repeatLevelsUpTo: number;
    /** Bound of the acquire phase of one pass (and of its release phase). The pass stops there if unfinished. */
    phaseCapMs: number;
    /** Lease ttl during the pass: longer than both phases, so nothing expires while memory is measured. */
    ttlMs: number;
    /** Pause before each INFO memory, so replies, the AOF buffer and lazy frees have settled. */
    settleMs: number;
    /**
     * A pass over few resources repeats acquire-all/release-all over the same resources until its phases have
     * lasted this long together, so its throughput is measured over as steady a stretch as a large level's.
     */
    minMeasureMs: number;
  };
  guarded: { concurrencies: number[]; warmupMs: number; durationMs: number };
  http: { concurrencies: number[]; warmupMs: number; durationMs: number; ttlMs: number };
}

export const FULL_PLAN: BenchPlan = {
  throughput: { concurrencies: [1, 16, 64, 256], warmupMs: 1_000, durationMs: 2_000, ttlMs: 10_000 },
  latency: { warmupSamples: 200, samples: 1_500, ttlMs: 10_000 },
  handoff: {
    waiterCounts: [1, 8],
    handoffsPerRun: 16,
    holdMs: 10,
    settleMs: 100,
    ttlMs: 30_000,
    waitMs: 60_000,
  },
  scale: {
    levels: [1_000, 100_000, 1_000_000],
    concurrency: 256,
    repeatLevelsUpTo: 1_000,
    phaseCapMs: 30_000,
    ttlMs: 600_000,
    settleMs: 300,
    minMeasureMs: 3_000,
  },
  guarded: { concurrencies: [1, 32], warmupMs: 1_000, durationMs: 2_000 },
  http: { concurrencies: [1, 64], warmupMs: 1_000, durationMs: 2_000, ttlMs: 10_000 },
};

export const QUICK_PLAN: BenchPlan = {
  throughput: { concurrencies: [1, 16, 64, 256], warmupMs: 100, durationMs: 200, ttlMs: 10_000 },
  latency: { warmupSamples: 10, samples: 60, ttlMs: 10_000 },
  handoff: {
    waiterCounts: [1, 3],
    handoffsPerRun: 3,
    holdMs: 5,
    settleMs: 50,
    ttlMs: 30_000,
    waitMs: 30_000,
  },
  scale: {
    levels: [100, 300, 1_000],
    concurrency: 64,
    repeatLevelsUpTo: 100,
    phaseCapMs: 5_000,
    ttlMs: 120_000,
    settleMs: 50,
    minMeasureMs: 200,
  },
  guarded: { concurrencies: [1, 32], warmupMs: 100, durationMs: 250 },
  http: { concurrencies: [1, 64], warmupMs: 100, durationMs: 250, ttlMs: 10_000 },
};

/** Repetitions of one scale level: every run for small levels, a single pass for the large ones. */
export function repetitionsFor(plan: BenchPlan['scale'], level: number, runs: number): number {
  return level <= plan.repeatLevelsUpTo ? runs : 1;
}
