// The coverage report of the nemesis search (test/fixtures/protocol-sim/coverage.ts, step-coverage.ts), on hand-made
// run records: which steps ran and were cut after, which (step, fault) cuts no schedule took, against which total,
// and which coordinator scripts never ran — for standalone searches and for searches with Redis Cluster members.
import { describe, expect, it } from 'vitest';
import {
  addRun,
  CLUSTER_COVERAGE_KEYS,
  coverageGaps,
  formatCoverage,
  newCoverage,
} from '../../../fixtures/protocol-sim/coverage.js';
import {
  CLUSTER_FAULT_KINDS,
  COVERAGE_KEYS,
  FAULT_KINDS,
  runNemesis,
} from '../../../fixtures/protocol-sim/nemesis.js';
import { coverageStep, RunCoverage } from '../../../fixtures/protocol-sim/step-coverage.js';

const run = (steps: string[], cuts: string[]) => ({
  covered: { steps: new Set(steps), cuts: new Set(cuts) },
});

describe('the coverage of a search', () => {
  it('counts schedules per step and per (step, fault), and names the cuts and scripts never taken', () => {
    const coverage = newCoverage();
    addRun(
      coverage,
      run(
        ['acquire', 'promise', 'repair-read (seal)', 'repair-marker claim', 'fold'],
        ['acquire|pause', 'acquire|fold'],
      ),
    );
    addRun(coverage, run(['acquire', 'release'], ['acquire|pause', 'release|crash']));
    expect(coverage.cutAfter.get('acquire')).toBe(2);
    expect(coverage.cutAfter.get('release')).toBe(1);
    expect(coverage.ran.get('acquire')).toBe(2);
    expect(coverage.ran.get('fold')).toBe(1);
    expect(coverage.pairs.get('acquire|pause')).toBe(2);

    const gaps = coverageGaps(coverage);
    expect(gaps.neverTaken.get('acquire')).toEqual(FAULT_KINDS.filter((k) => k !== 'pause' && k !== 'fold'));
    expect(gaps.neverTaken.get('promise')).toEqual([...FAULT_KINDS]);
    expect(gaps.neverCutAfter).toEqual(COVERAGE_KEYS.filter((k) => k !== 'acquire' && k !== 'release'));
    expect(gaps.scriptsNeverRun).toContain('extend');
    expect(gaps.scriptsNeverRun).toContain('fresh-init');
    expect(gaps.scriptsNeverRun).not.toContain('repair-read');
    expect(gaps.scriptsNeverRun).not.toContain('repair-marker');
    expect(gaps.scriptsNeverRun).not.toContain('fold');
    // A standalone report: the standalone steps and faults only, its pairs counted against their product.
    const report = formatCoverage(coverage, 2).join('\n');
    expect(report).toContain(`(step, fault) cuts taken: 3 of ${COVERAGE_KEYS.length * FAULT_KINDS.length};`);
    expect(report).not.toContain('migrate-batch');
  });

  it('with Cluster members, shows every Cluster step and counts the cuts against the whole matrix', () => {
    const coverage = newCoverage();
    addRun(
      coverage,
      run(
        [
          'acquire',
          'migrate-batch',
          'probe-shard',
          'slot repair-marker claim',
          'slot repair-raise',
          'fold-slot',
        ],
        [
          'migrate-batch|shard-amnesia',
          'slot repair-raise|stop-repair',
          'acquire|migrate-slot',
          'start|crash',
        ],
      ),
    );
    addRun(coverage, run(['repair-read-slot', 'slot finish-repair'], ['migrate-batch|shard-amnesia']));
    const steps = [...COVERAGE_KEYS, ...CLUSTER_COVERAGE_KEYS];
    const gaps = coverageGaps(coverage, { cluster: true });
    expect(gaps.pairs).toBe(steps.length * CLUSTER_FAULT_KINDS.length);
    expect(gaps.taken).toBe(4);
    expect(gaps.neverTaken.get('migrate-batch')).toEqual(
      CLUSTER_FAULT_KINDS.filter((k) => k !== 'shard-amnesia'),
    );
    expect(gaps.neverTaken.get('fold-slot')).toEqual([...CLUSTER_FAULT_KINDS]);
    expect(gaps.neverTaken.get('promise')).toContain('migrate-slot');
    expect(gaps.neverCutAfter).toContain('probe-shard');
    expect(gaps.neverCutAfter).not.toContain('migrate-batch');
    expect(gaps.scriptsNeverRun).not.toContain('repair-read-slot');
    expect(gaps.scriptsNeverRun).not.toContain('finish-repair');
    expect(gaps.scriptsNeverRun).not.toContain('fold-slot');
    expect(gaps.scriptsNeverRun).toContain('fresh-init-shard');

    const report = formatCoverage(coverage, 2, { cluster: true });
    // Every step has its row, the Cluster steps after their heading, with the schedules that ran and cut after them.
    for (const step of steps)
      expect(
        report.some((line) => line.trimStart().startsWith(`${step} `)),
        step,
      ).toBe(true);
    const row = (step: string) =>
      report
        .find((line) => line.trimStart().startsWith(`${step} `))!
        .trim()
        .split(/\s+/);
    expect(row('migrate-batch').slice(-2)).toEqual(['1', '2']);
    expect(row('slot repair-raise').slice(-2)).toEqual(['1', '1']);
    expect(row('slot finish-repair').slice(-2)).toEqual(['1', '0']);
    expect(report.indexOf('  Cluster members:')).toBe(COVERAGE_KEYS.length + 1);
    expect(report.join('\n')).toContain(`(step, fault) cuts taken: 4 of ${gaps.pairs};`);
    expect(report.join('\n')).toMatch(/after fold-slot +amnesia, .*, shard-amnesia, migrate-slot/);
  });

  it('a step outside both lists is still shown', () => {
    const coverage = newCoverage();
    addRun(coverage, run(['acquire', 'something-new'], ['something-new|crash']));
    const report = formatCoverage(coverage, 1).join('\n');
    expect(report).toMatch(/something-new +1 +1/);
  });
});

