import { describe, expect, it } from 'vitest';
import { analyseRun, demoHeadline } from '../../../demo/analysis.js';
import { SCENARIOS } from '../../../demo/scenarios.js';
import { TerminalReport, createPainter, runMark } from '../../../demo/terminal-report.js';
import { renderHtmlReport } from '../../../demo/html-report.js';
import type { LoggedWrite } from '../../../demo/counter-table.js';
import type { Mode, OpRecord, RunRecord, WorkerName, WorkerOutcome } from '../../../demo/run-record.js';

// The demo's verdicts on hand-made histories of the F1 story (A reads 0, pauses; B increments; A writes 1),
// so that each verdict is seen to fail when it must: the negative controls of the demo's own judgement.
// No servers needed; it lives next to the end-to-end test of the demo it checks.

const TTL = 1_000;

function outcome(startedAt: number, endedAt: number, more: Partial<WorkerOutcome> = {}): WorkerOutcome {
  return { ok: true, startedAt, endedAt, ...more };
}

function story(mode: Mode, aWrite: 'accepted' | 'refused'): RunRecord {
  const token = (n: number): string | undefined => (mode === 'fenced' ? String(1_000 + n) : undefined);
  const lease = (worker: WorkerName, n: number, at: number) => ({
    resource: 'demo-counter:x',
    leaseRef: `${worker}-lease`,
    validityMs: TTL - 10,
    validUntil: at + TTL - 10,
    ...(token(n) !== undefined ? { token: token(n) } : {}),
  });
  const op = (
    worker: WorkerName,
    name: OpRecord['op'],
    o: WorkerOutcome,
    more: Partial<OpRecord> = {},
  ): OpRecord => ({ worker, op: name, outcome: o, leaseRef: `${worker}-lease`, ...more });
  const refusal: Partial<WorkerOutcome> = {
    ok: false,
    code: 'STALE_TOKEN',
    message: 'stale',
    presented: token(1) ?? '1',
    current: token(2) ?? '2',
  };
  const ops: OpRecord[] = [
    op('A', 'acquire', outcome(0, 5, { lease: lease('A', 1, 5) }), { ttlMs: TTL, waitMs: 0 }),
    op('A', 'read', outcome(6, 8, { value: 0 })),
    op('B', 'acquire', outcome(10, 1_010, { lease: lease('B', 2, 1_010) }), { ttlMs: TTL, waitMs: 3_000 }),
    op('B', 'read', outcome(1_011, 1_012, { value: 0 })),
    op('B', 'write', outcome(1_013, 1_015, { value: 1 }), { value: 1, via: 'db' }),
    op('B', 'release', outcome(1_016, 1_017)),
    op('A', 'write', outcome(1_100, 1_102, aWrite === 'accepted' ? { value: 1 } : refusal), {
      value: 1,
      via: 'db',
    }),
  ];
  const log: LoggedWrite[] = [
    {
      seq: 1,
      worker: 'B',
      leaseRef: 'B-lease',
      token: mode === 'fenced' ? 1_002n : null,
      value: 1,
      via: 'db',
    },
  ];
  if (aWrite === 'accepted')
    log.push({
      seq: 2,
      worker: 'A',
      leaseRef: 'A-lease',
      token: mode === 'fenced' ? 1_001n : null,
      value: 1,
      via: 'db',
    });
  return {
    scenario: 'F1',
    mode,
    counter: 'x',
    resource: 'demo-counter:x',
    ttlMs: TTL,
    startedAt: 0,
    endedAt: 1_200,
    ops,
    actions: [{ lane: 'A', kind: 'pause', t: 9, until: 1_099, text: 'SIGSTOP A' }],
    final: { value: 1, writer: aWrite === 'accepted' ? 'A' : 'B' },
    log,
  };
}

