import fs from 'node:fs/promises';
import path from 'node:path';
import type { BenchResults } from './results.js';
import type { ChartScenario } from './charts.js';
import { baselineNames, libraryColumns, num, ratio, table, type SectionView } from './markdown.js';
import { range } from './statistics.js';
import { PEER_NAMES } from '../peers/peer-config.js';
import { FLOOR_NAME } from './scenarios/floor.js';
import { FENCED_ELSEWHERE, renderHandoff } from './scenarios/handoff.js';
import { renderGuarded } from './scenarios/guarded.js';
import { renderHttp } from './scenarios/http.js';
import { renderLatency } from './scenarios/latency.js';
import { renderScale } from './scenarios/scale.js';
import { renderThroughput } from './scenarios/throughput.js';

/**
 * The generated parts of docs/benchmarks.md (today's results) and docs/benchmark-experiments.md (the log of
 * supplementary runs) sit between markers named after a section (`results` for the full run); the prose around
 * them is written by hand.
 */
export function docMarkers(section: string): { start: string; end: string } {
  return {
    start: `<!-- bench:${section}:start (generated from bench/results by bench/suite/report.ts; do not edit by hand) -->`,
    end: `<!-- bench:${section}:end -->`,
  };
}

/** The page of today's results: a full run writes its `results` section there. */
export const RESULTS_DOC = 'docs/benchmarks.md';
/** The experiment log: supplementary runs, each in its own section. */
export const EXPERIMENTS_DOC = 'docs/benchmark-experiments.md';

/**
 * The page that holds a section's markers, as a path under `root`: the results page first, then the experiment
 * log. A section that is on neither page is new, and goes to the end of the experiment log.
 */
export async function docHolding(root: string, section: string): Promise<string> {
  const { start } = docMarkers(section);
  for (const doc of [RESULTS_DOC, EXPERIMENTS_DOC]) {
    const file = path.join(root, doc);
    const text = await fs.readFile(file, 'utf8').catch(() => '');
    if (text.includes(start)) return file;
  }
  return path.join(root, EXPERIMENTS_DOC);
}

/**
 * `; redlock 7,023 → 3,321 (0.47×)`, and the same for the floor: the same levels for redlock and for the floor,
 * each when it ran both, so the nodes' own share of fenced's decline shows.
 */
function peerScale(
  scale: NonNullable<BenchResults['results']['scale']>,
  first: number,
  last: number,
): string {
  return ['redlock', FLOOR_NAME]
    .map((name) => {
      const a = scale.byLevel[String(first)]?.[name];
      const b = scale.byLevel[String(last)]?.[name];
      if (a === undefined || b === undefined) return '';
      return `; ${name} ${num(a.cyclesPerSecond)} → ${num(b.cyclesPerSecond)} (${(b.cyclesPerSecond / a.cyclesPerSecond).toFixed(2)}×)`;
    })
    .join('');
}

/** Target checks, computed from the numbers (never typed in by hand). */
export interface TargetCheck {
  target: string;
  measured: string;
  met: boolean | undefined;
}

/** One line of the before/after comparison: the current fenced against an earlier one, same nodes, same run. */
interface BeforeAfter {
  metric: string;
  unit: string;
  digits: number;
  before: number | undefined;
  after: number | undefined;
  /** The spread of the runs, where the results keep one value per run. */
  beforeRange?: { min: number; max: number };
  afterRange?: { min: number; max: number };
  lowerIsBetter: boolean;
}

/** The issue's measures: throughput at 64, acquire p50 at 1, server CPU and AOF bytes per cycle (at 1 and 64). */
function beforeAfter(results: BenchResults, earlier: string): BeforeAfter[] {
  const r = results.results;
  const rows: BeforeAfter[] = [];
  const tp = r.throughput?.byConcurrency;
  const spread = (runs: readonly number[] | undefined) =>
    runs === undefined || runs.length === 0 ? undefined : range(runs);
  if (tp?.['64'] !== undefined) {
    const cells = tp['64'];
    rows.push({
      metric: 'throughput at concurrency 64',
      unit: 'cycles/s',
      digits: 0,
      before: cells[earlier]?.median,
      after: cells.fenced?.median,
      beforeRange: spread(cells[earlier]?.runs),
      afterRange: spread(cells.fenced?.runs),
      lowerIsBetter: false,
    });
  }
  const lat = r.latency?.byLibrary;
  if (lat !== undefined) {
    rows.push({
      metric: 'acquire p50 at concurrency 1',
      unit: 'ms',
      digits: 3,
      before: lat[earlier]?.acquire.p50,
      after: lat.fenced?.acquire.p50,
      beforeRange: spread(lat[earlier]?.acquireRuns.map((s) => s.p50)),
      afterRange: spread(lat.fenced?.acquireRuns.map((s) => s.p50)),
      lowerIsBetter: true,
    });
  }
  for (const concurrency of ['1', '64']) {
    const cells = tp?.[concurrency];
    if (cells === undefined) continue;
    rows.push(
      {
        metric: `server CPU per cycle at concurrency ${concurrency} (5 nodes together)`,
        unit: 'µs',
        digits: 0,
        before: cells[earlier]?.redisCpuUsPerCycle,
        after: cells.fenced?.redisCpuUsPerCycle,
        lowerIsBetter: true,
      },
      {
        metric: `AOF bytes per cycle at concurrency ${concurrency} (per node)`,
        unit: 'B',
        digits: 1,
        before: cells[earlier]?.aofBytesPerCycle,
        after: cells.fenced?.aofBytesPerCycle,
        lowerIsBetter: true,
      },
      {
        metric: `client CPU per cycle at concurrency ${concurrency}`,
        unit: 'µs',
        digits: 0,
        before: cells[earlier]?.clientCpuUsPerCycle,
        after: cells.fenced?.clientCpuUsPerCycle,
        lowerIsBetter: true,
      },
    );
  }
  return rows;
}

