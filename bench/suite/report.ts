import fs from 'node:fs/promises';
import path from 'node:path';
import type { BenchResults } from './results.js';
import type { ChartScenario } from './charts.js';
import { range } from './statistics.js';
import { LIBRARY_NAMES } from './lock-library.js';
import { PEER_NAMES } from '../peers/peer-config.js';
import { FLOOR_NAME } from './scenarios/floor.js';
import { FENCED_ELSEWHERE } from './scenarios/handoff.js';
import type { HttpResult } from './scenarios/http.js';
import { PROFILE_AREAS } from '../profilers/cpu-profile-summary.js';

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

const PEERS = LIBRARY_NAMES.filter((n) => n !== 'fenced');

/** The earlier fenced versions of a run (`--baseline-ref`: `fenced@<ref>`), in the order they were created. */
export function baselineNames(results: BenchResults): string[] {
  return Object.keys(results.libraries ?? {}).filter((n) => n.startsWith('fenced@'));
}

/** Table columns: fenced, its earlier versions, then the peers (absent ones print as –). */
function libraryColumns(results: BenchResults): string[] {
  return ['fenced', ...baselineNames(results), ...PEERS];
}

/** Display precision only: the JSON keeps every digit measured. */
function num(value: number | undefined, digits = 0): string {
  if (value === undefined || !Number.isFinite(value)) return '–';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
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

function ratio(a: number | undefined, b: number | undefined): string {
  if (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0) return '–';
  return `${(a / b).toFixed(2)}×`;
}

function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
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
 * The generated Markdown: environment, one table per scenario, the target checks. `charts` links a scenario's SVG
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

  const r = results.results;
  const columns = libraryColumns(results);
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
  if (r.throughput !== undefined) {
    const byConcurrency = r.throughput.byConcurrency;
    const hasFloor = Object.values(byConcurrency).some((cells) => cells[FLOOR_NAME] !== undefined);
    const tpColumns = hasFloor ? [...columns, FLOOR_NAME] : columns;
    const tpOthers = tpColumns.filter((n) => n !== 'fenced');
    const hasIo = Object.values(byConcurrency).some((cells) =>
      Object.values(cells).some((cell) => cell.redisReadsPerCycle !== undefined),
    );
    out.push(
      `### 1. Uncontended acquire+release throughput`,
      '',
      ...chart('throughput'),
      `Cycles per second (higher is better), median of ${results.runs} runs of ${num(r.throughput.durationMsPerRun / 1_000, 1)} s [min–max]. Each worker cycles over its own 100 resources.` +
        (hasFloor
          ? ` "${FLOOR_NAME}" is not a lock: the same Redis writes per cycle with nothing else (bench/suite/scenarios/floor.ts), the nodes' limit; fenced ÷ ${FLOOR_NAME} is how close fenced comes to it.`
          : ''),
      '',
      table(
        ['concurrency', ...tpColumns, ...tpOthers.map((p) => `fenced ÷ ${p}`)],
        Object.entries(byConcurrency).map(([c, cells]) => [
          c,
          ...tpColumns.map((n) => {
            const cell = cells[n];
            if (cell === undefined) return '–';
            return `${num(cell.median)} [${num(cell.min)}–${num(cell.max)}]${cell.errors > 0 ? ` (${cell.errors} errors)` : ''}`;
          }),
          ...tpOthers.map((p) => ratio(cells.fenced?.median, cells[p]?.median)),
        ]),
      ),
      '',
      `CPU time per cycle, µs (median of the runs): this client process / the five Redis servers together (for a fencing peer with its own server, that server); and the bytes one cycle appends to each node's AOF (all of it fsynced before the reply)` +
        (hasIo
          ? `; then, per node and cycle, the socket reads the node processed (each one batch of a client's commands arriving: round trips) and the commands it ran (a script's inner calls included).`
          : '.'),
      '',
      table(
        ['concurrency', ...tpColumns],
        Object.entries(byConcurrency).map(([c, cells]) => [
          c,
          ...tpColumns.map((n) => {
            const cell = cells[n];
            if (cell === undefined) return '–';
            const io =
              cell.redisReadsPerCycle === undefined
                ? ''
                : `; ${num(cell.redisReadsPerCycle, 2)} reads, ${num(cell.redisCommandsPerCycle, 1)} commands`;
            if (cell.serverCpuUsPerCycle !== undefined) {
              // A fencing peer with its own server: that server's CPU, not the idle Redis nodes'.
              return `${num(cell.clientCpuUsPerCycle)} / ${num(cell.serverCpuUsPerCycle)} µs (${cell.serverCpuOf ?? 'its server'})`;
            }
            return `${num(cell.clientCpuUsPerCycle)} / ${num(cell.redisCpuUsPerCycle)} µs, ${num(cell.aofBytesPerCycle)} B${io}`;
          }),
        ]),
      ),
      '',
    );
    const profiled = Object.entries(byConcurrency).flatMap(([c, cells]) =>
      tpColumns.flatMap((n) => {
        const profile = cells[n]?.clientProfile;
        return profile === undefined ? [] : [{ c, n, profile }];
      }),
    );
    if (profiled.length > 0) {
      const areas = PROFILE_AREAS.filter(
        (area) =>
          area !== 'idle' && profiled.some(({ profile }) => (profile.onBehalfUsPerCycle[area] ?? 0) >= 0.5),
      );
      out.push(
        `Where this process's CPU went per cycle (\`--cpu-prof\`: the bench profiled itself during every measured run; µs of samples per cycle, medians of the runs; node's own time counted for its nearest caller, so socket writes count for ioredis; "other code" is the bench's own, and the floor's client). Profiling slows the client: read these for the "where".`,
        '',
        table(
          ['concurrency', 'library', 'sampled µs/cycle', ...areas],
          profiled.map(({ c, n, profile }) => [
            c,
            n,
            num(profile.busyUsPerCycle, 1),
            ...areas.map((area) => num(profile.onBehalfUsPerCycle[area] ?? 0, 1)),
          ]),
        ),
        '',
      );
    }
  }
  if (r.latency !== undefined) {
    const lat = r.latency.byLibrary;
    out.push(
      `### 2. Latency at concurrency 1`,
      '',
      ...chart('latency'),
      `Milliseconds (lower is better); median over ${results.runs} runs of ${num(r.latency.samplesPerRun)} acquire+release cycles each (p99.9 pooled over all runs in brackets).`,
      '',
      table(
        [
          'library',
          'acquire p50',
          'acquire p99',
          'acquire p99.9',
          'release p50',
          'release p99',
          'fenced ÷ library (acquire p50)',
        ],
        columns
          .filter((n) => lat[n] !== undefined)
          .map((n) => {
            const cell = lat[n]!;
            return [
              n,
              num(cell.acquire.p50, 3),
              num(cell.acquire.p99, 3),
              `${num(cell.acquire.p999, 3)} [${num(cell.acquirePooled.p999, 3)}]`,
              num(cell.release.p50, 3),
              num(cell.release.p99, 3),
              n === 'fenced' ? '' : ratio(lat.fenced?.acquire.p50, cell.acquire.p50),
            ];
          }),
      ),
      '',
    );
  }
  if (r.handoff !== undefined) {
    const handoff = r.handoff;
    out.push(
      `### 3. Contended hand-off`,
      '',
      ...chart('handoff'),
      `K waiters on one resource, each holds it ${handoff.holdMs} ms once granted (the round's first holder ${handoff.settleMs ?? 100} ms, while the waiters start waiting: with K = 1 every hand-off measured is that first one); milliseconds from the holder's release call to the next holder's grant (lower is better); median over ${results.runs} runs of ${handoff.handoffsPerRun} hand-offs (max: over all runs).`,
      '',
      table(
        ['K', 'library', 'waits by', 'p50', 'p99', 'max', 'fenced ÷ library (p50)'],
        Object.entries(handoff.byWaiters).flatMap(([waiters, cells]) =>
          Object.keys(cells).map((n) => {
            const cell = cells[n]!;
            return [
              waiters,
              n,
              cell.waitStrategy,
              num(cell.gap.p50, 2),
              num(cell.gap.p99, 2),
              num(cell.gapPooled.max, 2),
              n === 'fenced' || n === FENCED_ELSEWHERE ? '' : ratio(cells.fenced?.gap.p50, cell.gap.p50),
            ];
          }),
        ),
      ),
      '',
    );
  }
  if (r.scale !== undefined) {
    const scaleHasFloor = Object.values(r.scale.byLevel).some((cells) => cells[FLOOR_NAME] !== undefined);
    const scaleColumns = scaleHasFloor ? [...columns, FLOOR_NAME] : columns;
    const scaleNames = new Set(Object.values(r.scale.byLevel).flatMap((cells) => Object.keys(cells)));
    const folders = [...scaleNames].filter((n) => n === 'fenced' || n.startsWith('fenced@'));
    // Before the scenario stopped the others' background work during a library's pass, fenced's coordinator folded
    // on through every other library's passes.
    const sharedFolding =
      r.scale.onlyOwnBackground === true
        ? " Each library's passes ran with the other libraries' background work stopped (fenced's coordinators closed: no fold passes)."
        : folders.length > 0 && scaleNames.size > 1
          ? ` The libraries shared this run: ${folders.join(' and ')} kept running ${folders.length > 1 ? 'their' : 'its'} fold passes in the background during the other libraries' passes too (scanning their keys, and folding ${folders.length > 1 ? 'their' : 'its'} own idle registers), so at large levels every figure here includes that work.`
          : '';
    out.push(
      `### 4. Scale: many distinct resources`,
      '',
      ...chart('scale'),
      `Each pass acquires N new resources at concurrency ${r.scale.concurrency} and holds them all, then releases them all. Bytes are INFO used_memory deltas per resource, per node (the cluster holds 5×). "idle" is after the release, which leaves what expiry would. CPU and GC are per acquire+release cycle over the pass's acquire and release phases: the bench process, the five nodes together (INFO cpu), and this process's collector pauses. Each phase is capped at ${num(r.scale.phaseCapMs / 1_000)} s${results.kind === 'quick' ? '' : ' (acquire) / twice that (release)'}.` +
        (scaleHasFloor
          ? ` "${FLOOR_NAME}" is not a lock: the same Redis writes per cycle with nothing else (bench/suite/scenarios/floor.ts), so its decline from few to many resources is the nodes' own. It holds 2 keys per resource (lease and register) and leaves 1 (the register: nothing folds it, so the run deletes them after each of its passes, once measured).`
          : '') +
        sharedFolding,
      '',
      table(
        [
          'resources',
          'library',
          'reached',
          'acquires/s',
          'releases/s',
          'cycles/s',
          'bytes/resource held',
          'bytes/resource idle',
          'client CPU µs/cycle',
          'Redis CPU µs/cycle',
          'GC µs/cycle',
        ],
        Object.entries(r.scale.byLevel).flatMap(([level, cells]) =>
          scaleColumns
            .filter((n) => cells[n] !== undefined)
            .map((n) => {
              const c = cells[n]!;
              return [
                num(Number(level)),
                n,
                `${num(c.reached)}${c.stoppedAtCap ? ' (cap)' : ''}`,
                num(c.acquirePerSecond),
                num(c.releasePerSecond),
                num(c.cyclesPerSecond),
                num(c.heldBytesPerResource, 1),
                num(c.idleBytesPerResource, 1),
                num(c.clientCpuUsPerCycle),
                num(c.redisCpuUsPerCycle),
                num(c.gcUsPerCycle),
              ];
            }),
        ),
      ),
      '',
    );
    const retained = Object.entries(r.scale.byLevel).flatMap(([level, cells]) =>
      Object.entries(cells).flatMap(([name, c]) =>
        c.afterRetention === undefined ? [] : [{ level, name, c, after: c.afterRetention }],
      ),
    );
    if (retained.length > 0) {
      const first = retained[0]!.after;
      out.push(
        `After the retention: ${retained[0]!.name} runs with \`tokenRetentionMs\` ${num(first.retentionMs / 1_000)} s (a fold pass every ${num(first.foldIntervalMs / 1_000, 1)} s). After ${r.scale.foldWait === 'last-level' ? 'the last level' : 'each level'} the run waits the retention from the library's last pass, then until the nodes' key count stops falling, and reads memory and keys again; deltas from before ${r.scale.foldWait === 'last-level' ? 'the first level' : 'the level'}, per resource the library used in ${r.scale.foldWait === 'last-level' ? 'all levels' : 'it'} (every run), per node. Held and idle are the medians of the passes above.`,
        '',
        table(
          [
            'resources',
            'library',
            'bytes/resource held',
            'idle',
            'after the retention',
            'keys/resource held',
            'idle',
            'after the retention',
            'left per node',
            'waited',
          ],
          retained.map(({ level, name, c, after }) => [
            after.levels.length > 1 ? after.levels.map((l) => num(l)).join(' + ') : num(Number(level)),
            name,
            // Held and idle are per level; after several levels only the after-retention figure covers them all.
            after.levels.length > 1 ? '–' : num(c.heldBytesPerResource, 1),
            after.levels.length > 1 ? '–' : num(c.idleBytesPerResource, 1),
            num(after.bytesPerResource, 1),
            after.levels.length > 1 ? '–' : num(c.heldKeysPerResource, 2),
            after.levels.length > 1 ? '–' : num(c.idleKeysPerResource, 2),
            num(after.keysPerResource, 4),
            `${num(after.bytesPerNode / 1_024, 1)} KiB, ${num(after.keysPerNode)} keys`,
            `${num(after.waitedMs / 1_000, 1)} s (${after.endedBy})`,
          ]),
        ),
        '',
      );
    }
  }
  if (r.guarded !== undefined) {
    const guarded = r.guarded;
    const earlier = guarded.baseline === undefined ? undefined : `guarded@${guarded.baseline.ref}`;
    out.push(
      `### 5. Guarded write vs plain write (Postgres)`,
      '',
      `\`${guarded.statement}\` in a ${guarded.isolation} transaction; guarded = \`GuardedStore.run\` (fence statement + the same UPDATE). Median of ${results.runs} runs.` +
        (guarded.baseline === undefined
          ? ''
          : ` ${earlier} is the guarded store of ${guarded.baseline.ref} (commit ${guarded.baseline.commit.slice(0, 7)}), its own pool and schema, interleaved with the other two in the same run; its ratio is over the same plain runs.`),
      '',
      table(
        [
          'concurrency',
          'plain writes/s',
          'guarded writes/s',
          'time per write, guarded ÷ plain',
          ...(earlier === undefined ? [] : [`${earlier} writes/s`, `${earlier} ÷ plain`]),
          'plain p50 ms',
          'guarded p50 ms',
          'plain p99 ms',
          'guarded p99 ms',
        ],
        Object.entries(guarded.byConcurrency).map(([c, cell]) => [
          c,
          `${num(cell.plain.medianPerSecond)} [${num(cell.plain.min)}–${num(cell.plain.max)}]`,
          `${num(cell.guarded.medianPerSecond)} [${num(cell.guarded.min)}–${num(cell.guarded.max)}]`,
          `${cell.costRatio.toFixed(3)}×`,
          ...(earlier === undefined
            ? []
            : cell.baseline === undefined
              ? ['–', '–']
              : [
                  `${num(cell.baseline.medianPerSecond)} [${num(cell.baseline.min)}–${num(cell.baseline.max)}]`,
                  `${cell.baseline.costRatio.toFixed(3)}×`,
                ]),
          num(cell.plain.p50Ms, 3),
          num(cell.guarded.p50Ms, 3),
          num(cell.plain.p99Ms, 3),
          num(cell.guarded.p99Ms, 3),
        ]),
      ),
      '',
    );
  }
  if (r.http !== undefined) out.push(...httpSection(results, r.http));
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

/** Scenario 6: the service as a process against a canned node:http server, load from a third process. */
function httpSection(results: BenchResults, http: HttpResult): string[] {
  const library = results.results.throughput?.byConcurrency;
  const libraryAt = (c: string): string => {
    const cell = library?.[c]?.fenced;
    return cell === undefined ? 'not in this run' : num(cell.median);
  };
  // Results written before the scenario counted the nodes' reads and commands have no such column.
  const hasHttpIo = Object.values(http.byConcurrency).some(
    ({ service }) => service.redisReadsPerCycle !== undefined,
  );
  const out: string[] = [
    `### 6. Lease grants through the HTTP service, against a raw node:http server`,
    '',
    `Cycles per second (a POST that grants a lease, then the DELETE that releases it; higher is better), median of ${results.runs} interleaved runs [min–max]. ` +
      `Service: \`${http.service}\`, its own process on the five nodes. Canned: ${http.canned}, its own process. ` +
      `Load: ${http.client}. "Library" is scenario 1's in-process fenced figure at the same concurrency, from the same run.`,
    '',
    table(
      [
        'concurrency',
        'service cycles/s',
        'canned node:http cycles/s',
        'service ÷ canned',
        'service POST p50 / p99 ms',
        'canned POST p50 / p99 ms',
        'library cycles/s (scenario 1)',
      ],
      Object.entries(http.byConcurrency).map(([c, { service, canned, ratio: x }]) => [
        c,
        `${num(service.medianPerSecond)} [${num(service.min)}–${num(service.max)}]${service.errors > 0 ? ` (${service.errors} errors)` : ''}`,
        `${num(canned.medianPerSecond)} [${num(canned.min)}–${num(canned.max)}]${canned.errors > 0 ? ` (${canned.errors} errors)` : ''}`,
        `${x.toFixed(2)}×`,
        `${num(service.grantP50Ms, 3)} / ${num(service.grantP99Ms, 3)}`,
        `${num(canned.grantP50Ms, 3)} / ${num(canned.grantP99Ms, 3)}`,
        libraryAt(c),
      ]),
    ),
    '',
    `CPU time per cycle, µs (median of the runs): the server process (/proc/<pid>/stat, all its threads), the load generator (its \`process.cpuUsage\`), and the five Redis servers together (INFO cpu, service runs only)${hasHttpIo ? "; then, per node and cycle of the service, the socket reads the node processed (each one batch of a client's commands arriving) and the commands it ran (a script's inner calls included), as in scenario 1" : ''}.`,
    '',
    table(
      [
        'concurrency',
        'service process',
        'canned process',
        'load generator (service / canned runs)',
        'Redis, 5 nodes',
        ...(hasHttpIo ? ['per node: reads, commands'] : []),
      ],
      Object.entries(http.byConcurrency).map(([c, { service, canned }]) => [
        c,
        num(service.serverCpuUsPerCycle),
        num(canned.serverCpuUsPerCycle),
        `${num(service.loadCpuUsPerCycle)} / ${num(canned.loadCpuUsPerCycle)}`,
        num(service.redisCpuUsPerCycle),
        ...(hasHttpIo
          ? [`${num(service.redisReadsPerCycle, 2)} reads, ${num(service.redisCommandsPerCycle, 1)} commands`]
          : []),
      ]),
    ),
    '',
  ];
  const profile = http.profile;
  if (profile !== undefined) {
    const concurrencies = Object.keys(profile.byConcurrency);
    const areas = PROFILE_AREAS.filter(
      (area) =>
        area !== 'idle' && concurrencies.some((c) => (profile.byConcurrency[c]?.usPerCycle[area] ?? 0) > 0),
    );
    out.push(
      `Where the service's CPU goes (the run was profiled: \`node --cpu-prof\`, sampling every 1 ms, which slows the service a little): self time per area, µs per cycle, over ${profile.counted === 'measured runs' ? 'the measured runs of each concurrency' : 'the whole life of the service (start-up and warm-up included: the profile clock did not match)'}. Areas by script path: node_modules/<package>/, packages/coordinator/src/http/ and server.ts (fenced http layer), the rest of packages/coordinator/src/ (fenced coordinator); "node internals" are node: modules and native frames (sockets, HTTP parser, JSON, promises); the right-hand columns credit that time to the nearest caller outside node (a socket write ioredis asked for counts as ioredis; what nobody asked for, such as the event loop, stays node internals). A sample stands for the wall time to the next one, so on a busy machine, where the service waits for a core, "sampled, not idle" exceeds the CPU time /proc counts; read the areas as shares of it.`,
      '',
      table(
        [
          'area',
          ...concurrencies.map((c) => `self µs/cycle at c${c}`),
          ...concurrencies.map((c) => `node's time credited to its caller, c${c}`),
        ],
        [
          ...areas.map((area) => [
            area,
            ...concurrencies.map((c) => num(profile.byConcurrency[c]?.usPerCycle[area], 1)),
            ...concurrencies.map((c) => num(profile.byConcurrency[c]?.onBehalfUsPerCycle?.[area], 1)),
          ]),
          [
            '**sampled, not idle**',
            ...concurrencies.map((c) => `**${num(profile.byConcurrency[c]?.busyUsPerCycle, 1)}**`),
            ...concurrencies.map((c) => `**${num(profile.byConcurrency[c]?.busyUsPerCycle, 1)}**`),
          ],
        ],
      ),
      '',
    );
    const top = concurrencies[concurrencies.length - 1];
    const cell = top === undefined ? undefined : profile.byConcurrency[top];
    if (cell !== undefined && cell.topFunctions.length > 0) {
      out.push(
        `The most expensive functions at c${top} (self time, µs per cycle):`,
        '',
        table(
          ['function', 'area', 'µs/cycle'],
          cell.topFunctions.map((f) => [
            `\`${f.name.replaceAll('|', '\\|')}\``,
            f.area,
            num(f.usPerCycle, 1),
          ]),
        ),
        '',
      );
    }
  }
  return out;
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
