import type { Progress } from './progress.js';

/** One thrown error, as recorded for the results (the run fails at the end if any were recorded). */
export interface Failure {
  scenario: string;
  subject: string;
  count: number;
  message: string;
}

/** Collects failures by scenario, subject and message, so a storm of the same error is one entry with a count. */
export class FailureLog {
  private readonly entries = new Map<string, Failure>();

  record(scenario: string, subject: string, error: unknown): void {
    const message = describeError(error);
    const key = `${scenario}\u0000${subject}\u0000${message}`;
    const entry = this.entries.get(key);
    if (entry === undefined) this.entries.set(key, { scenario, subject, count: 1, message });
    else entry.count++;
  }

  list(): Failure[] {
    return [...this.entries.values()];
  }
}

export function describeError(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`.slice(0, 300);
  return String(error).slice(0, 300);
}

/**
 * Runs `runs` repetitions of `measure` over `subjects` interleaved, so drift in the machine's state (other load,
 * Redis memory, the AOF growing, JIT) is spread over every subject instead of landing on one: run r measures
 * the subjects in the order rotated by r (ABCD BCDA CDAB …), never AAAA BBBB.
 */
export async function interleave<S extends { readonly name: string }, R>(
  subjects: readonly S[],
  runs: number,
  measure: (subject: S, run: number) => Promise<R>,
): Promise<Map<string, R[]>> {
  const results = new Map<string, R[]>(subjects.map((s) => [s.name, []]));
  for (let run = 0; run < runs; run++) {
    for (let i = 0; i < subjects.length; i++) {
      const subject = subjects[(i + run) % subjects.length]!;
      results.get(subject.name)!.push(await measure(subject, run));
    }
  }
  return results;
}

export interface WorkerRun {
  /** Operations that completed without throwing. */
  ops: number;
  /** Operations that threw (each also recorded in the failure log by the caller's `op`). */
  errors: number;
  elapsedMs: number;
  /** Per-operation durations in ms, when asked for. */
  latenciesMs: number[];
}

/**
 * `concurrency` workers each run `op(worker, i)` back to back until `durationMs` has passed or `maxOps` operations
 * were started in total (both bounds always apply). A throwing op counts as an error and the worker goes on.
 */
export async function runWorkers(options: {
  concurrency: number;
  durationMs: number;
  maxOps?: number;
  recordLatency?: boolean;
  onError: (error: unknown) => void;
  op: (worker: number, i: number) => Promise<void>;
}): Promise<WorkerRun> {
  const { concurrency, durationMs, op, onError } = options;
  const maxOps = options.maxOps ?? 10_000_000;
  const latenciesMs: number[] = [];
  let started = 0;
  let ops = 0;
  let errors = 0;
  const begin = performance.now();
  const deadline = begin + durationMs;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      for (let i = 0; started < maxOps && performance.now() < deadline; i++) {
        started++;
        const t0 = performance.now();
        try {
          await op(worker, i);
          ops++;
          if (options.recordLatency) latenciesMs.push(performance.now() - t0);
        } catch (error) {
          errors++;
          onError(error);
        }
      }
    }),
  );
  return { ops, errors, elapsedMs: performance.now() - begin, latenciesMs };
}

/**
 * Calls `fn(index)` for index 0 … count−1 with at most `concurrency` in flight, stopping early (without
 * starting new calls) once `deadline` (a `performance.now()` time) has passed. Bounded by `count`.
 */
export async function forEachIndex(
  count: number,
  concurrency: number,
  fn: (index: number) => Promise<void>,
  options: { deadline?: number; onProgress?: (done: number) => void } = {},
): Promise<{ done: number; stoppedAtDeadline: boolean }> {
  let next = 0;
  let done = 0;
  let stoppedAtDeadline = false;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) {
        if (options.deadline !== undefined && performance.now() >= options.deadline) {
          stoppedAtDeadline = true;
          return;
        }
        const index = next++;
        await fn(index);
        done++;
        if ((done & 1023) === 0) options.onProgress?.(done);
      }
    }),
  );
  return { done, stoppedAtDeadline };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Everything a scenario needs besides its own plan. */
export interface RunState {
  readonly progress: Progress;
  readonly failures: FailureLog;
  readonly runs: number;
}
