// F20: a misbehaving client presents a forged token (2^63 − 1), another resource's token with that resource's
// valid proof, and a plausible token without its proof, between the critical sections of honest holders. With
// signed leases and a store that verifies proofs, every forged write is refused (INVALID_PROOF) and the honest
// holders carry on. Negative control: the same run against a store that does not verify: the forged maximum
// commits, the resource is bricked, and the token-provenance checker catches both.
import { generateKeyPairSync } from 'node:crypto';
import { MAX_TOKEN } from '@fenced/shared';
import type { Coordinator, Lease } from '@fenced/coordinator';
import type { GuardedStore } from '@fenced/guarded-store';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkGrantedTokens, combine } from '@fenced/test-utils/checkers';
import { History } from '@fenced/test-utils/history';
import { recordedIncrement, type Increment } from '../fixtures/fault/counter-ops.js';
import { FaultWorld, leaseRef, unique, type CounterDb } from '../fixtures/fault/fault-world.js';
import { judge, recordedAcquire, recordedRelease, type Verdict } from '../fixtures/fault/verdict.js';

const key = generateKeyPairSync('ed25519');
let world: FaultWorld;
let verifying: GuardedStore<CounterDb>;
let trusting: GuardedStore<CounterDb>;

beforeAll(async () => {
  world = await FaultWorld.start({ nodes: 3 });
  verifying = world.anotherStore({ verifyKeys: { f20: key.publicKey } });
  trusting = world.store; // signing off on the store side: any token in range is believed
});

afterAll(async () => {
  await world?.close();
});

type Protection = 'verified' | 'unverified';

/** A holder's guarded increment under its lease, presenting the lease's id and proof. */
function honest(process: string, lease: Lease): Increment {
  return {
    resource: lease.resource,
    token: lease.token,
    leaseRef: leaseRef(lease.id),
    process,
    opId: `${process}-${lease.token}-${lease.resource}`,
    mode: 'guarded',
    signed: { leaseId: lease.id, proof: lease.proof },
  };
}

async function attempt(
  history: History,
  store: GuardedStore<CounterDb>,
  increment: Increment,
): Promise<void> {
  // Refusals are the point; a refused or failed write is in the history either way.
  await recordedIncrement(history, store, increment).catch(() => undefined);
}

/**
 * Honest holders A and B take turns on `target`; mallory holds a real lease on `other` and, between A's and
 * B's critical sections, writes to `target` with (1) a forged 2^63 − 1 under its own lease id and proof,
 * (2) `other`'s token with `other`'s valid proof, (3) A's token + 1 without any proof.
 */
async function forgedTokens(protection: Protection): Promise<{ verdict: Verdict; history: History }> {
  const store = protection === 'verified' ? verifying : trusting;
  const target = unique('f20');
  const other = unique('f20-other');
  await world.ensureCounter(target);
  await world.ensureCounter(other);
  const history = new History();
  const coordinator: Coordinator = world.coordinator({
    signingKey: { id: 'f20', privateKey: key.privateKey },
  });
  await coordinator.ready();

  const section = async (process: string): Promise<Lease> => {
    const lease = await recordedAcquire(history, process, coordinator, target, {
      ttlMs: 2_000,
      waitMs: 5_000,
    });
    if (!lease) throw new Error(`${process} did not get the lease`);
    await attempt(history, store, honest(process, lease));
    return lease;
  };

  const a = await section('A');
  await recordedRelease(history, 'A', a);

  const loot = await recordedAcquire(history, 'mallory', coordinator, other, { ttlMs: 3_000 });
  if (!loot) throw new Error('mallory did not get its lease');
  const base = {
    resource: target,
    process: 'mallory',
    mode: 'guarded' as const,
    leaseRef: leaseRef(loot.id),
  };
  await attempt(history, store, {
    ...base,
    token: MAX_TOKEN,
    opId: 'mallory-forged-max',
    signed: { leaseId: loot.id, proof: loot.proof },
  });
  await attempt(history, store, {
    ...base,
    token: loot.token,
    opId: 'mallory-other-resource',
    signed: { leaseId: loot.id, proof: loot.proof },
  });
  await attempt(history, store, {
    ...base,
    token: a.token + 1n,
    opId: 'mallory-no-proof',
    signed: { leaseId: loot.id, proof: undefined },
  });
  await recordedRelease(history, 'mallory', loot);

  for (const process of ['B', 'A', 'B']) await recordedRelease(history, process, await section(process));
  await world.closeCoordinator(coordinator);

  const verdict = await judge(world, history, [target, other]);
  const provenance = checkGrantedTokens(history.data);
  const combined = combine({ judge: verdict, provenance });
  return { verdict: { ...combined, overlaps: verdict.overlaps }, history };
}

/** The outcomes of one process's increments, in order: `ok`, `fail: <code>`... */
function outcomes(history: History, process: string): string[] {
  return history.events
    .filter((e) => e.process === process && e.op === 'increment' && e.kind !== 'invoke')
    .map((e) => (e.kind === 'ok' ? 'ok' : `${e.kind}: ${(e.error ?? '').split(':')[0]}`));
}

describe('forged and misplaced tokens (F20)', () => {
  it('are refused with INVALID_PROOF when the store verifies signed leases; honest holders carry on', async () => {
    const { verdict, history } = await forgedTokens('verified');
    expect(verdict.violations).toEqual([]);
    expect(outcomes(history, 'mallory')).toEqual([
      'fail: INVALID_PROOF',
      'fail: INVALID_PROOF',
      'fail: INVALID_PROOF',
    ]);
    expect(outcomes(history, 'A')).toEqual(['ok', 'ok']);
    expect(outcomes(history, 'B')).toEqual(['ok', 'ok']);
  });

  it('negative control: without verification the forged maximum commits and bricks the resource, and the checker says so', async () => {
    const { verdict, history } = await forgedTokens('unverified');
    expect(verdict.ok).toBe(false);
    const violations = verdict.violations.join('\n');
    expect(violations).toMatch(/no grant of this resource has token 9223372036854775807/);
    expect(violations).toMatch(/refused as stale, yet no grant with a larger token existed/);
    // The other G-checkers alone do not see it: the fence only went up.
    expect(violations).not.toMatch(/^judge:/m);
    expect(outcomes(history, 'mallory')[0]).toBe('ok');
    expect(outcomes(history, 'B')).toEqual(['fail: STALE_TOKEN', 'fail: STALE_TOKEN']);
  });
});
