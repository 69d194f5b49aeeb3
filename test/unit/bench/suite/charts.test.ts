// The benchmark's SVG charts, drawn from a recorded full run: one per scenario that has one, every library of the
// run in it, every measured point drawn, and no coordinate that is not a number.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { BenchResults } from '../../../../bench/suite/results.js';
import { chartFile, chartLinks, renderCharts, shortNumber } from '../../../../bench/suite/charts.js';
import { renderMarkdown } from '../../../../bench/suite/report.js';

const RESULTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../bench/results');
const latest = JSON.parse(readFileSync(path.join(RESULTS, 'latest.json'), 'utf8')) as BenchResults;

describe('benchmark charts', () => {
  const charts = renderCharts(latest);

  it('draws throughput, latency, hand-off and scale from a full run', () => {
    expect(charts.map((c) => c.scenario)).toEqual(['throughput', 'latency', 'handoff', 'scale']);
    for (const chart of charts) {
      expect(chart.svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
      expect(chart.svg.trimEnd().endsWith('</svg>')).toBe(true);
      expect(chart.svg).not.toMatch(/NaN|Infinity|undefined/);
    }
  });

  it('draws every library and every measured point', () => {
    const throughput = charts.find((c) => c.scenario === 'throughput')!.svg;
    const cells = Object.values(latest.results.throughput!.byConcurrency).flatMap((c) => Object.keys(c));
    for (const name of new Set(cells)) expect(throughput).toContain(`>${name}</text>`);
    expect(throughput.match(/<circle /g)?.length).toBe(cells.length);
    const handoff = charts.find((c) => c.scenario === 'handoff')!.svg;
    const gaps = Object.values(latest.results.handoff!.byWaiters).flatMap((c) => Object.keys(c));
    expect(handoff.match(/<\/rect>/g)?.length).toBe(gaps.length); // bars carry a title; legend keys do not
    const scale = charts.find((c) => c.scenario === 'scale')!.svg;
    const passes = Object.values(latest.results.scale!.byLevel).flatMap((c) => Object.keys(c));
    expect(scale.match(/<circle /g)?.length).toBe(2 * passes.length); // throughput and memory panels
  });

  it('links each chart above its scenario table, relative to the Markdown file', () => {
    const written = charts.map((c) => ({
      scenario: c.scenario,
      title: c.title,
      file: chartFile(path.join(RESULTS, 'latest.json'), c.scenario),
    }));
    const markdown = renderMarkdown(latest, chartLinks(written, path.resolve(RESULTS, '../../docs')));
    expect(markdown).toContain(
      '### 1. Uncontended acquire+release throughput\n\n![Uncontended acquire+release cycles per second by concurrency, per library](../bench/results/latest-throughput.svg)',
    );
    expect(markdown).toContain('(../bench/results/latest-scale.svg)');
  });

  it('writes axis numbers short', () => {
    expect(shortNumber(0.25)).toBe('0.25');
    expect(shortNumber(5)).toBe('5');
    expect(shortNumber(2_500)).toBe('2.5k');
    expect(shortNumber(15_000)).toBe('15k');
    expect(shortNumber(1_000_000)).toBe('1M');
  });
});
