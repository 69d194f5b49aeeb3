// SVG charts of a results file, drawn beside the tables of docs/benchmarks.md: plain SVG text built here (no
// browser, no chart library), so any run — `npm run bench`, `--quick`, or bench/suite/render.ts over a recorded file —
// writes them. One chart per scenario that has one:
// - throughput: acquire+release cycles per second by concurrency, a line per library (whiskers: min–max of runs);
// - latency: the distribution of acquire latency at concurrency 1 (p50, p99, p99.9, max of all runs' samples), a
//   line per library, on a log scale;
// - handoff: release → next grant, p50 bars with a p99 whisker, per library and number of waiters, log scale;
// - scale: cycles per second and Redis memory per held resource by resource count, a line per library.
import { writeFile } from 'node:fs/promises';
import { relative, sep } from 'node:path';
import type { BenchResults } from './results.js';
import type { ScaleCell } from './scenarios/scale.js';

/** The scenarios that get a chart, in the order of docs/benchmarks.md. */
export const CHART_SCENARIOS = ['throughput', 'latency', 'handoff', 'scale'] as const;
export type ChartScenario = (typeof CHART_SCENARIOS)[number];

export interface Chart {
  scenario: ChartScenario;
  /** A sentence saying what the chart shows (the image's alt text). */
  title: string;
  svg: string;
}

/** Colours that stay apart for colour-blind readers (Okabe–Ito); fenced is blue and drawn thicker. */
const COLORS: Record<string, string> = {
  fenced: '#0072B2',
  'fenced, waiters in another process': '#56B4E9',
  redlock: '#E69F00',
  'sesame-redlock': '#009E73',
  'redis-semaphore': '#CC79A7',
};
const SPARE_COLORS = ['#D55E00', '#000000', '#F0E442', '#999999'];
const FONT = 'font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif"';

function colorOf(name: string, index: number): string {
  return COLORS[name] ?? SPARE_COLORS[index % SPARE_COLORS.length]!;
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

const f = (value: number): string => (Math.round(value * 10) / 10).toString();

/** 1 234 → "1.2k", 2 000 000 → "2M", 0.25 → "0.25". */
export function shortNumber(value: number): string {
  const abs = Math.abs(value);
  const trim = (n: number, digits: number): string => String(Number(n.toFixed(digits)));
  if (abs >= 1e6) return `${trim(value / 1e6, 1)}M`;
  if (abs >= 1e4) return `${trim(value / 1e3, 0)}k`;
  if (abs >= 1e3) return `${trim(value / 1e3, 1)}k`;
  if (abs >= 1) return trim(value, 1);
  return trim(value, 3);
}

interface Scale {
  map(value: number): number;
  ticks: number[];
}

/** A "nice" linear scale from 0 to at least `max`, mapped onto [bottom, top] (pixel y grows downwards). */
function linearScale(max: number, bottom: number, top: number): Scale {
  const rough = max <= 0 ? 1 : max / 5;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= rough) ?? 10 * magnitude;
  const end = Math.max(step, Math.ceil(max / step) * step);
  const ticks: number[] = [];
  for (let t = 0; t <= end + step / 2; t += step) ticks.push(t);
  return { map: (v) => bottom - (v / end) * (bottom - top), ticks };
}

/** A log-10 scale over whole decades covering [min, max]. */
function logScale(min: number, max: number, bottom: number, top: number): Scale {
  const lo = Math.floor(Math.log10(Math.max(min, 1e-3)));
  const hi = Math.max(lo + 1, Math.ceil(Math.log10(Math.max(max, 1e-3))));
  const ticks: number[] = [];
  for (let d = lo; d <= hi; d++) ticks.push(10 ** d);
  return {
    map: (v) => bottom - ((Math.log10(Math.max(v, 10 ** lo)) - lo) / (hi - lo)) * (bottom - top),
    ticks,
  };
}

interface Point {
  /** Index of the x category. */
  x: number;
  y: number;
  low?: number;
  high?: number;
  /** Drawn hollow (e.g. a pass that hit its time cap). */
  hollow?: boolean;
}

interface Series {
  name: string;
  points: Point[];
}

interface Panel {
  /** Left edge and width of the panel within the SVG. */
  left: number;
  width: number;
  title: string;
  xLabel: string;
  xCategories: string[];
  yLabel: string;
  yScale: 'linear' | 'log';
  /** Formats a y tick. */
  yFormat?: (value: number) => string;
  series: Series[];
  kind: 'lines' | 'bars';
}

const TOP = 64;
const PLOT_BOTTOM_GAP = 56;

