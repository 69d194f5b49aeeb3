// The coverage report of the nemesis search (test/fixtures/protocol-sim/coverage.ts), on hand-made run results: which
// steps ran and were cut after, which (step, fault) cuts no schedule took, and which coordinator scripts never ran.
import { describe, expect, it } from 'vitest';
import {
  addRun,
  coverageGaps,
  formatCoverage,
  newCoverage,
} from '../../../fixtures/protocol-sim/coverage.js';
import { COVERAGE_KEYS, FAULT_KINDS } from '../../../fixtures/protocol-sim/nemesis.js';

describe('the coverage of a search', () => {
  it('counts schedules per step and per (step, fault), and names the cuts and scripts never taken', () => {
    const coverage = newCoverage();
    addRun(coverage, {
      cutAfter: new Set(['acquire']),
      stepsRun: new Set(['acquire', 'promise', 'repair-read (seal)', 'repair-marker claim']),
      features: new Set(['cut:acquire:pause', 'cut:acquire:fold', 'missed']),
    });
    addRun(coverage, {
      cutAfter: new Set(['acquire', 'release']),
      stepsRun: new Set(['acquire', 'release']),
      features: new Set(['cut:acquire:pause', 'cut:release:crash']),
    });
    expect(coverage.cutAfter.get('acquire')).toBe(2);
    expect(coverage.ran.get('acquire')).toBe(2);
    // A fold fault runs fold.lua on the node: the fold step ran in that schedule.
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
    expect(formatCoverage(coverage, 2).join('\n')).toMatch(
      /\(step, fault\) cuts taken: 3 of \d+; never taken:/,
    );
  });
});
