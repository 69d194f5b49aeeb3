import { setTimeout as sleep } from 'node:timers/promises';

export interface EventuallyOptions {
  /**
   * Liveness bound: fail with an error naming `what` once the condition has not held for this long. It bounds how
   * long a broken test hangs; it is not a timing assertion. @defaultValue no bound: the test's own timeout ends
   * the wait
   */
  timeoutMs?: number;
  /** Pause between two checks. @defaultValue 20 */
  intervalMs?: number;
  /** What is awaited, for the error. @defaultValue `'the condition'` */
  what?: string;
}

/**
 * Polls `check` until it returns true. Sequencing, not timing: a test waits for a state it cannot be told about
 * (a node reconnected, a background pass finished) and then asserts on it.
 */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  options: EventuallyOptions = {},
): Promise<void> {
  const { timeoutMs = Number.POSITIVE_INFINITY, intervalMs = 20, what = 'the condition' } = options;
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`${what} did not hold within ${timeoutMs} ms`);
    await sleep(intervalMs);
  }
}
