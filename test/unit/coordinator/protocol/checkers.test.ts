// The checkers of G3, G4 and G5 over the simulation's modelled guard (test/fixtures/protocol-sim/checkers.ts,
// guard-model.ts, sim-holder.ts; the lease calls' retries: lease-retries.test.ts). Each checker is shown hand-made histories
// (a good one passes, a bad one is reported), and each has a negative control: one protection switched off (in the
// modelled guard, or a mutated script), which the nemesis search must find in its first schedules, shrink, and
// replay, while the shipped guard and scripts keep every check on the same shrunk case.
import { describe, expect, it } from 'vitest';
import {
  g3Violations,
  g4Violations,
  g5Violations,
  type WriteOutcome,
} from '../../../fixtures/protocol-sim/checkers.js';
import {
  GuardModel,
  type CommitRecord,
  type GuardedWrite,
  type PresentedGrant,
} from '../../../fixtures/protocol-sim/guard-model.js';
import { runNemesis, type NemesisVariant } from '../../../fixtures/protocol-sim/nemesis.js';
import { findViolation } from '../../../fixtures/protocol-sim/search.js';

/** `SIM_CHECKERS_SEED` picks other schedules for the negative controls. */
const SEED = Number(process.env.SIM_CHECKERS_SEED ?? 34);
const SEARCH_TIMEOUT_MS = 120_000;

function grant(
  process: string,
  token: bigint,
  startSeq: number,
  endSeq: number,
  resource = 'r',
): PresentedGrant {
  return { resource, process, token, leaseId: `${process}-${token}`, startSeq, endSeq };
}

function commit(
  g: PresentedGrant,
  seq: number,
  opId: string,
  read: number | null = null,
  wrote: number | null = read === null ? null : read + 1,
): CommitRecord {
  return { grant: g, kind: read === null ? 'fence-in' : 'increment', opId, seq, read, wrote };
}

describe('the modelled guard keeps the guarded store’s rule (fence-statement.ts, migration 0006)', () => {
  const write = (
    g: PresentedGrant,
    opId: string,
    kind: GuardedWrite['kind'] = 'increment',
  ): GuardedWrite => ({
    grant: g,
    kind,
    opId,
  });

  it('refuses a token below the fence, and an equal token from another lease or none; raises on a higher one', () => {
    const guard = new GuardModel();
    const a = grant('a', 5n, 0, 1);
    expect(guard.apply(write(a, 'a1'), 1)).toEqual({ kind: 'committed', result: 1 });
    expect(guard.apply(write(a, 'a2'), 2)).toEqual({ kind: 'committed', result: 2 });
    expect(guard.apply(write({ ...a, leaseId: 'other' }, 'x'), 3)).toEqual({ kind: 'stale', current: 5n });
    expect(guard.apply(write({ ...a, leaseId: '' }, 'y'), 4)).toEqual({ kind: 'stale', current: 5n });
    expect(guard.apply(write(grant('b', 4n, 0, 1), 'b1'), 5)).toEqual({ kind: 'stale', current: 5n });
    expect(guard.apply(write(grant('c', 6n, 2, 3), 'c1', 'fence-in'), 6)).toEqual({
      kind: 'committed',
      result: null,
    });
    expect(guard.apply(write(a, 'a3'), 7)).toEqual({ kind: 'stale', current: 6n });
    expect(guard.commits.map((c) => c.opId)).toEqual(['a1', 'a2', 'c1']);
  });

  it('returns a committed operation’s result to its retry, even once a successor fenced in (guarded-store.ts run)', () => {
    const guard = new GuardModel();
    const a = grant('a', 5n, 0, 1);
    expect(guard.apply(write(a, 'a1'), 1)).toEqual({ kind: 'committed', result: 1 });
    expect(guard.apply(write(a, 'a1'), 2)).toEqual({ kind: 'replayed', result: 1 });
    guard.apply(write(grant('b', 6n, 2, 3), 'b1', 'fence-in'), 3);
    expect(guard.apply(write(a, 'a1'), 4)).toEqual({ kind: 'replayed', result: 1 });
    expect(guard.commits).toHaveLength(2);
  });

  it('negative controls: each variant switches exactly its protection off', () => {
    const a = grant('a', 5n, 0, 1);
    const b = grant('b', 6n, 2, 3);
    const noHighWater = new GuardModel('guard-no-high-water');
    noHighWater.apply(write(b, 'b1'), 1);
    expect(noHighWater.apply(write(a, 'a1'), 2).kind).toBe('committed');
    const noDedup = new GuardModel('guard-no-op-dedup');
    noDedup.apply(write(a, 'a1'), 1);
    expect(noDedup.apply(write(a, 'a1'), 2)).toEqual({ kind: 'committed', result: 2 });
    const noReplay = new GuardModel('guard-no-replay-when-stale');
    noReplay.apply(write(a, 'a1'), 1);
    expect(noReplay.apply(write(a, 'a1'), 2).kind).toBe('replayed');
    noReplay.apply(write(b, 'b1', 'fence-in'), 3);
    expect(noReplay.apply(write(a, 'a1'), 4).kind).toBe('stale');
    const outside = new GuardModel('guard-reads-outside');
    expect(outside.apply({ ...write(a, 'a1'), readOutside: 7 }, 1)).toEqual({ kind: 'committed', result: 8 });
  });
});

