// The per-node floor on real nodes (DESIGN §3, "memory bounded by active resources"): an absent register reads as
// the floor (include/decimal-token.lua), and folding an idle register away raises the floor to it in the same call
// (fold.lua). Together they keep every node's answer for every resource at least every value it ever promised, so a
// token granted after a fold is still above every token before it.
//
// Each test uses its own key prefix: its floor keys and its fresh cluster are its own. Tokens start far above the
// proposer's time-derived first proposal, so only the registers and the floor can lift a new grant above them.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Coordinator } from '@fenced/coordinator';
import { type CoordinatorOptions } from '@fenced/coordinator';
import {
  keysOf,
  nodeKeysOf,
  startCoordinatorFixture,
  type CoordinatorFixture,
} from '../../../fixtures/coordinator-fixture.js';

let raw: Redis[];
let cluster: CoordinatorFixture;
/** Far above `Date.now() << 20` (about 2^60.6): a fresh proposer's first proposal is below it. */
const HIGH = 1n << 62n;

function coordinator(options: Omit<CoordinatorOptions, 'nodes'>): Coordinator {
  return cluster.another(options);
}

beforeAll(async () => {
  cluster = await startCoordinatorFixture(3, { coordinator: false });
  ({ raw } = cluster);
});

afterEach(async () => {
  await cluster.closeOthers();
});

afterAll(async () => {
  await cluster?.close();
});

describe('the per-node floor (mutants 12, 13)', () => {
  it('reads an absent register as the floor, so a new resource gets a token above it', async () => {
    const keyPrefix = `floor-${randomUUID().slice(0, 8)}`;
    const c = coordinator({ keyPrefix });
    await c.ready();
    for (const r of raw) await r.set(nodeKeysOf(keyPrefix).floor, HIGH.toString());

    const lease = await c.acquire('never-used-before', { ttlMs: 2_000 });

    expect(lease.token).toBeGreaterThan(HIGH);
    await lease.release();
  });

  it('keeps a later token above a register that was folded away while the resource was idle', async () => {
    const keyPrefix = `fold-${randomUUID().slice(0, 8)}`;
    const resource = 'idle-resource';
    const registerKey = keysOf(resource, keyPrefix).token;
    // Retention 1 s: fold passes every second take registers idle for at least 2 s (OBJECT IDLETIME is whole
    // seconds); this coordinator runs them in the background.
    const folder = coordinator({ keyPrefix, maxTtlMs: 1_000, tokenRetentionMs: 1_000 });
    await folder.ready();
    for (const r of raw) await r.set(registerKey, HIGH.toString());
    const before = await folder.acquire(resource, { ttlMs: 1_000 });
    expect(before.token).toBeGreaterThan(HIGH);
    await before.release();

    // Sequencing, not timing: wait until every node has folded the register away.
    while ((await Promise.all(raw.map((r) => r.exists(registerKey)))).some((n) => n === 1)) await sleep(200);

    // A process that never saw the resource: its first proposal is the time-derived one, far below `before`.
    const fresh = coordinator({ keyPrefix, maxTtlMs: 1_000 });
    const after = await fresh.acquire(resource, { ttlMs: 1_000 });
    expect(after.token).toBeGreaterThan(before.token);
    await after.release();
  });
});