describe('demo verdicts', () => {
  it('passes an unprotected run that lost the update, naming the stale write', () => {
    const a = analyseRun(story('unprotected', 'accepted'));
    expect(a.verdict).toMatchObject({ expectation: 'anomaly', passed: true, label: 'data lost' });
    expect(a.writes.find((w) => w.worker === 'A')?.status).toBe('stale-accepted');
    expect(a.grants.map((g) => [g.worker, g.label])).toEqual([
      ['A', 'grant #1'],
      ['B', 'grant #2'],
    ]);
  });

  it('fails an unprotected run that did not show the anomaly', () => {
    // Had the lock held: A increments, releases; B acquires, reads A's 1 and writes 2. A serial history.
    const record = story('unprotected', 'accepted');
    const at = (o: OpRecord, startedAt: number, more: Partial<WorkerOutcome> = {}): OpRecord => ({
      ...o,
      outcome: { ...o.outcome, startedAt, endedAt: startedAt + 2, ...more },
    });
    const [aAcquire, aRead, bAcquire, bRead, bWrite, bRelease, aWrite] = record.ops as [
      OpRecord,
      OpRecord,
      OpRecord,
      OpRecord,
      OpRecord,
      OpRecord,
      OpRecord,
    ];
    record.ops.splice(
      0,
      record.ops.length,
      aAcquire,
      aRead,
      at(aWrite, 10),
      at({ ...bRelease, worker: 'A', leaseRef: 'A-lease' }, 13),
      at(bAcquire, 20, { lease: { ...bAcquire.outcome.lease!, validUntil: 1_020 } }),
      at(bRead, 30, { value: 1 }),
      { ...at(bWrite, 40, { value: 2 }), value: 2 },
      at(bRelease, 50),
    );
    record.actions.length = 0;
    record.log = [
      { seq: 1, worker: 'A', leaseRef: 'A-lease', token: null, value: 1, via: 'db' },
      { seq: 2, worker: 'B', leaseRef: 'B-lease', token: null, value: 2, via: 'db' },
    ];
    record.final = { value: 2, writer: 'B' };
    const a = analyseRun(record);
    expect(a.verdict.checks.violations).toEqual([]);
    expect(a.verdict).toMatchObject({ expectation: 'anomaly', passed: false, label: 'NO ANOMALY' });
  });

  it('passes a fenced run whose stale write was refused', () => {
    const a = analyseRun(story('fenced', 'refused'));
    expect(a.verdict).toMatchObject({ expectation: 'safe', passed: true, label: 'safe' });
    expect(a.writes.find((w) => w.worker === 'A')?.status).toBe('refused');
  });

  it('fails a fenced run that let the stale write through', () => {
    const a = analyseRun(story('fenced', 'accepted'));
    expect(a.verdict).toMatchObject({ expectation: 'safe', passed: false, label: 'UNSAFE' });
    expect(a.verdict.checks.violations.length).toBeGreaterThan(0);
  });

  it('fails a fenced run in which no stale attempt happened', () => {
    const record = story('fenced', 'refused');
    record.ops.pop(); // A never wrote
    const a = analyseRun(record);
    expect(a.verdict).toMatchObject({ expectation: 'safe', passed: false, label: 'NOT EXERCISED' });
  });

  it('fails a run whose orchestration broke, whatever its history shows', () => {
    const record = story('unprotected', 'accepted');
    record.error = 'B acquire failed';
    expect(analyseRun(record).verdict).toMatchObject({ passed: false, label: 'BROKEN' });
  });

  it('marks the runs by what happened to the data: a lost update red, intact data green', () => {
    expect(runMark(analyseRun(story('unprotected', 'accepted')))).toBe('✗');
    expect(runMark(analyseRun(story('fenced', 'refused')))).toBe('✔');
    // A fenced run that lost data is marked as lost, and an unprotected run that provoked nothing is no success.
    expect(runMark(analyseRun(story('fenced', 'accepted')))).toBe('✗');
    const quiet = story('fenced', 'refused');
    quiet.ops.pop();
    expect(runMark(analyseRun(quiet))).toBe('?');
  });

  it('computes the headline from the runs: in how many scenarios each side lost data', () => {
    const f1 = [analyseRun(story('unprotected', 'accepted')), analyseRun(story('fenced', 'refused'))];
    expect(demoHeadline(f1)).toMatchObject({
      scenarios: 1,
      unprotectedLost: 1,
      fencedLost: 0,
      text: 'the lock alone lost data in 1 of 1 scenario; with fenced, 0 of 1',
    });
    // Negative controls: a fenced run that lost data counts against fenced, an unprotected run that lost nothing
    // does not count for the lock.
    const broken = [analyseRun(story('unprotected', 'refused')), analyseRun(story('fenced', 'accepted'))];
    expect(demoHeadline(broken)).toMatchObject({ unprotectedLost: 0, fencedLost: 1 });
  });

  it('names every scenario in the summary, under the headline, with a red mark on each run that lost data', () => {
    const lines: string[] = [];
    const report = new TerminalReport((line) => lines.push(line), createPainter(false));
    const runs = [analyseRun(story('unprotected', 'accepted')), analyseRun(story('fenced', 'refused'))];
    report.summary(SCENARIOS, runs, [], 1);
    const text = lines.join('\n');
    expect(text).toContain('The lock alone lost data in 1 of 1 scenario; with fenced, 0 of 1.');
    expect(text).toContain(`F1  ${SCENARIOS.find((s) => s.id === 'F1')!.title}`);
    expect(text).toMatch(/unprotected +✗ data lost/);
    expect(text).toMatch(/fenced +✔ safe/);
    expect(text).not.toMatch(/unprotected +✔/);
    const html = renderHtmlReport(SCENARIOS, runs, {
      generatedAt: new Date(0),
      environment: [],
      skipped: [],
      seconds: 1,
    });
    expect(html).toContain('The lock alone lost data in 1 of 1 scenario; with fenced, 0 of 1.');
    expect(html).toContain(`F1</a> ${SCENARIOS.find((s) => s.id === 'F1')!.title}`);
    expect(html).toContain('✗ data lost');
  });

  it('reports a grant that came back past the ttl as discarded, not as node timeouts', () => {
    const record = story('fenced', 'refused');
    // A's second acquire: paused past the ttl, its replies read after its node timers ran out.
    record.ops.push({
      worker: 'A',
      op: 'acquire',
      ttlMs: TTL,
      waitMs: 0,
      outcome: {
        ok: false,
        startedAt: 1_110,
        endedAt: 1_110 + TTL + 111,
        code: 'QUORUM_UNAVAILABLE',
        message: 'no majority of nodes could vote: node 0 acquire got no reply within 978 ms',
      },
    });
    const a = analyseRun(record);
    const entry = a.timeline.find((e) => e.text.startsWith('not granted'));
    expect(entry?.text).toMatch(/past the 1000 ms ttl, so the coordinator discarded it/);
    expect(entry?.text).not.toMatch(/no reply within/);
    expect(a.verdict.findings.join('\n')).toMatch(/late grant discarded/);
  });

  describe('F20: a forged token', () => {
    const MAX = '9223372036854775807';
    /** A forges MAX on its lease (token 1001); then B (token 1002) reads and writes. */
    function forged(mode: Mode, forgery: 'accepted' | 'refused'): RunRecord {
      const lease = (worker: WorkerName, token: string, at: number) => ({
        resource: 'demo-counter:x',
        leaseRef: `${worker}-lease`,
        validityMs: TTL - 10,
        validUntil: at + TTL - 10,
        token,
      });
      const op = (
        worker: WorkerName,
        name: OpRecord['op'],
        o: WorkerOutcome,
        more: Partial<OpRecord> = {},
      ) => ({
        worker,
        op: name,
        outcome: o,
        leaseRef: `${worker}-lease`,
        ...more,
      });
      const bLocked = forgery === 'accepted';
      const stale: Partial<WorkerOutcome> = {
        ok: false,
        code: 'STALE_TOKEN',
        message: 'stale',
        presented: '1002',
        current: MAX,
      };
      const ops: OpRecord[] = [
        op('A', 'acquire', outcome(0, 5, { lease: lease('A', '1001', 5) }), { ttlMs: TTL, waitMs: 0 }),
        op('A', 'read', outcome(6, 8, { value: 0 })),
        op(
          'A',
          'write',
          outcome(
            9,
            10,
            forgery === 'accepted'
              ? { value: 1 }
              : { ok: false, code: 'INVALID_PROOF', message: 'fencing proof does not match' },
          ),
          { value: 1, via: 'db', forgedToken: MAX },
        ),
        op('A', 'release', outcome(11, 12)),
        op('B', 'acquire', outcome(13, 15, { lease: lease('B', '1002', 15) }), { ttlMs: TTL, waitMs: 0 }),
        op('B', 'read', outcome(16, 18, bLocked ? stale : { value: 0 })),
        ...(bLocked
          ? []
          : [op('B', 'write', outcome(19, 20, { value: 1 }), { value: 1, via: 'db' as const })]),
        op('B', 'release', outcome(21, 22)),
      ];
      const log: LoggedWrite[] = bLocked
        ? [{ seq: 1, worker: 'A', leaseRef: 'A-lease', token: BigInt(MAX), value: 1, via: 'db' }]
        : [{ seq: 1, worker: 'B', leaseRef: 'B-lease', token: 1_002n, value: 1, via: 'db' }];
      return {
        scenario: 'F20',
        mode,
        protection: 'signatures',
        counter: 'x',
        resource: 'demo-counter:x',
        ttlMs: TTL,
        startedAt: 0,
        endedAt: 30,
        ops,
        actions: [],
        final: { value: 1, writer: bLocked ? 'A' : 'B' },
        log,
      };
    }

    it('passes an unsigned run in which the forged maximum bricked the resource, naming the breach', () => {
      const a = analyseRun(forged('unprotected', 'accepted'));
      expect(a.verdict).toMatchObject({ expectation: 'anomaly', passed: true, label: 'data lost' });
      const violations = a.verdict.checks.violations.join('\n');
      expect(violations).toMatch(/provenance: .*no grant of this resource has token 9223372036854775807/);
      expect(violations).toMatch(/provenance: .*refused as stale, yet no grant with a larger token/);
      // The forging write is shown as the damage it does, not as a committed write.
      const write = a.writes.find((w) => w.worker === 'A');
      expect(write).toMatchObject({ status: 'forged-accepted' });
      expect(write?.detail).toMatch(/fence is now at 9223372036854775807.*every later holder is refused/);
      const entry = a.timeline.find((e) => e.text.includes('FORGED TOKEN ACCEPTED'));
      expect(entry?.tone).toBe('bad');
      expect(a.timeline.some((e) => e.lane === 'A' && e.text.startsWith('✓ committed'))).toBe(false);
      expect(runMark(a)).toBe('✗');
    });

    it('passes a signed run whose forged write was refused with INVALID_PROOF', () => {
      const a = analyseRun(forged('fenced', 'refused'));
      expect(a.verdict).toMatchObject({ expectation: 'safe', passed: true, label: 'safe' });
      expect(a.writes.find((w) => w.worker === 'A')).toMatchObject({ status: 'refused' });
      expect(a.verdict.headline).toMatch(/forged write refused/);
    });

    it('fails a signed run that let the forged write through', () => {
      const a = analyseRun(forged('fenced', 'accepted'));
      expect(a.verdict).toMatchObject({ expectation: 'safe', passed: false, label: 'UNSAFE' });
    });

    it('fails an unsigned run in which the forgery was refused anyway (nothing shown)', () => {
      const a = analyseRun(forged('unprotected', 'refused'));
      expect(a.verdict).toMatchObject({ expectation: 'anomaly', passed: false, label: 'NO ANOMALY' });
    });
  });
});