function withRange(
  value: number | undefined,
  spread: { min: number; max: number } | undefined,
  digits: number,
) {
  return `${num(value, digits)}${spread === undefined ? '' : ` [${num(spread.min, digits)}–${num(spread.max, digits)}]`}`;
}

/** Whether `after` is no worse than `before`; undefined when either is missing. */
function noWorse(row: BeforeAfter): boolean | undefined {
  const { before, after } = row;
  if (before === undefined || after === undefined || !Number.isFinite(before) || !Number.isFinite(after)) {
    return undefined;
  }
  return row.lowerIsBetter ? after <= before : after >= before;
}

export function checkTargets(results: BenchResults): TargetCheck[] {
  const r = results.results;
  const checks: TargetCheck[] = [];
  for (const earlier of baselineNames(results)) {
    for (const row of beforeAfter(results, earlier)) {
      if (row.metric.startsWith('client CPU')) continue; // shown, not a target
      const within =
        row.beforeRange !== undefined &&
        row.after !== undefined &&
        row.after >= row.beforeRange.min &&
        row.after <= row.beforeRange.max;
      checks.push({
        target: `${row.metric} no worse than ${earlier}`,
        measured: `${withRange(row.after, row.afterRange, row.digits)} vs ${withRange(row.before, row.beforeRange, row.digits)} ${row.unit} (${ratio(row.after, row.before)})${within ? `; within ${earlier}'s range of runs` : ''}`,
        met: noWorse(row),
      });
    }
  }
  const tp = r.throughput?.byConcurrency['64'];
  if (tp !== undefined) {
    const x = (tp.fenced?.median ?? NaN) / (tp.redlock?.median ?? NaN);
    checks.push({
      target: 'acquire+release throughput at concurrency 64 ≥ 1.5× redlock',
      measured: `${num(tp.fenced?.median)} vs ${num(tp.redlock?.median)} cycles/s = ${x.toFixed(2)}×`,
      met: Number.isFinite(x) ? x >= 1.5 : undefined,
    });
  }
  // Issue 37: fenced against each fencing peer that ran (bench/peers/), at 64 and at 1.
  for (const peer of PEER_NAMES) {
    for (const [concurrency, goal] of [
      ['64', 4],
      ['1', 1],
    ] as const) {
      const cells = r.throughput?.byConcurrency[concurrency];
      const cell = cells?.[peer];
      if (cell === undefined) continue;
      const x = (cells?.fenced?.median ?? NaN) / cell.median;
      checks.push({
        target: `acquire+release throughput at concurrency ${concurrency} ≥ ${goal}× ${peer}`,
        measured: `${num(cells?.fenced?.median)} vs ${num(cell.median)} cycles/s = ${x.toFixed(2)}×`,
        met: Number.isFinite(x) ? x >= goal : undefined,
      });
    }
  }
  const lat = r.latency?.byLibrary;
  if (lat !== undefined) {
    const f = lat.fenced?.acquire.p50;
    const p = lat.redlock?.acquire.p50;
    checks.push({
      target: 'acquire p50 at concurrency 1 no slower than redlock',
      measured: `${num(f, 3)} ms vs ${num(p, 3)} ms`,
      met: f !== undefined && p !== undefined ? f <= p : undefined,
    });
  }
  if (r.handoff !== undefined) {
    for (const [waiters, cells] of Object.entries(r.handoff.byWaiters)) {
      for (const [key, where] of [
        ['fenced', "waiters in the holder's process"],
        [FENCED_ELSEWHERE, 'waiters in another process'],
      ] as const) {
        const ho = cells[key];
        if (ho === undefined) continue;
        checks.push({
          target: `hand-off p50 < 2 ms (${waiters} waiter${waiters === '1' ? '' : 's'}, ${where})`,
          measured: `${num(ho.gap.p50, 2)} ms`,
          met: Number.isFinite(ho.gap.p50) ? ho.gap.p50 < 2 : undefined,
        });
      }
    }
  }
  if (r.guarded !== undefined) {
    for (const [concurrency, cell] of Object.entries(r.guarded.byConcurrency)) {
      checks.push({
        target: `guarded write ≤ 1.15× plain write (concurrency ${concurrency})`,
        measured: `${cell.costRatio.toFixed(3)}× time per write (p50 ${cell.p50Ratio.toFixed(3)}×)`,
        met: cell.costRatio <= 1.15,
      });
    }
  }
  if (r.http !== undefined) {
    const cells = r.http.byConcurrency['64'];
    if (cells !== undefined) {
      checks.push({
        target: 'HTTP service throughput at concurrency 64 ≥ 0.4× a raw node:http server with canned replies',
        measured: `${num(cells.service.medianPerSecond)} vs ${num(cells.canned.medianPerSecond)} cycles/s = ${cells.ratio.toFixed(2)}×`,
        met: Number.isFinite(cells.ratio) ? cells.ratio >= 0.4 : undefined,
      });
    }
  }
  if (r.scale !== undefined) {
    const levels = Object.keys(r.scale.byLevel)
      .map(Number)
      .sort((a, b) => a - b);
    const first = levels[0];
    const last = levels[levels.length - 1];
    if (first !== undefined && last !== undefined && first !== last) {
      const a = r.scale.byLevel[String(first)]?.fenced;
      const b = r.scale.byLevel[String(last)]?.fenced;
      if (a !== undefined && b !== undefined) {
        const x = b.cyclesPerSecond / a.cyclesPerSecond;
        checks.push({
          target: `throughput flat from ${num(first)} to ${num(last)} resources (within 10 %)`,
          measured: `${num(a.cyclesPerSecond)} → ${num(b.cyclesPerSecond)} cycles/s (${x.toFixed(2)}×)${peerScale(r.scale, first, last)}${b.stoppedAtCap ? `; the largest pass stopped at its time cap after ${num(b.reached)} resources` : ''}`,
          // A capped pass did not reach the size the target is about: no verdict.
          met: Number.isFinite(x) && !b.stoppedAtCap ? x >= 0.9 : undefined,
        });
      }
    }
  }
  return checks;
}

