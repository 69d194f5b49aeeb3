import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunAnalysis } from '../../../demo/analysis.js';
import { runDemo, type DemoResult } from '../../../demo/run-demo.js';

// The demo end to end, on scenario F1: real Redis processes, real Postgres, two worker processes paused with
// SIGSTOP. The verdicts are the demo's own, read from the recorded history; nothing here depends on timing.
describe('npm run demo, scenario F1 (a holder paused past its TTL, then writes)', () => {
  let dir: string;
  let result: DemoResult;
  const run = (mode: 'unprotected' | 'fenced'): RunAnalysis => {
    const found = result.runs.find((r) => r.record.mode === mode);
    if (!found) throw new Error(`no ${mode} run`);
    return found;
  };

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'fenced-demo-test-'));
    result = await runDemo({ scenarios: ['f1'], reportPath: path.join(dir, 'report.html') });
  }, 120_000);

  afterAll(async () => {
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('runs the scenario once unprotected and once fenced', () => {
    expect(result.runs.map((r) => [r.record.scenario, r.record.mode])).toEqual([
      ['F1', 'unprotected'],
      ['F1', 'fenced'],
    ]);
    expect(result.skipped).toEqual([]);
    expect(result.passed).toBe(true);
  });

  it('loses an update with plain Redlock and plain UPDATEs: the stale write is accepted', () => {
    const unprotected = run('unprotected');
    expect(unprotected.record.error).toBeUndefined();
    expect(unprotected.verdict).toMatchObject({ expectation: 'anomaly', passed: true });
    expect(unprotected.verdict.checks.ok).toBe(false);
    expect(unprotected.verdict.checks.violations.some((v) => v.startsWith('lost update:'))).toBe(true);
    const stale = unprotected.writes.filter((w) => w.status === 'stale-accepted');
    expect(stale.map((w) => w.worker)).toEqual(['A']);
    // Both increments were acknowledged, one of them is gone.
    expect(unprotected.writes.filter((w) => w.status !== 'refused')).toHaveLength(2);
    expect(unprotected.record.final?.value).toBe(1);
  });

  it('refuses the stale write with the fencing token and keeps the data intact', () => {
    const fenced = run('fenced');
    expect(fenced.record.error).toBeUndefined();
    expect(fenced.verdict).toMatchObject({ expectation: 'safe', passed: true });
    expect(fenced.verdict.checks.ok).toBe(true);
    const refused = fenced.writes.filter((w) => w.status === 'refused');
    expect(refused.map((w) => w.worker)).toEqual(['A']);
    expect(refused[0]!.detail).toContain('STALE_TOKEN');
    const committed = fenced.writes.filter((w) => w.status === 'committed');
    expect(committed.map((w) => w.worker)).toEqual(['B']);
    expect(fenced.record.final).toEqual({ value: 1, writer: 'B' });
    // B's token is above A's: the fence is what refused A, not luck.
    const [a, b] = [
      fenced.grants.find((g) => g.worker === 'A')!,
      fenced.grants.find((g) => g.worker === 'B')!,
    ];
    expect(b.token > a.token).toBe(true);
  });

  it('writes an HTML report with one SVG timeline per run', async () => {
    expect(result.reportPath).toBe(path.join(dir, 'report.html'));
    const html = await fs.readFile(result.reportPath!, 'utf8');
    expect(html.match(/<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg" class="timeline"/g)).toHaveLength(2);
    expect(html).toContain('stale write 1 accepted');
    expect(html).toContain('write 1 refused');
    // The headline, computed from the two runs.
    expect(html).toContain('The lock alone lost data in 1 of 1 scenario; with fenced, 0 of 1.');
  });

  it('stops every process it started and drops its schema', () => {
    expect(result.cleanupProblems).toEqual([]);
    expect(result.started.schema).toMatch(/^fenced_demo_/);
    for (const pid of result.started.pids) expect(() => process.kill(pid, 0)).toThrow();
  });
});
