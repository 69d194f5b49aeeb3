import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { BenchResults } from '../../../../bench/suite/results.js';
import { checkTargets, renderMarkdown } from '../../../../bench/suite/report.js';

const RESULTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../bench/results');

function results(file: string): BenchResults {
  return JSON.parse(readFileSync(path.join(RESULTS, file), 'utf8')) as BenchResults;
}

describe('scenario 6 in the report', () => {
  it('renders the service against the canned server, with the library figure of the same run', () => {
    const markdown = renderMarkdown(results('http-before.json'));
    expect(markdown).toContain(
      '### 6. Lease grants through the HTTP service, against a raw node:http server',
    );
    expect(markdown).toMatch(/\| 64 +\| [\d,]+ \[[\d,]+–[\d,]+\] +\| [\d,]+ \[[\d,]+–[\d,]+\] +\| [\d.]+× /);
    // Scenario 1 ran in the same run: its fenced figure at 64 stands beside the HTTP one.
    const library = results('http-before.json').results.throughput!.byConcurrency['64']!.fenced!.median;
    expect(markdown).toContain(Math.round(library).toLocaleString('en-US'));
  });

  it('says when scenario 1 was not in the run, and renders the profile summary', () => {
    const markdown = renderMarkdown(results('http-before-profile.json'));
    expect(markdown).toContain('not in this run');
    expect(markdown).toMatch(/\| ioredis +\| [\d.,]+ +\|/);
    expect(markdown).toContain('**sampled, not idle**');
  });

  it('judges the target from the numbers: service ÷ canned at concurrency 64 against 0.4', () => {
    const file = results('http-before.json');
    const check = checkTargets(file).find((c) => c.target.startsWith('HTTP service throughput'));
    const ratio = file.results.http!.byConcurrency['64']!.ratio;
    expect(check?.met).toBe(ratio >= 0.4);
  });

  it("shows the nodes' reads and commands per cycle of the service when counted, and no such column before", () => {
    const before = results('http-before.json');
    expect(renderMarkdown(before)).not.toContain('per node: reads, commands');
    const counted = structuredClone(before);
    const http = counted.results.http!;
    Object.assign(http.byConcurrency['64']!.service, {
      redisReadsPerCycle: 0.134,
      redisCommandsPerCycle: 7.62,
    });
    Object.assign(http.byConcurrency['1']!.service, {
      redisReadsPerCycle: 2.01,
      redisCommandsPerCycle: 11.3,
    });
    const markdown = renderMarkdown(counted);
    expect(markdown).toContain('per node: reads, commands');
    expect(markdown).toMatch(/\| 64 +\|.*\| 0\.13 reads, 7\.6 commands +\|/);
  });
});
