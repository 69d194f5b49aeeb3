import { seededRandom } from '@fenced/test-utils/seeded-random';
import { HOUR_MS, type RepairVariant, type ScenarioSpec } from './scenario.js';
import type { ProcessClock } from './sim-world.js';

/**
 * A random scenario for one seed: 3 or 5 nodes; two or three clients with skewed wall clocks, each with its own ttl,
 * maxTtlMs and nodeTimeoutMs and its own clock (timers running slow, a monotonic clock that jumps ahead); registers
 * seeded or not, and idle resources' registers so a repair reads in several batches; nodes losing their state
 * (never more than N − quorum unrepaired at once: more is beyond what any quorum protocol survives), one or two
 * competing repairers per loss with a maxTtlMs and clock of their own; folds into the floor at random moments; and
 * links that delay (past every ttl), lose and duplicate messages.
 */
export function randomSpec(seed: number, repair: RepairVariant = 'real'): ScenarioSpec {
  const random = seededRandom(seed ^ 0x5eed);
  const int = (min: number, max: number): number => min + Math.floor(random() * (max - min + 1));
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const nodes = pick([3, 3, 5]);
  const ttlMs = pick([500, 1_000, 2_000]);
  const maxTtlMs = ttlMs;
  const horizon = 10 * maxTtlMs;
  const clockOf = (): ProcessClock =>
    pick<ProcessClock>([
      {},
      {},
      { timerScale: pick([1.5, 3]) },
      { jumpAtMs: int(0, horizon), jumpMs: int(100, 5_000) },
    ]);
  const clients = Array.from({ length: int(2, 3) }, (_, i) => {
    const clientTtl = pick([ttlMs, ttlMs, 3 * ttlMs]);
    return {
      name: `client${i}`,
      skewMs: pick([0, -HOUR_MS, HOUR_MS, -1_234]),
      startsMs: Array.from({ length: int(2, 8) }, () => int(0, horizon)).sort((a, b) => a - b),
      ...(random() < 0.8 ? { releaseAfterMs: int(1, clientTtl) } : {}),
      ttlMs: clientTtl,
      maxTtlMs: pick([clientTtl, 60_000]),
      nodeTimeoutMs: pick([clientTtl, 50, 30_000]),
      clock: clockOf(),
      probes: random() < 0.5,
    };
  });
  const longestTtl = Math.max(...clients.map((c) => c.ttlMs));
  const starts = clients.flatMap((c) => c.startsMs);
  const amnesias = Array.from({ length: int(1, 3) }, () => ({
    node: int(0, nodes - 1),
    // Half the losses strike just after some client started: while its messages are in flight.
    atMs: random() < 0.5 ? pick(starts) + int(1, 5) : int(0, horizon),
    repairDelaysMs: Array.from({ length: int(1, 2) }, () => int(0, 300)),
  }));
  const folds = Array.from({ length: int(0, 3) }, () => ({ node: int(0, nodes - 1), atMs: int(0, horizon) }));
  return {
    nodes,
    ttlMs,
    maxTtlMs,
    clients,
    repairer: { maxTtlMs: pick([ttlMs, Math.max(20, Math.floor(ttlMs / 4))]), clock: clockOf() },
    fillerResources: int(0, 3),
    amnesias,
    folds,
    seededRegister: random() < 0.5 ? 0n : 1_900_000_000_000_000_000n,
    links: {
      delaysMs: [1, 15, Math.floor(ttlMs * 0.6), longestTtl * 3],
      losses: true,
      duplicates: true,
    },
    repair,
    maxSteps: 8_000,
  };
}
