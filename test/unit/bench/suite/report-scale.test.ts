// Scenario 4 in the report with the floor (bench/suite/scenarios/floor.ts) as one more library: its rows in the scale
// table and its decline beside fenced's and redlock's in the target row; results without it render as before.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { BenchResults } from '../../../../bench/suite/results.js';
import { checkTargets, renderMarkdown } from '../../../../bench/suite/report.js';
import type { ScaleCell } from '../../../../bench/suite/scenarios/scale.js';

const RESULTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../bench/results');
const TARGET = 'throughput flat from 1,000 to 1,000,000 resources (within 10 %)';

function results(file: string): BenchResults {
  return JSON.parse(readFileSync(path.join(RESULTS, file), 'utf8')) as BenchResults;
}

/** scale-1m.json (fenced and redlock) with a floor cell at each level: redlock's cell, at `cyclesPerSecond`. */
function withFloor(cyclesPerSecond: Record<string, number>): BenchResults {
  const file = structuredClone(results('scale-1m.json'));
  for (const [level, cells] of Object.entries(file.results.scale!.byLevel)) {
    const floor: ScaleCell = { ...cells.redlock!, cyclesPerSecond: cyclesPerSecond[level]! };
    cells.floor = floor;
  }
  return file;
}

describe('scenario 4 in the report with the floor', () => {
  it("shows the floor's decline beside fenced's and redlock's in the target row", () => {
    const check = checkTargets(withFloor({ '1000': 21_210, '100000': 16_000, '1000000': 9_868 })).find(
      (c) => c.target === TARGET,
    );
    expect(check?.measured).toBe(
      '9,254 → 3,909 cycles/s (0.42×); redlock 7,023 → 3,321 (0.47×); floor 21,210 → 9,868 (0.47×)',
    );
    // The verdict stays fenced's own.
    expect(check?.met).toBe(false);
  });

  it('shows the floor as one more library, after the others, at every level', () => {
    const markdown = renderMarkdown(withFloor({ '1000': 21_210, '100000': 16_000, '1000000': 9_868 }));
    const rows = markdown.split('\n').filter((line) => /^\| 1,000,000 +\| \w+ /.test(line));
    expect(rows.map((row) => row.split('|')[2]!.trim())).toEqual(['fenced', 'redlock', 'floor']);
    expect(markdown).toMatch(/\| 1,000 +\| floor +\| 1,000 +\|.*\| 21,210 +\|/);
    expect(markdown).toContain('"floor" is not a lock');
  });

  it('shows no floor where the run had none, as before', () => {
    const file = results('scale-1m.json');
    const check = checkTargets(file).find((c) => c.target === TARGET);
    expect(check?.measured).toBe('9,254 → 3,909 cycles/s (0.42×); redlock 7,023 → 3,321 (0.47×)');
    expect(renderMarkdown(file)).not.toContain('floor');
  });

  it("says when fenced's background folding shared the run with other libraries, and not when it ran alone", () => {
    const shared = 'kept running its fold passes in the background during the other libraries';
    const isolated = "with the other libraries' background work stopped";
    expect(renderMarkdown(results('scale-1m.json'))).toContain(shared);
    expect(renderMarkdown(results('scale-1m-slow-log.json'))).not.toContain(shared);
    const now = structuredClone(results('scale-1m.json'));
    now.results.scale!.onlyOwnBackground = true;
    const markdown = renderMarkdown(now);
    expect(markdown).not.toContain(shared);
    expect(markdown).toContain(isolated);
  });
});
