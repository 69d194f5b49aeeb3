/**
 * Clock drift allowance of DESIGN §2.3: `round(ttl × driftFactor) + 2` ms. The 2 ms cover Redis' own expiry
 * granularity; the proportional part covers a server clock that runs faster than ours.
 */
export function driftMs(ttlMs: number, driftFactor: number): number {
  return Math.round(ttlMs * driftFactor) + 2;
}

/**
 * How long a lease can be relied on, measured from the start of the attempt that won it:
 * `ttl − elapsed − drift`, floored to whole milliseconds.
 *
 * Why subtract elapsed: every node started its ttl when *it* ran the script, at some instant between the start
 * of the attempt and now, so the earliest any vote can expire is `start + ttl` on the node's clock. Measuring
 * from the start (on a monotonic clock, immune to wall-clock jumps) is the conservative choice; the drift then
 * absorbs a node clock running faster than ours.
 */
export function validityMs(ttlMs: number, elapsedMs: number, driftFactor: number): number {
  return Math.floor(ttlMs - elapsedMs - driftMs(ttlMs, driftFactor));
}

/** The monotonic clock every validity is measured on. Never `Date.now()`: wall clocks jump. */
export function monotonicNow(): number {
  return performance.now();
}
