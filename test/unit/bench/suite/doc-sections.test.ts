// Which page a generated section is written to (bench/suite/report.ts `docHolding`): a full run's `results` and
// `npm run bench:repair`'s `repair` are today's results, on docs/benchmarks.md; a supplementary run's section is in
// the experiment log, docs/benchmark-experiments.md, and a new one goes there. Read from the real pages, so a
// section whose markers went missing, or sit on both pages, fails here.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { docHolding, docMarkers, EXPERIMENTS_DOC, RESULTS_DOC } from '../../../../bench/suite/report.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
const MARKER = /<!-- bench:([\w-]+):start /g;

function sections(doc: string): string[] {
  return [...readFileSync(path.join(ROOT, doc), 'utf8').matchAll(MARKER)].map((m) => m[1]!);
}

describe('the pages of the generated sections', () => {
  it("puts today's results on the results page and the supplementary runs in the experiment log", async () => {
    expect(await docHolding(ROOT, 'results')).toBe(path.join(ROOT, RESULTS_DOC));
    expect(await docHolding(ROOT, 'repair')).toBe(path.join(ROOT, RESULTS_DOC));
    expect(await docHolding(ROOT, 'scale-1m')).toBe(path.join(ROOT, EXPERIMENTS_DOC));
    expect(await docHolding(ROOT, 'handoff-settle-10')).toBe(path.join(ROOT, EXPERIMENTS_DOC));
  });

  it('sends a section that is on neither page to the end of the experiment log', async () => {
    expect(await docHolding(ROOT, 'no-such-section')).toBe(path.join(ROOT, EXPERIMENTS_DOC));
  });

  it('finds each section on one page only, its start marker once and before its end marker', () => {
    const results = sections(RESULTS_DOC);
    const experiments = sections(EXPERIMENTS_DOC);
    expect(results).toEqual(['results', 'repair']);
    expect(experiments.length).toBeGreaterThan(20);
    expect(results.filter((s) => experiments.includes(s))).toEqual([]);
    for (const doc of [RESULTS_DOC, EXPERIMENTS_DOC]) {
      const text = readFileSync(path.join(ROOT, doc), 'utf8');
      for (const section of sections(doc)) {
        const { start, end } = docMarkers(section);
        expect(text.split(start)).toHaveLength(2);
        expect(text.split(end)).toHaveLength(2);
        expect(text.indexOf(start)).toBeLessThan(text.indexOf(end));
      }
    }
  });
});