describe('G3 over a history', () => {
  const a = grant('a', 5n, 0, 10);
  const b = grant('b', 7n, 12, 20);

  it('accepts commits of an earlier grant before the later one fenced in, and of the later one after', () => {
    expect(
      g3Violations([
        commit(a, 21, 'a0'),
        commit(a, 22, 'a1', 0),
        commit(b, 25, 'b0'),
        commit(b, 26, 'b1', 1),
      ]),
    ).toEqual([]);
  });

  it('negative control: reports a commit of an earlier grant after a later one fenced in', () => {
    const found = g3Violations([commit(b, 25, 'b0'), commit(a, 30, 'a1', 0)]);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(
      /b \(lease b-7.*fenced in at #25, then a \(lease a-5.*committed increment a1 at #30/,
    );
    // Earlier in real time with a higher token (G2 broken) counts too; other resources are never compared.
    const backwards = grant('c', 9n, 0, 10);
    expect(g3Violations([commit(b, 25, 'b0'), commit(backwards, 30, 'c1', 0)])).toHaveLength(1);
    expect(g3Violations([commit(b, 25, 'b0'), commit(grant('a', 5n, 0, 10, 'other'), 30, 'a1', 0)])).toEqual(
      [],
    );
  });
});

describe('G4 over a history', () => {
  const a = grant('a', 5n, 0, 10);
  const b = grant('b', 7n, 12, 20);

  it('accepts read-modify-writes equal to a serial run in token order', () => {
    expect(g4Violations([commit(a, 21, 'a1', 0), commit(a, 22, 'a2', 1), commit(b, 25, 'b1', 2)])).toEqual(
      [],
    );
  });

  it('negative control: reports a lost update (two holders read the same value) and a commit out of token order', () => {
    expect(g4Violations([commit(a, 21, 'a1', 0), commit(b, 25, 'b1', 0)])[0]).toMatch(
      /b \(lease b-7.*read 0 and wrote 1 at #25; a serial run in token order reads 1 there/,
    );
    expect(g4Violations([commit(b, 21, 'b1', 0), commit(a, 25, 'a1', 1)])).toHaveLength(2);
  });
});

describe('G5 over a history', () => {
  const a = grant('a', 5n, 0, 10);
  const outcome = (kind: WriteOutcome['kind'], result: number | null, decidedSeq: number): WriteOutcome => ({
    grant: a,
    opId: 'a1',
    kind,
    result,
    decidedSeq,
  });

  it('accepts one commit per operation, its replays, and a stale answer to an operation that never committed', () => {
    expect(
      g5Violations(
        [commit(a, 21, 'a1', 0)],
        [
          outcome('committed', 1, 21),
          outcome('replayed', 1, 30),
          { ...outcome('stale', null, 40), opId: 'a2' },
        ],
      ),
    ).toEqual([]);
  });

  it('negative control: reports an operation that took effect twice, a wrong replay, and stale after a commit', () => {
    expect(g5Violations([commit(a, 21, 'a1', 0), commit(a, 30, 'a1', 1)], [])[0]).toMatch(
      /operation a1 on r took effect twice: at #21 \(wrote 1\) and at #30 \(wrote 2\)/,
    );
    expect(g5Violations([commit(a, 21, 'a1', 0)], [outcome('replayed', 2, 30)])).toHaveLength(1);
    expect(g5Violations([commit(a, 21, 'a1', 0)], [outcome('stale', null, 30)])[0]).toMatch(
      /told stale at #30, though the operation had committed at #21/,
    );
  });
});

describe('negative controls, found by the nemesis search', () => {
  const controls: readonly {
    variant: NemesisVariant;
    what: string;
    pattern: RegExp;
    maxSchedules: number;
  }[] = [
    {
      variant: 'guard-no-high-water',
      what: 'the guard without its high-water rule: a paused holder commits after its successor fenced in (G3)',
      pattern: /^G3: /,
      maxSchedules: 20,
    },
    {
      variant: 'guard-reads-outside',
      what: 'reads made outside the guarded transaction: an update is lost (G4)',
      pattern: /^G4: .*an update was lost/,
      maxSchedules: 40,
    },
    {
      variant: 'guard-no-op-dedup',
      what: 'the guard without its operation log: a retry whose reply was lost takes effect twice (G5)',
      pattern: /^G5: operation .* took effect twice/,
      maxSchedules: 20,
    },
    {
      variant: 'guard-no-replay-when-stale',
      what: 'no replay once fenced out: a retry is told stale though its write committed (G5)',
      pattern: /^G5: .*told stale/,
      maxSchedules: 20,
    },
  ];

  for (const control of controls) {
    it(
      `negative control: ${control.what}: found, shrunk, replayed; the shipped guard and scripts keep it`,
      async () => {
        const found = await findViolation(control.variant, SEED, control.maxSchedules);
        expect(found, `not found in ${control.maxSchedules} schedules of seed ${SEED}`).not.toBeNull();
        expect(found!.violation).toMatch(control.pattern);
        expect(found!.shrunk.cuts.length).toBeLessThanOrEqual(found!.original.cuts.length);
        // The shrunk case replays the violation exactly, and the shipped protection keeps every check on it.
        expect((await runNemesis(found!.shrunk, { variant: control.variant })).violation).toBe(
          found!.violation,
        );
        expect((await runNemesis(found!.shrunk)).violation).toBeNull();
      },
      SEARCH_TIMEOUT_MS,
    );
  }
});