/** One panel: axes, grid, ticks, and its series as lines with markers or as grouped bars, with whiskers. */
function drawPanel(panel: Panel, height: number, colorIndex: Map<string, number>): string[] {
  const out: string[] = [];
  const left = panel.left + 64;
  const right = panel.left + panel.width - 16;
  const top = TOP + 24;
  const bottom = height - PLOT_BOTTOM_GAP - 24;
  const values = panel.series.flatMap((s) => s.points.flatMap((p) => [p.y, p.high ?? p.y, p.low ?? p.y]));
  const positive = values.filter((v) => v > 0);
  const scale =
    panel.yScale === 'log'
      ? logScale(Math.min(...positive), Math.max(...positive), bottom, top)
      : linearScale(Math.max(0, ...values), bottom, top);
  const format = panel.yFormat ?? shortNumber;
  out.push(
    `<text x="${f(panel.left + panel.width / 2)}" y="${TOP}" text-anchor="middle" font-size="14" font-weight="600">${escapeXml(panel.title)}</text>`,
  );
  for (const tick of scale.ticks) {
    const y = scale.map(tick);
    out.push(
      `<line x1="${left}" x2="${right}" y1="${f(y)}" y2="${f(y)}" stroke="#e3e3e3"/>`,
      `<text x="${left - 6}" y="${f(y + 4)}" text-anchor="end" font-size="11" fill="#444">${escapeXml(format(tick))}</text>`,
    );
  }
  out.push(
    `<line x1="${left}" x2="${left}" y1="${top}" y2="${bottom}" stroke="#888"/>`,
    `<line x1="${left}" x2="${right}" y1="${bottom}" y2="${bottom}" stroke="#888"/>`,
    `<text transform="translate(${panel.left + 14} ${f((top + bottom) / 2)}) rotate(-90)" text-anchor="middle" font-size="12" fill="#333">${escapeXml(panel.yLabel)}</text>`,
    `<text x="${f((left + right) / 2)}" y="${bottom + 40}" text-anchor="middle" font-size="12" fill="#333">${escapeXml(panel.xLabel)}</text>`,
  );
  const categories = panel.xCategories.length;
  const band = (right - left) / categories;
  const center = (i: number): number => left + band * (i + 0.5);
  panel.xCategories.forEach((label, i) => {
    out.push(
      `<text x="${f(center(i))}" y="${bottom + 18}" text-anchor="middle" font-size="11" fill="#444">${escapeXml(label)}</text>`,
    );
  });
  const count = panel.series.length;
  panel.series.forEach((series, s) => {
    const color = colorOf(series.name, colorIndex.get(series.name) ?? s);
    const main = series.name === 'fenced';
    if (panel.kind === 'bars') {
      const barWidth = Math.min(28, (band * 0.8) / count);
      for (const p of series.points) {
        const x = center(p.x) - (barWidth * count) / 2 + barWidth * s;
        const y = scale.map(p.y);
        out.push(
          `<rect x="${f(x + 1)}" y="${f(y)}" width="${f(barWidth - 2)}" height="${f(Math.max(0, bottom - y))}" fill="${color}"><title>${escapeXml(`${series.name}: ${format(p.y)}`)}</title></rect>`,
        );
        if (p.high !== undefined) {
          const cx = x + barWidth / 2;
          out.push(
            `<line x1="${f(cx)}" x2="${f(cx)}" y1="${f(y)}" y2="${f(scale.map(p.high))}" stroke="#333"/>`,
            `<line x1="${f(cx - 4)}" x2="${f(cx + 4)}" y1="${f(scale.map(p.high))}" y2="${f(scale.map(p.high))}" stroke="#333"/>`,
          );
        }
      }
      return;
    }
    const path = series.points
      .map((p, i) => `${i === 0 ? 'M' : 'L'}${f(center(p.x))},${f(scale.map(p.y))}`)
      .join(' ');
    out.push(
      `<path d="${path}" fill="none" stroke="${color}" stroke-width="${main ? 3 : 1.75}" stroke-linejoin="round"/>`,
    );
    for (const p of series.points) {
      const cx = center(p.x);
      if (p.low !== undefined && p.high !== undefined) {
        out.push(
          `<line x1="${f(cx)}" x2="${f(cx)}" y1="${f(scale.map(p.low))}" y2="${f(scale.map(p.high))}" stroke="${color}" stroke-width="1.5"/>`,
        );
      }
      out.push(
        `<circle cx="${f(cx)}" cy="${f(scale.map(p.y))}" r="${main ? 4.5 : 3.5}" fill="${p.hollow === true ? '#fff' : color}" stroke="${color}" stroke-width="1.5"><title>${escapeXml(`${series.name}: ${format(p.y)}`)}</title></circle>`,
      );
    }
  });
  return out;
}

