/**
 * The scenarios, in the order they run. `floor` is the nodes' own limit (bench/suite/scenarios/floor.ts), not a scenario
 * of its own: one more library of the scenarios that take it (see {@link scenariosWithFloor}).
 */
export const SCENARIO_NAMES = [
  'throughput',
  'floor',
  'latency',
  'handoff',
  'scale',
  'guarded',
  'http',
] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];

/** The scenarios the floor can join, as one more library after the real ones, interleaved with them. */
export const FLOOR_SCENARIOS = ['throughput', 'scale'] as const satisfies readonly ScenarioName[];
export type FloorScenario = (typeof FLOOR_SCENARIOS)[number];

/**
 * Which scenarios of a run the floor joins: none unless `floor` is selected; with it, those of
 * {@link FLOOR_SCENARIOS} that are selected too; and when neither is, the throughput scenario, which the `floor`
 * entry then runs itself (so `--scenario floor` alone still measures something: scenario 1 with the floor beside
 * the libraries).
 */
export function scenariosWithFloor(selected: readonly ScenarioName[]): FloorScenario[] {
  if (!selected.includes('floor')) return [];
  const joined = FLOOR_SCENARIOS.filter((scenario) => selected.includes(scenario));
  return joined.length > 0 ? joined : ['throughput'];
}

/**
 * Whether the `floor` entry of a run runs the throughput scenario itself: when the floor joins it but it is not
 * selected (`floor` without throughput or scale). Otherwise the entry measures nothing of its own.
 */
export function floorRunsThroughput(selected: readonly ScenarioName[]): boolean {
  return !selected.includes('throughput') && scenariosWithFloor(selected).includes('throughput');
}

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
    /**
     * Lease ttl during the pass: longer than the acquire phase (the cap) plus the settle, so no lease expires
     * before memory is read while held. It is also the largest ttl the plan uses, so the fenced library runs with
     * `maxTtlMs` and `tokenRetentionMs` equal to it (see `fencedLimits`), and the scale scenario can wait out the
     * retention.
     */
    ttlMs: number;
    /** Pause before each INFO memory, so replies, the AOF buffer and lazy frees have settled. */
    settleMs: number;
    /**
     * A pass over few resources repeats acquire-all/release-all over the same resources until its phases have
     * lasted this long together, so its throughput is measured over as steady a stretch as a large level's.
     */
    minMeasureMs: number;
    /**
     * After which levels the scenario waits for fenced's fold passes (the retention, then until the key count stops
     * falling) and reports what is left per resource: every level, only the last one (the quick plan: one wait
     * proves the path), or none (`--skip-fold-wait`).
     */
    foldWait: 'every-level' | 'last-level' | 'off';
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
    ttlMs: 40_000,
    settleMs: 300,
    minMeasureMs: 3_000,
    foldWait: 'every-level',
  },
  guarded: { concurrencies: [1, 32], warmupMs: 1_000, durationMs: 2_000 },
  http: { concurrencies: [1, 64], warmupMs: 1_000, durationMs: 2_000, ttlMs: 10_000 },
};

export const QUICK_PLAN: BenchPlan = {
  // Every ttl of the quick plan is at most 5 s, so fenced's retention is 5 s and the one fold wait is short.
  throughput: { concurrencies: [1, 16, 64, 256], warmupMs: 100, durationMs: 200, ttlMs: 5_000 },
  latency: { warmupSamples: 10, samples: 60, ttlMs: 5_000 },
  handoff: {
    waiterCounts: [1, 3],
    handoffsPerRun: 3,
    holdMs: 5,
    settleMs: 50,
    ttlMs: 5_000,
    waitMs: 30_000,
  },
  scale: {
    levels: [100, 300, 1_000],
    concurrency: 64,
    repeatLevelsUpTo: 100,
    phaseCapMs: 3_000,
    ttlMs: 5_000,
    settleMs: 50,
    minMeasureMs: 200,
    foldWait: 'last-level',
  },
  guarded: { concurrencies: [1, 32], warmupMs: 100, durationMs: 250 },
  http: { concurrencies: [1, 8], warmupMs: 100, durationMs: 250, ttlMs: 5_000 },
};

/** Repetitions of one scale level: every run for small levels, a single pass for the large ones. */
export function repetitionsFor(plan: BenchPlan['scale'], level: number, runs: number): number {
  return level <= plan.repeatLevelsUpTo ? runs : 1;
}

/**
 * `maxTtlMs` and `tokenRetentionMs` of every fenced Coordinator the bench creates: the largest lease ttl the plan
 * uses (the coordinator refuses longer ones), and the smallest retention the coordinator accepts for it (the
 * retention is at least `maxTtlMs`), so the scale scenario can wait for idle registers to be folded within the run.
 */
export function fencedLimits(plan: BenchPlan): { maxTtlMs: number; tokenRetentionMs: number } {
  const maxTtlMs = Math.max(
    plan.throughput.ttlMs,
    plan.latency.ttlMs,
    plan.handoff.ttlMs,
    plan.scale.ttlMs,
    plan.http.ttlMs,
  );
  return { maxTtlMs, tokenRetentionMs: maxTtlMs };
}

/**
 * The scale lease ttl for a phase cap: the cap plus 10 s (a lease acquired first lives through the rest of the
 * acquire phase, the settle and the memory read), never below the plan's own.
 */
export function scaleTtlFor(capMs: number, planTtlMs: number): number {
  return Math.max(planTtlMs, capMs + 10_000);
}
