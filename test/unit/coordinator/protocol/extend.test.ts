// Extend (protocol/extend.ts) on virtual time against in-memory nodes with the scripts' semantics: it succeeds
// only on a majority that still holds *this* lease. The interesting case is a successor holding the majority while
// our key survives on a minority — and our minority's "extended" arrives first, so nothing but the count can refuse.
//
// These tests kill mutant 05 of test/mutants/ (docs/mutation-testing.md).
import { LeaseLostError } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import { extendOnQuorum } from '../../../../packages/coordinator/src/protocol/extend.js';
import type { Releaser } from '../../../../packages/coordinator/src/protocol/release.js';
import { resourceKeys, type ResourceKeys } from '../../../../packages/coordinator/src/keys/key-layout.js';
import { scriptedRig, type ScriptedRig } from '../../../fixtures/protocol-sim/scripted-rig.js';

const RESOURCE = 'extended';
const KEYS = resourceKeys('fenced', RESOURCE);
const OURS = 'our-lease';
const SUCCESSOR = 'successor-lease';
const TTL_MS = 1_000;

/** Releases the extend asked for, recorded instead of sent (a fake of the one Releaser method extend uses). */
class RecordingReleaser implements Pick<Releaser, 'inBackground'> {
  readonly released: string[] = [];
  inBackground(_keys: Pick<ResourceKeys, 'lease' | 'channel'>, leaseId: string): void {
    this.released.push(leaseId);
  }
}

/**
 * `n` nodes; ours holds the lease key on `ourNodes` (token 7), the successor on the others (token 8). Our nodes
 * answer in 1 ms, the successor's in 50 ms: our "extended" replies are in before the decision.
 */
function split(n: number, ourNodes: readonly number[]): ScriptedRig {
  const rig = scriptedRig({
    nodes: n,
    delaysMs: [1, 50],
    schedule: (m) => {
      const node = Number(/->n(\d+)/.exec(m)?.[1]);
      return ourNodes.includes(node) ? 1 : 50;
    },
  });
  for (const model of rig.models) {
    const ours = ourNodes.includes(model.index);
    model.setLease(KEYS, ours ? OURS : SUCCESSOR, ours ? 7n : 8n, 500);
  }
  return rig;
}

async function extend(rig: ScriptedRig, releaser: RecordingReleaser): Promise<unknown> {
  return rig
    .runAt(100, () =>
      extendOnQuorum(rig.context, releaser, {
        resource: RESOURCE,
        keys: KEYS,
        leaseId: OURS,
        ttlMs: TTL_MS,
        validUntil: 400,
      }),
    )
    .then(
      ({ value }) => value,
      (error: unknown) => error,
    );
}

function successorLeases(rig: ScriptedRig): { holder: string; token: bigint; expiresAt: number }[] {
  return rig.models
    .map((m) => m.lease(KEYS))
    .filter((l) => l !== undefined && l.holder === SUCCESSOR)
    .map((l) => ({ ...l! }));
}

describe('extend succeeds only on a majority', () => {
  it('reports LeaseLostError when a successor holds two of three nodes, though our node said "extended" first', async () => {
    const rig = split(3, [0]);
    const releaser = new RecordingReleaser();

    const outcome = await extend(rig, releaser);

    expect(outcome).toBeInstanceOf(LeaseLostError);
    // Had it and lost it: our leftover key is released, the successor's lease is untouched.
    expect(releaser.released).toEqual([OURS]);
    expect(successorLeases(rig)).toEqual([
      { holder: SUCCESSOR, token: 8n, expiresAt: 500 },
      { holder: SUCCESSOR, token: 8n, expiresAt: 500 },
    ]);
  });

  it('reports LeaseLostError when a successor holds three of five nodes and we still hold two', async () => {
    const rig = split(5, [0, 1]);
    const releaser = new RecordingReleaser();

    const outcome = await extend(rig, releaser);

    expect(outcome).toBeInstanceOf(LeaseLostError);
    expect(releaser.released).toEqual([OURS]);
    expect(successorLeases(rig)).toHaveLength(3);
  });

  it('extends, keeping the token, when a majority still holds our lease', async () => {
    const rig = split(5, [0, 1, 2]);
    const releaser = new RecordingReleaser();

    const outcome = await extend(rig, releaser);

    expect(outcome).toMatchObject({ token: 7n, ttlMs: TTL_MS });
    expect(releaser.released).toEqual([]);
  });
});