/** A whole chart: a title, a subtitle, one or more panels side by side, and a legend of every series. */
function chartSvg(options: { title: string; subtitle: string; panels: Panel[]; note?: string }): string {
  const width = options.panels.reduce((w, p) => Math.max(w, p.left + p.width), 0);
  const height = 420;
  const names = [...new Set(options.panels.flatMap((p) => p.series.map((s) => s.name)))];
  const colorIndex = new Map(names.map((name, i) => [name, i]));
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" ${FONT}>`,
    `<rect width="${width}" height="${height}" fill="#fff"/>`,
    `<text x="16" y="24" font-size="16" font-weight="700">${escapeXml(options.title)}</text>`,
    `<text x="16" y="44" font-size="12" fill="#555">${escapeXml(options.subtitle)}</text>`,
  ];
  for (const panel of options.panels) out.push(...drawPanel(panel, height, colorIndex));
  // Legend along the bottom.
  let x = 16;
  const y = height - 16;
  for (const name of names) {
    const color = colorOf(name, colorIndex.get(name) ?? 0);
    out.push(
      `<rect x="${x}" y="${y - 10}" width="14" height="10" fill="${color}"/>`,
      `<text x="${x + 20}" y="${y}" font-size="12">${escapeXml(name)}</text>`,
    );
    x += 30 + name.length * 6.6;
  }
  if (options.note !== undefined) {
    out.push(
      `<text x="${width - 16}" y="${y}" text-anchor="end" font-size="11" fill="#666">${escapeXml(options.note)}</text>`,
    );
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/** Library names in the order the results list them, fenced first. */
function libraryOrder(names: Iterable<string>): string[] {
  const list = [...new Set(names)];
  return list.sort((a, b) => (a.startsWith('fenced') ? 0 : 1) - (b.startsWith('fenced') ? 0 : 1));
}

const ms = (value: number): string => `${shortNumber(value)} ms`;

/** The charts of every scenario `results` holds that has one. */
export function renderCharts(results: BenchResults): Chart[] {
  const charts: Chart[] = [];
  const r = results.results;
  const run = `${results.kind} run of ${results.startedAt.slice(0, 10)}, ${results.machine.cores} cores`;

  if (r.throughput !== undefined) {
    const concurrencies = Object.keys(r.throughput.byConcurrency);
    const names = libraryOrder(Object.values(r.throughput.byConcurrency).flatMap((c) => Object.keys(c)));
    charts.push({
      scenario: 'throughput',
      title: 'Uncontended acquire+release cycles per second by concurrency, per library',
      svg: chartSvg({
        title: 'Throughput: acquire+release cycles per second',
        subtitle: `Median of ${results.runs} runs, whiskers min–max; higher is better (${run}).`,
        panels: [
          {
            left: 0,
            width: 760,
            title: 'uncontended, distinct resources',
            xLabel: 'concurrency (callers at once)',
            xCategories: concurrencies,
            yLabel: 'cycles per second',
            yScale: 'linear',
            kind: 'lines',
            series: names.map((name) => ({
              name,
              points: concurrencies.flatMap((c, x) => {
                const cell = r.throughput!.byConcurrency[c]?.[name];
                return cell === undefined ? [] : [{ x, y: cell.median, low: cell.min, high: cell.max }];
              }),
            })),
          },
        ],
      }),
    });
  }

  if (r.latency !== undefined) {
    const names = libraryOrder(Object.keys(r.latency.byLibrary));
    const percentiles = [
      ['p50', (s: { p50: number }) => s.p50],
      ['p99', (s: { p99: number }) => s.p99],
      ['p99.9', (s: { p999: number }) => s.p999],
      ['max', (s: { max: number }) => s.max],
    ] as const;
    charts.push({
      scenario: 'latency',
      title: 'Acquire latency at concurrency 1: p50, p99, p99.9 and max per library',
      svg: chartSvg({
        title: 'Acquire latency at concurrency 1',
        subtitle: `Percentiles of all ${results.runs} runs' samples pooled; lower is better; log scale (${run}).`,
        panels: [
          {
            left: 0,
            width: 760,
            title: 'distribution of one acquire',
            xLabel: 'percentile',
            xCategories: percentiles.map(([label]) => label),
            yLabel: 'milliseconds',
            yScale: 'log',
            yFormat: ms,
            kind: 'lines',
            series: names.map((name) => ({
              name,
              points: percentiles.map(([, pick], x) => ({
                x,
                y: pick(r.latency!.byLibrary[name]!.acquirePooled),
              })),
            })),
          },
        ],
      }),
    });
  }

  if (r.handoff !== undefined) {
    const waiterCounts = Object.keys(r.handoff.byWaiters);
    const names = libraryOrder(Object.values(r.handoff.byWaiters).flatMap((c) => Object.keys(c)));
    charts.push({
      scenario: 'handoff',
      title:
        'Contended hand-off: time from a release to the next holder, p50 and p99, per library and waiters',
      svg: chartSvg({
        title: 'Hand-off: release → next holder granted',
        subtitle: `p50 bars, p99 whiskers, all ${results.runs} runs pooled; lower is better; log scale (${run}).`,
        panels: [
          {
            left: 0,
            width: 760,
            title: 'a holder releases while others wait',
            xLabel: 'waiters',
            xCategories: waiterCounts.map((w) => `${w} waiter${w === '1' ? '' : 's'}`),
            yLabel: 'milliseconds',
            yScale: 'log',
            yFormat: ms,
            kind: 'bars',
            series: names.map((name) => ({
              name,
              points: waiterCounts.flatMap((w, x) => {
                const cell = r.handoff!.byWaiters[w]?.[name];
                return cell === undefined ? [] : [{ x, y: cell.gapPooled.p50, high: cell.gapPooled.p99 }];
              }),
            })),
          },
        ],
      }),
    });
  }

  if (r.scale !== undefined) {
    const levels = Object.keys(r.scale.byLevel);
    const names = libraryOrder(Object.values(r.scale.byLevel).flatMap((c) => Object.keys(c)));
    const seriesOf = (pick: (cell: ScaleCell) => number): Series[] =>
      names.map((name) => ({
        name,
        points: levels.flatMap((level, x) => {
          const cell = r.scale!.byLevel[level]?.[name];
          return cell === undefined ? [] : [{ x, y: pick(cell), hollow: cell.stoppedAtCap }];
        }),
      }));
    const categories = levels.map((level) => shortNumber(Number(level)));
    const capped = Object.values(r.scale.byLevel).some((cells) =>
      Object.values(cells).some((c) => c.stoppedAtCap),
    );
    charts.push({
      scenario: 'scale',
      title:
        'Many distinct resources: cycles per second and Redis memory per held resource by resource count',
      svg: chartSvg({
        title: 'Scale: many distinct resources',
        subtitle: `Acquire all, hold, release all at concurrency ${r.scale.concurrency}; medians of the passes (${run}).`,
        note: capped ? 'hollow: the pass hit its time cap' : undefined,
        panels: [
          {
            left: 0,
            width: 500,
            title: 'throughput (higher is better)',
            xLabel: 'resources',
            xCategories: categories,
            yLabel: 'acquire+release cycles per second',
            yScale: 'linear',
            kind: 'lines',
            series: seriesOf((cell) => cell.cyclesPerSecond),
          },
          {
            left: 500,
            width: 500,
            title: 'Redis memory per held resource (lower is better)',
            xLabel: 'resources',
            xCategories: categories,
            yLabel: 'bytes per resource and node',
            yScale: 'linear',
            kind: 'lines',
            series: seriesOf((cell) => cell.heldBytesPerResource),
          },
        ],
      }),
    });
  }
  return charts;
}

/** Where the chart of `scenario` for the results file `resultsFile` goes: beside it, `<name>-<scenario>.svg`. */
export function chartFile(resultsFile: string, scenario: ChartScenario): string {
  return resultsFile.replace(/\.json$/, '') + `-${scenario}.svg`;
}

/** Writes every chart of `results` beside `resultsFile`; returns what it wrote. */
export async function writeCharts(
  results: BenchResults,
  resultsFile: string,
): Promise<{ scenario: ChartScenario; file: string; title: string }[]> {
  const written: { scenario: ChartScenario; file: string; title: string }[] = [];
  for (const chart of renderCharts(results)) {
    const file = chartFile(resultsFile, chart.scenario);
    await writeFile(file, chart.svg);
    written.push({ scenario: chart.scenario, file, title: chart.title });
  }
  return written;
}

/** The chart links of renderMarkdown for a Markdown file in `markdownDir`. */
export function chartLinks(
  written: readonly { scenario: ChartScenario; file: string; title: string }[],
  markdownDir: string,
): Partial<Record<ChartScenario, { path: string; title: string }>> {
  return Object.fromEntries(
    written.map(({ scenario, file, title }) => [
      scenario,
      { path: relative(markdownDir, file).split(sep).join('/'), title },
    ]),
  );
}
