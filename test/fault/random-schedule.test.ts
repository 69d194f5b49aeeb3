// A seeded random schedule of node pauses, kills and empty restarts, client partitions, delays and holds,
// with four clients doing read-modify-write increments, judged by every checker. The seed is fixed in CI;
// `npm run soak -- --seed S --minutes M` runs many more, and `--seed S` replays one.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultWorld } from '../fixtures/fault/fault-world.js';
import { describeStep, runRandomSchedule } from '../fixtures/fault/random-schedule.js';

const SEED = Number(process.env.FENCED_FAULT_SEED ?? 20_251_121);
const DURATION_MS = Number(process.env.FENCED_FAULT_DURATION_MS ?? 30_000);

let world: FaultWorld;

beforeAll(async () => {
  world = await FaultWorld.start();
});

afterAll(async () => {
  await world?.close();
});

describe(`a random fault schedule (seed ${SEED})`, () => {
  it('keeps tokens, commit order, the counter and operation ids correct through every fault', async () => {
    const poolsBefore = world.openDatabases;
    const { verdict, schedule, history, seeded } = await runRandomSchedule(world, {
      seed: SEED,
      durationMs: DURATION_MS,
      protection: 'protected',
    });
    expect(schedule.length).toBeGreaterThan(5);
    // Every token came from the registers (seeded above the time floor), none from a client's clock.
    const tokens = history.events.filter((e) => e.op === 'acquire' && e.kind === 'ok').map((e) => e.token!);
    expect(tokens.length).toBeGreaterThan(0);
    expect(tokens.every((t) => t > seeded)).toBe(true);
    expect(verdict.violations, `seed ${SEED}; schedule:\n${schedule.map(describeStep).join('\n')}`).toEqual(
      [],
    );
    expect(verdict.info.join('\n')).toMatch(/increments ok/);
    // A run closes the pools of its clients' stores: the soak keeps one world for hours, and a pool kept per run
    // showed as heap growing by run (docs/soak.md).
    expect(world.openDatabases).toBe(poolsBefore);
  });

  it('negative control: the same schedule without the guard fails the checkers', async () => {
    const { verdict } = await runRandomSchedule(world, {
      seed: SEED,
      durationMs: Math.min(DURATION_MS, 12_000),
      protection: 'no-guard',
    });
    expect(verdict.ok).toBe(false);
  });
});