describe('the steps a run records', () => {
  it("names a slot repair's steps apart from a node repair's, by the message's label", () => {
    expect(coverageStep('repair-raise', 'r3-n2->n2 repair-raise floor=5')).toBe('repair-raise');
    expect(coverageStep('repair-raise', 'r3-n2->n2/s866 repair-raise floor=5')).toBe('slot repair-raise');
    expect(coverageStep('repair-marker', 'r3-n2->n2/s866:renew repair-marker')).toBe(
      'slot repair-marker renew',
    );
    expect(coverageStep('finish-repair', 'r3-n2->n2/s866 finish-repair')).toBe('slot finish-repair');
    expect(coverageStep('repair-read-slot', 'r3-n2->n1/s866 repair-read-slot')).toBe('repair-read-slot');
    expect(coverageStep('repair-marker claim', 'r3-n0->n0 repair-marker claim')).toBe('repair-marker claim');
  });

  it('records a fold on a Cluster member as fold-slot, and the fold as the last step of an event cut', () => {
    const record = new RunCoverage((node) => node % 3 === 2, true);
    record.ran('acquire', 'c0->n2 acquire t=5');
    record.struck({ kind: 'fold', node: 2 }, true);
    record.struck({ kind: 'pause', process: 0, ms: 50 }, true);
    record.ran('grant');
    record.struck({ kind: 'fold', node: 0 }, false);
    record.struck({ kind: 'crash', process: 0 }, false);
    record.struck({ kind: 'fold-all' }, true);
    expect([...record.steps].sort()).toEqual(['acquire', 'fold', 'fold-slot', 'grant']);
    expect([...record.cuts]).toEqual([
      'acquire|fold',
      'fold-slot|pause',
      'grant|fold',
      'grant|crash',
      'grant|fold-all',
    ]);
  });

  it("a run with a Cluster member records its slot repair's steps and its fold by their own names", async () => {
    const result = await runNemesis({
      nodes: 3,
      seed: 1,
      cuts: [
        { step: 100, fault: { kind: 'shard-amnesia', member: 0, shard: 0 } },
        { step: 1_200, fault: { kind: 'fold', node: 2 } },
        { step: 1_200, fault: { kind: 'pause', process: 0, ms: 50 } },
      ],
      cluster: { members: 1, shards: 2 },
    });
    const steps = result.covered.steps;
    for (const step of ['slot repair-marker claim', 'slot repair-raise', 'slot finish-repair', 'fold-slot']) {
      expect(steps.has(step), step).toBe(true);
    }
    // Only the Cluster member restarted: no node repair ran.
    expect(steps.has('repair-marker claim')).toBe(false);
    expect(steps.has('repair-raise')).toBe(false);
    expect(result.covered.cuts.has('fold-slot|pause')).toBe(true);
  });
});