/**
 * The generated Markdown: environment, the before/after comparison of a `--baseline-ref` run, each scenario's
 * tables (rendered by the scenario itself: `renderThroughput` in bench/suite/scenarios/throughput.ts and so on),
 * the target checks, the nodes' stalls and the failures. `charts` links a scenario's SVG
 * chart (bench/suite/charts.ts), shown above its table: scenario → path relative to the Markdown file.
 */
export function renderMarkdown(
  results: BenchResults,
  charts: Partial<Record<ChartScenario, { path: string; title: string }>> = {},
): string {
  const out: string[] = [];
  const chart = (scenario: ChartScenario): string[] => {
    const link = charts[scenario];
    return link === undefined ? [] : [`![${link.title}](${link.path})`, ''];
  };
  const m = results.machine;
  const v = results.versions;
  out.push(
    `Measured ${results.startedAt.slice(0, 16).replace('T', ' ')} UTC in ${num(results.durationSeconds)} s with \`${results.command}\` ` +
      `(${results.kind} run, ${results.runs} interleaved runs per cell).`,
    '',
    table(
      ['', ''],
      [
        ['machine', `${m.cores} cores (${m.cpuModel}), ${num(m.memoryGiB, 1)} GiB, ${m.platform}`],
        [
          'load average (1 min)',
          `${num(m.loadAverageAtStart, 2)} at start, ${num(m.loadAverageAtEnd, 2)} at the end`,
        ],
        [
          'disk fdatasync (Redis data dir)',
          `p50 ${num(m.fsync.p50Ms, 2)} ms, p99 ${num(m.fsync.p99Ms, 2)} ms (${m.fsync.samples} samples)`,
        ],
        [
          'source',
          `commit ${results.revision?.commit.slice(0, 7) ?? 'unknown'}${
            results.revision !== undefined && results.revision.modifiedPackageFiles.length > 0
              ? ` plus uncommitted changes to ${results.revision.modifiedPackageFiles.join(', ')}`
              : ''
          }`,
        ],
        ['node', v.node],
        [
          'redis-server',
          `${v.redisServer}, ${results.redisNodes} nodes, ${Object.entries(results.redisConfig)
            .map(([k, val]) => `${k} ${val === '' ? '""' : val}`)
            .join(', ')}`,
        ],
        ['postgres', v.postgres],
        ...Object.entries(v.libraries).map(([name, lib]) => [name, `${lib.package} ${lib.version}`]),
      ],
    ),
    '',
  );

  for (const earlier of baselineNames(results)) {
    const rows = beforeAfter(results, earlier);
    if (rows.length === 0) continue;
    const configuration = results.libraries[earlier]?.configuration ?? {};
    const text = (value: unknown): string => (typeof value === 'string' ? value : '?');
    out.push(
      `### Before/after: fenced against ${earlier}`,
      '',
      `The current sources (fenced) and those of ${earlier} (commit ${text(configuration.commit).slice(0, 7)}, key prefix \`${text(configuration.keyPrefix)}\`, as long as fenced's), interleaved on the same nodes in this run; medians of ${results.runs} runs [min–max of the runs where kept]. From scenarios 1 and 2 below.`,
      '',
      table(
        ['measure', earlier, 'fenced', 'fenced ÷ before', 'no worse?'],
        rows.map((row) => {
          const verdict = noWorse(row);
          return [
            `${row.metric}, ${row.unit}`,
            withRange(row.before, row.beforeRange, row.digits),
            withRange(row.after, row.afterRange, row.digits),
            ratio(row.after, row.before),
            verdict === undefined ? '–' : verdict ? 'yes' : '**no**',
          ];
        }),
      ),
      '',
    );
  }
  // Each scenario renders its own tables (bench/suite/scenarios/), in the order they run; a scenario not in the
  // run renders none.
  const view: SectionView = { columns: libraryColumns(results), chart };
  out.push(
    ...renderThroughput(results, view),
    ...renderLatency(results, view),
    ...renderHandoff(results, view),
    ...renderScale(results, view),
    ...renderGuarded(results),
    ...renderHttp(results),
  );
  const checks = checkTargets(results);
  if (checks.length > 0) {
    out.push(
      `### Targets`,
      '',
      table(
        ['target', 'measured', 'status'],
        checks.map((c) => [
          c.target,
          c.measured,
          c.met === undefined ? 'not judged' : c.met ? 'met' : '**missed**',
        ]),
      ),
      '',
    );
  }
  const stalls = Object.entries(results.redisStalls ?? {});
  if (stalls.length > 0) {
    out.push(
      `### Redis stalls`,
      '',
      `What the nodes' own latency monitors recorded (stalls ≥ 100 ms: event, longest, on how many of the 5 nodes), the commands their slow logs name (≥ 100 ms: longest, on how many nodes, how many in all; a script by its key count and first key), and the AOF rewrites they ran, per scenario.`,
      '',
      table(
        ['scenario', 'stalls', 'slow commands', 'AOF rewrites'],
        stalls.map(([scenario, s]) => [
          scenario,
          Object.entries(s.events)
            .map(([event, e]) => `${event} ${num(e.maxMs)} ms (${e.nodes})`)
            .join(', ') || 'none',
          s.slowCommands === undefined
            ? '–'
            : Object.entries(s.slowCommands)
                .sort((a, b) => b[1].maxMs - a[1].maxMs)
                .slice(0, 4)
                .map(([name, c]) => `${name} ${num(c.maxMs)} ms (${c.nodes}, ${c.count}×)`)
                .join('; ') || 'none',
          String(s.aofRewrites),
        ]),
      ),
      '',
    );
  }
  if (results.failures.length > 0) {
    out.push(
      `### Failures`,
      '',
      table(
        ['scenario', 'subject', 'count', 'error'],
        results.failures.map((f) => [
          f.scenario,
          f.subject,
          String(f.count),
          f.message.replaceAll('|', '\\|'),
        ]),
      ),
      '',
    );
  }
  return out.join('\n');
}

/** Replaces a generated section of the doc (creating its markers at the end if they are missing). */
export async function writeDocTables(docPath: string, markdown: string, section = 'results'): Promise<void> {
  const { start: DOC_START, end: DOC_END } = docMarkers(section);
  let doc: string;
  try {
    doc = await fs.readFile(docPath, 'utf8');
  } catch {
    doc = '# Benchmarks\n\n';
  }
  const block = `${DOC_START}\n\n${markdown.trim()}\n\n${DOC_END}`;
  const start = doc.indexOf(DOC_START);
  const end = doc.indexOf(DOC_END);
  const next =
    start >= 0 && end > start
      ? doc.slice(0, start) + block + doc.slice(end + DOC_END.length)
      : `${doc.trimEnd()}\n\n${block}\n`;
  await fs.writeFile(docPath, next);
}
