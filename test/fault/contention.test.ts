// F15: a contention storm — many clients, one resource, split votes and retries — while critical sections
// outlive their leases now and then, so holders overlap.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { History } from '@fenced/test-utils/history';
import { FaultWorld, unique } from '../fixtures/fault/fault-world.js';
import { judge, type Verdict } from '../fixtures/fault/verdict.js';
import { runClients, type Protection, type WorkloadClient } from '../fixtures/fault/workload.js';

const CLIENTS = 8;

let world: FaultWorld;

beforeAll(async () => {
  world = await FaultWorld.start({ maxConnections: CLIENTS * 2 });
});

afterAll(async () => {
  await world?.close();
});

/**
 * Eight clients, each with its own coordinator (its own token memory, its own connections), all start at once:
 * their first attempts split the votes. Each critical section lasts more than twice its 150 ms lease, so the
 * next holder starts while the last one is still inside.
 */
async function storm(protection: Protection): Promise<Verdict> {
  const resource = unique('f15');
  await world.ensureCounter(resource);
  const history = new History();
  const clients: WorkloadClient[] = [];
  for (let i = 0; i < CLIENTS; i++) {
    const coordinator = world.coordinator({ retryDelayMs: 20, retryJitterMs: 40 });
    clients.push({ name: `W${i}`, coordinator, store: world.store });
  }
  await Promise.all(clients.map((c) => c.coordinator.ready()));
  await runClients(history, clients, {
    resource,
    protection,
    ttlMs: 150,
    holdMs: 350,
    waitMs: 15_000,
    maxCycles: 3,
  });
  for (const c of clients) await world.closeCoordinator(c.coordinator);
  return judge(world, history, [resource]);
}

describe('a contention storm (F15)', () => {
  it('grants unique, increasing tokens and loses no update though holders overlap', async () => {
    const verdict = await storm('protected');
    expect(verdict.violations).toEqual([]);
    expect(verdict.overlaps).toBeGreaterThan(0); // the leases did overlap: the guard did the work
  });

  it('negative control: without the guard the overlapping holders lose updates', async () => {
    const verdict = await storm('no-guard');
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/lost update|all wrote/);
  });
});
