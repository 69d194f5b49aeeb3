// F18: reads outside the guard. The guard orders writes, but a value read before the guarded transaction may be
// stale by the time it is written back: the lost-update counter must catch it. Through every guard path
// (test/fixtures/fault/guard-paths.ts): the Kysely store, node-postgres with PgGuard, Prisma with PrismaGuard, Drizzle with
// DrizzleGuard.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { History } from '@fenced/test-utils/history';
import { GUARD_PATHS, type GuardPath } from '../fixtures/fault/counter-ops.js';
import { FaultWorld, unique } from '../fixtures/fault/fault-world.js';
import { judge, type Verdict } from '../fixtures/fault/verdict.js';
import { runClients, type Protection, type WorkloadClient } from '../fixtures/fault/workload.js';

let world: FaultWorld;

beforeAll(async () => {
  world = await FaultWorld.start();
});

afterAll(async () => {
  await world?.close();
});

/**
 * Four clients writing through `path`; each critical section spends twice its lease between its read and its
 * write.
 */
async function overlappingReadModifyWrite(path: GuardPath, protection: Protection): Promise<Verdict> {
  const resource = unique('f18');
  await world.ensureCounter(resource);
  const history = new History();
  const store = await world.counterStore(path);
  const clients: WorkloadClient[] = ['A', 'B', 'C', 'D'].map((name) => ({
    name,
    coordinator: world.coordinator(),
    store,
  }));
  await Promise.all(clients.map((c) => c.coordinator.ready()));
  await runClients(history, clients, {
    resource,
    protection,
    ttlMs: 200,
    holdMs: 400,
    waitMs: 10_000,
    maxCycles: 2,
  });
  for (const c of clients) await world.closeCoordinator(c.coordinator);
  return judge(world, history, [resource]);
}

describe.each(GUARD_PATHS)('reads made outside the guard (F18), through the %s guard path', (path) => {
  it('lose nothing when the read is inside the guarded transaction', async () => {
    const verdict = await overlappingReadModifyWrite(path, 'protected');
    expect(verdict.violations).toEqual([]);
    expect(verdict.overlaps).toBeGreaterThan(0);
  });

  it('negative control: reads outside the guarded transaction lose updates the counter checker catches', async () => {
    const verdict = await overlappingReadModifyWrite(path, 'reads-outside');
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/lost update|all wrote/);
    // The guard itself was not fooled: every write went through in token order.
    expect(verdict.violations.join('\n')).not.toMatch(/high-water mark/);
  });
});
