import { describe, expect, it } from 'vitest';
import {
  checkCommitOrder,
  checkCounter,
  checkExactlyOnce,
  checkGrantedTokens,
  checkTokens,
  combine,
  reportOverlaps,
} from '@fenced/test-utils/checkers';
import type { CommitRecord, EventFields, HistoryData, HistoryEvent, Op } from '@fenced/test-utils/history';

/** One operation of a hand-made history: invoked at `from`, completed (`outcome`) at `to`. */
function op(
  process: string,
  name: Op,
  resource: string,
  from: number,
  to: number | null,
  fields: EventFields = {},
  outcome: 'ok' | 'fail' | 'unknown' = 'ok',
): HistoryEvent[] {
  const invoke: HistoryEvent = { kind: 'invoke', process, op: name, resource, t: from };
  if (to === null) return [invoke];
  return [invoke, { ...fields, kind: outcome, process, op: name, resource, t: to }];
}

/** Events sorted by time, as a recorder would have logged them. */
function history(events: HistoryEvent[][], commits: CommitRecord[] = []): HistoryData {
  return { events: events.flat().sort((a, b) => a.t - b.t), commits };
}

describe('checkTokens (G2)', () => {
  it('accepts increasing tokens, in any order among concurrent grants', () => {
    const h = history([
      op('p1', 'acquire', 'r', 0, 5, { token: 1n, leaseId: 'a' }),
      op('p2', 'acquire', 'r', 6, 10, { token: 9n, leaseId: 'b' }),
      op('p3', 'acquire', 'r', 7, 9, { token: 4n, leaseId: 'c' }), // concurrent with p2: either order
      op('p1', 'acquire', 'r', 11, 12, { token: 10n, leaseId: 'd' }),
      op('p4', 'acquire', 'other', 0, 1, { token: 1n, leaseId: 'e' }), // tokens are per resource
      op('p5', 'acquire', 'r', 13, null), // never completed: unknown, not checked
    ]);
    const r = checkTokens(h);
    expect(r.violations).toEqual([]);
    expect(r.ok).toBe(true);
    expect(r.info).toContain('r: 4 grants, tokens 1..10');
  });

  it('flags a token granted twice', () => {
    const h = history([
      op('p1', 'acquire', 'r', 0, 5, { token: 5n, leaseId: 'a' }),
      op('p2', 'acquire', 'r', 1, 6, { token: 5n, leaseId: 'b' }),
    ]);
    const r = checkTokens(h);
    expect(r.ok).toBe(false);
    expect(r.violations[0]).toMatch(/token 5 granted 2 times/);
  });

  it('flags a later grant with a smaller token (the naive INCR-max anomaly)', () => {
    const h = history([
      op('p1', 'acquire', 'r', 0, 5, { token: 7n, leaseId: 'a' }),
      op('p2', 'acquire', 'r', 6, 10, { token: 3n, leaseId: 'b' }),
    ]);
    const r = checkTokens(h);
    expect(r.ok).toBe(false);
    expect(r.violations).toHaveLength(1);
    expect(r.violations[0]).toMatch(
      /acquire by p2, lease b, token 3 .* started after acquire by p1, lease a, token 7/,
    );
  });

  it('flags an extend that changes the token', () => {
    const h = history([
      op('p1', 'acquire', 'r', 0, 5, { token: 7n, leaseId: 'a' }),
      op('p1', 'extend', 'r', 6, 8, { token: 8n, leaseId: 'a' }),
    ]);
    expect(checkTokens(h).violations).toEqual([expect.stringMatching(/changed the lease's token from 7/)]);
  });
});

describe('checkCommitOrder (G1, G3)', () => {
  const commit = (token: bigint, leaseId?: string, seq?: number): CommitRecord => ({
    resource: 'r',
    token,
    ...(leaseId !== undefined ? { leaseId } : {}),
    ...(seq !== undefined ? { seq } : {}),
  });

  it('accepts a non-decreasing chain where equal tokens come from the same lease', () => {
    const r = checkCommitOrder(
      history([], [commit(1n, 'a'), commit(1n, 'a'), commit(2n, 'b'), commit(5n, 'c'), commit(5n, 'c')]),
    );
    expect(r.violations).toEqual([]);
    expect(r.info).toContain('r: 5 commits');
  });

  it('flags a commit below the high-water mark (a stale write got in)', () => {
    const r = checkCommitOrder(history([], [commit(1n, 'a'), commit(3n, 'c'), commit(2n, 'b')]));
    expect(r.ok).toBe(false);
    expect(r.violations[0]).toMatch(/commit #2 \(token 2, lease b\) has a token below the high-water mark 3/);
  });

  it('flags an equal token from another lease', () => {
    const r = checkCommitOrder(history([], [commit(2n, 'a'), commit(2n, 'b')]));
    expect(r.violations[0]).toMatch(/reuses token 2 of another lease/);
  });

  it('orders commits by seq when every record has one', () => {
    const shuffled = [commit(3n, 'c', 3), commit(1n, 'a', 1), commit(2n, 'b', 2)];
    expect(checkCommitOrder(history([], shuffled)).ok).toBe(true);
    expect(checkCommitOrder(history([], [commit(3n, 'c', 1), commit(1n, 'a', 2)])).ok).toBe(false);
  });

  it('flags an old holder committing after the new one fenced in, from events alone', () => {
    const h = history([
      op('p2', 'fence', 'r', 10, 12, { token: 8n, leaseId: 'b' }),
      op('p1', 'write', 'r', 20, 25, { token: 7n, leaseId: 'a' }), // invoked after p2's fence-in committed
    ]);
    const r = checkCommitOrder(h);
    expect(r.ok).toBe(false);
    expect(r.violations[0]).toMatch(
      /write by p1, lease a, token 7 .* committed after fence by p2, lease b, token 8/,
    );
  });

  it('leaves concurrent writes to the commit records, and a rejected stale write is fine', () => {
    const h = history([
      op('p2', 'write', 'r', 10, 12, { token: 8n, leaseId: 'b' }),
      op('p1', 'write', 'r', 11, 13, { token: 7n, leaseId: 'a' }), // concurrent: real time cannot tell
      op('p1', 'write', 'r', 20, 21, { token: 7n, leaseId: 'a', error: 'STALE_TOKEN' }, 'fail'),
    ]);
    expect(checkCommitOrder(h).violations).toEqual([]);
  });

  it('flags a zombie of an earlier grant committing after a later grant fenced in, even with a higher token', () => {
    // A was granted 9 first; B, started after A's grant completed, got 5 (tokens went backwards): the guard
    // compares tokens only, so A's late commit passes it. Grant order shows the broken G3.
    const h = history(
      [
        op('A', 'acquire', 'r', 0, 1, { token: 9n, leaseId: 'a' }),
        op('B', 'acquire', 'r', 5, 6, { token: 5n, leaseId: 'b' }),
        op('B', 'increment', 'r', 7, 8, { token: 5n, leaseId: 'b' }),
        op('A', 'increment', 'r', 10, 11, { token: 9n, leaseId: 'a' }),
      ],
      [commit(5n, 'b', 1), commit(9n, 'a', 2)],
    );
    const r = checkCommitOrder(h);
    expect(r.ok).toBe(false);
    expect(r.violations).toHaveLength(2);
    expect(r.violations[0]).toMatch(
      /commit #1 \(token 9, lease a\) is of acquire by A, lease a, token 9 .* which completed before acquire by B, lease b, token 5 .* started, yet it committed after that grant had fenced in \(commit #0/,
    );
    expect(r.violations[1]).toMatch(
      /increment by A, lease a, token 9 .* of a grant that completed before acquire by B.* committed after increment by B/,
    );
  });

  it('accepts commits of overlapping grants in any order, and an earlier grant committing before the later fenced in', () => {
    const h = history(
      [
        op('A', 'acquire', 'r', 0, 4, { token: 9n, leaseId: 'a' }),
        op('B', 'acquire', 'r', 2, 6, { token: 5n, leaseId: 'b' }), // concurrent with A's grant: no order
        op('C', 'acquire', 'r', 10, 11, { token: 12n, leaseId: 'c' }),
      ],
      [commit(5n, 'b', 1), commit(9n, 'a', 2), commit(9n, 'a', 3), commit(12n, 'c', 4)],
    );
    expect(checkCommitOrder(h).violations).toEqual([]);
  });

  it('notes commits whose token no recorded acquire returned', () => {
    const h = history(
      [op('p1', 'acquire', 'r', 0, 1, { token: 1n, leaseId: 'a' })],
      [commit(1n, 'a'), commit(4n, 'x')],
    );
    expect(checkCommitOrder(h).info).toContain('1 commits carry a token no recorded acquire returned');
  });
});

describe('checkGrantedTokens (F20)', () => {
  const grants = [
    op('a', 'acquire', 'r', 0, 1, { token: 10n, leaseId: 'la' }),
    op('b', 'acquire', 'r', 5, 6, { token: 20n, leaseId: 'lb' }),
  ];

  it('accepts commits of granted tokens and refusals overtaken by a larger grant', () => {
    const h = history(
      [
        ...grants,
        op('a', 'increment', 'r', 2, 3, { token: 10n, leaseId: 'la' }),
        op('b', 'increment', 'r', 7, 8, { token: 20n, leaseId: 'lb' }),
        op('a', 'increment', 'r', 9, 10, { token: 10n, leaseId: 'la', error: 'STALE_TOKEN: stale' }, 'fail'),
      ],
      [
        { resource: 'r', token: 10n, leaseId: 'la', seq: 1 },
        { resource: 'r', token: 20n, leaseId: 'lb', seq: 2 },
      ],
    );
    expect(checkGrantedTokens(h).violations).toEqual([]);
  });

  it('flags a commit of a token nobody was granted (a forged maximum)', () => {
    const h = history(grants, [{ resource: 'r', token: 9223372036854775807n, leaseId: 'lm', seq: 1 }]);
    expect(checkGrantedTokens(h).violations.join('\n')).toMatch(
      /no grant of this resource has token 9223372036854775807/,
    );
  });

  it("flags another resource's token, and a granted token committed by another lease", () => {
    const h = history(
      [...grants, op('m', 'acquire', 'other', 0, 1, { token: 99n, leaseId: 'lm' })],
      [
        { resource: 'r', token: 99n, leaseId: 'lm', seq: 1 },
        { resource: 'r', token: 20n, leaseId: 'lm', seq: 2 },
      ],
    );
    const violations = checkGrantedTokens(h).violations.join('\n');
    expect(violations).toMatch(/no grant of this resource has token 99/);
    expect(violations).toMatch(/token 20 was granted to another lease/);
  });

  it('flags an honest holder refused by a fence no grant raised (a bricked resource)', () => {
    const h = history([
      ...grants,
      op(
        'b',
        'increment',
        'r',
        7,
        8,
        { token: 20n, leaseId: 'lb', error: 'STALE_TOKEN: the fence is at 9223372036854775807' },
        'fail',
      ),
    ]);
    expect(checkGrantedTokens(h).violations.join('\n')).toMatch(
      /refused as stale, yet no grant with a larger token/,
    );
  });
});

describe('checkCounter (G4)', () => {
  const increments = (n: number, outcome: 'ok' | 'unknown' = 'ok'): HistoryEvent[][] =>
    Array.from({ length: n }, (_, i) => op(`p${i}`, 'increment', 'c', i * 10, i * 10 + 5, {}, outcome));

  it('accepts a final value equal to the acknowledged increments', () => {
    const r = checkCounter(history(increments(3)), { resource: 'c', final: 3 });
    expect(r.violations).toEqual([]);
    expect(r.info[0]).toBe('c: final 3, 3 increments ok, 0 unknown');
  });

  it('flags a lost update', () => {
    const r = checkCounter(history(increments(3)), { resource: 'c', final: 2n });
    expect(r.ok).toBe(false);
    expect(r.violations[0]).toMatch(/lost update: the counter rose by 2, but 3 increments were acknowledged/);
  });

  it('allows unknown increments either way, but no more', () => {
    const h = history([...increments(2), op('px', 'increment', 'c', 50, 60, {}, 'unknown')]);
    expect(checkCounter(h, { resource: 'c', final: 2 }).ok).toBe(true);
    expect(checkCounter(h, { resource: 'c', final: 3 }).ok).toBe(true);
    expect(checkCounter(h, { resource: 'c', final: 4 }).violations[0]).toMatch(
      /more than the 2 acknowledged \+ 1 unknown/,
    );
    expect(checkCounter(h, { resource: 'c', final: 13, initial: 10 }).ok).toBe(true);
  });

  it('flags two increments that wrote the same value (a read outside the guard, F18)', () => {
    const h = history([
      op('p1', 'increment', 'c', 0, 10, { token: 1n, value: 6 }),
      op('p2', 'increment', 'c', 1, 11, { token: 2n, value: 6 }),
    ]);
    const r = checkCounter(h, { resource: 'c', final: 6, initial: 4 });
    expect(r.violations).toEqual([expect.stringMatching(/2 increments all wrote 6/)]);
  });

  it('flags committed values that do not count up by one', () => {
    const commits: CommitRecord[] = [1, 2, 2].map((value, i) => ({
      resource: 'c',
      token: BigInt(i + 1),
      value,
    }));
    const r = checkCounter(history(increments(3), commits), { resource: 'c', final: 3 });
    expect(r.violations).toEqual([expect.stringMatching(/commit #2 .* wrote 2 after 2: not a serial run/)]);
  });
});

describe('checkExactlyOnce (G5)', () => {
  it('accepts a retried operation that took effect once', () => {
    const h = history(
      [
        op('p1', 'write', 'r', 0, 5, { opId: 'x' }, 'unknown'),
        op('p1', 'write', 'r', 6, 8, { opId: 'x' }),
        op('p2', 'write', 'r', 1, 3, { opId: 'y' }, 'fail'),
      ],
      [{ resource: 'r', token: 1n, opId: 'x' }],
    );
    const r = checkExactlyOnce(h);
    expect(r.violations).toEqual([]);
    expect(r.info).toContain('2 operation ids, 1 retried, 1 applied');
  });

  it('flags an operation that took effect twice', () => {
    const h = history([
      op('p1', 'write', 'r', 0, 5, { opId: 'x' }, 'unknown'),
      op('p1', 'write', 'r', 6, 8, { opId: 'x' }),
    ]);
    const r = checkExactlyOnce(h, { applied: { x: 2 } });
    expect(r.ok).toBe(false);
    expect(r.violations).toEqual(['operation x took effect 2 times']);
  });

  it('flags an acknowledged operation that never took effect', () => {
    const h = history([op('p1', 'write', 'r', 0, 5, { opId: 'x' })]);
    expect(checkExactlyOnce(h, { applied: new Map() }).violations).toEqual([
      'operation x was acknowledged but never took effect',
    ]);
  });
});

describe('reportOverlaps', () => {
  it('reports two holders at once without failing', () => {
    const h = history([
      op('p1', 'acquire', 'r', 0, 5, { token: 1n, leaseId: 'a', validityMs: 100 }),
      op('p2', 'acquire', 'r', 150, 155, { token: 2n, leaseId: 'b', validityMs: 100 }),
      op('p1', 'release', 'r', 200, 205, { leaseId: 'a' }), // p1 was paused past its validity (F1)
      op('p2', 'release', 'r', 220, 230, { leaseId: 'b' }),
    ]);
    const r = reportOverlaps(h);
    expect(r.ok).toBe(true);
    expect(r.violations).toEqual([]);
    expect(r.overlaps).toHaveLength(1);
    expect(r.overlaps[0]).toMatchObject({ fromMs: 155, toMs: 200 });
    expect(r.info[1]).toMatch(/p1 lease a token 1 and p2 lease b token 2 both held it for 45.0 ms/);
    expect(reportOverlaps(h, { honourValidity: true }).overlaps).toEqual([]);
  });

  it('finds none when holders follow each other', () => {
    const h = history([
      op('p1', 'acquire', 'r', 0, 5, { leaseId: 'a' }),
      op('p1', 'release', 'r', 10, 12, { leaseId: 'a' }),
      op('p2', 'acquire', 'r', 11, 15, { leaseId: 'b' }),
      op('p3', 'acquire', 'other', 1, 6, { leaseId: 'c' }),
    ]);
    expect(reportOverlaps(h).overlaps).toEqual([]);
  });

  it('ends a holding interval when an extend reports the lease lost', () => {
    const h = history([
      op('p1', 'acquire', 'r', 0, 5, { leaseId: 'a' }),
      op('p1', 'extend', 'r', 50, 52, { leaseId: 'a', error: 'LEASE_LOST' }, 'fail'),
      op('p2', 'acquire', 'r', 60, 65, { leaseId: 'b' }),
    ]);
    const r = reportOverlaps(h);
    // p2's interval would begin where the history ends, so only p1's is reported
    expect(r.intervals.map((i) => [i.from, i.to])).toEqual([[5, 52]]);
    expect(r.overlaps).toEqual([]);
  });
});

describe('combine', () => {
  it('prefixes every line with its checker and fails when any fails', () => {
    const r = combine({
      tokens: { ok: true, violations: [], info: ['fine'] },
      counter: { ok: false, violations: ['lost'], info: [] },
    });
    expect(r).toEqual({ ok: false, violations: ['counter: lost'], info: ['tokens: fine'] });
  });
});
