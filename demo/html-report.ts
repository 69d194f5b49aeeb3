import { demoHeadline, type Grant, type RunAnalysis, type Tone } from './analysis.js';
import type { ActionRecord, Lane } from './run-record.js';
import type { Scenario } from './scenarios.js';
import { MODE_DESCRIPTIONS, describeRun, runMark } from './terminal-report.js';
import { compressedTimeScale } from './time-scale.js';

/** What the report shows besides the runs. */
export interface ReportContext {
  readonly generatedAt: Date;
  readonly environment: readonly string[];
  readonly skipped: readonly { id: string; why: string }[];
  readonly seconds: number;
}

const LANES: readonly Lane[] = ['A', 'B', 'system'];
const LANE_TITLES: Readonly<Record<Lane, string>> = { A: 'worker A', B: 'worker B', system: 'Redis / net' };
const COLOURS = {
  A: '#1f6fb2',
  B: '#8e44ad',
  good: '#2e9e44',
  bad: '#d62728',
  hold: '#f28e2b',
  cutoff: '#8c564b',
  pause: '#6b6b6b',
  muted: '#888888',
} as const;

const SVG_WIDTH = 980;
const GUTTER = 92;
const RIGHT = 24;
const AXIS = 26;
const LANE_HEIGHT = 88;
const CHAR_WIDTH = 6.3;
const CHAR_WIDTH_BOLD = 7;

/** Escapes text for HTML and XML alike (the report is well-formed XML, so it can be checked by a parser). */
export function escapeXml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

const n = (value: number): string => (Math.round(value * 10) / 10).toString();

interface Label {
  readonly x: number;
  readonly text: string;
  readonly colour: string;
  readonly weight?: 'bold';
}

/** Places labels in rows above and below a lane's centre so that they do not overlap, left to right. */
class LabelRows {
  private readonly pending: Label[] = [];

  constructor(private readonly centre: number) {}

  add(label: Label): void {
    this.pending.push(label);
  }

  layout(): { x: number; y: number; label: Label }[] {
    const rows = [-15, 27, -28, 40].map((dy) => ({ y: this.centre + dy, taken: [] as [number, number][] }));
    return [...this.pending]
      .sort((a, b) => a.x - b.x)
      .map((label) => {
        const width = label.text.length * (label.weight ? CHAR_WIDTH_BOLD : CHAR_WIDTH);
        const x = Math.min(label.x, SVG_WIDTH - RIGHT - width);
        const from = x - 3;
        const to = x + width + 3;
        const row =
          rows.find((r) => r.taken.every(([a, b]) => to < a || from > b)) ??
          rows.reduce((best, r) => (r.taken.length < best.taken.length ? r : best));
        row.taken.push([from, to]);
        return { x, y: row.y, label };
      });
  }
}

/** The SVG timeline of one run: a lane per worker and one for Redis and the network. */
export function renderRunSvg(a: RunAnalysis): string {
  const { record } = a;
  const lanes = LANES.filter(
    (lane) => lane !== 'system' || record.actions.some((act) => act.lane === 'system'),
  );
  const instants = [
    ...record.ops.flatMap((o) => [o.outcome.startedAt, o.outcome.endedAt]),
    ...record.actions.flatMap((act) => (act.until === undefined ? [act.t] : [act.t, act.until])),
    ...a.grants.flatMap((g) => [g.grantedAt, g.validUntil, g.heldUntil]),
  ];
  const scale = compressedTimeScale(
    instants,
    record.startedAt,
    record.endedAt,
    GUTTER,
    SVG_WIDTH - GUTTER - RIGHT,
  );
  const x = scale.x;
  const height = AXIS + lanes.length * LANE_HEIGHT + 14;
  const laneTop = (lane: Lane): number => AXIS + lanes.indexOf(lane) * LANE_HEIGHT;
  const centre = (lane: Lane): number => laneTop(lane) + LANE_HEIGHT / 2;
  const rows = new Map<Lane, LabelRows>(lanes.map((l) => [l, new LabelRows(centre(l))]));
  const label = (lane: Lane, l: Label): void => rows.get(lane)!.add(l);

  const back: string[] = [];
  const middle: string[] = [];
  const front: string[] = [];

  // Lanes and the time axis: ticks at the start, after every break and at the end; breaks drawn as such.
  lanes.forEach((lane, i) => {
    const top = laneTop(lane);
    back.push(
      `<rect x="0" y="${top}" width="${SVG_WIDTH}" height="${LANE_HEIGHT}" fill="${i % 2 === 0 ? '#f7f7f9' : '#ffffff'}"/>`,
      `<text x="10" y="${centre(lane) + 4}" class="lane" fill="${lane === 'system' ? '#555' : COLOURS[lane]}">${escapeXml(LANE_TITLES[lane])}</text>`,
    );
  });
  for (const tick of scale.ticks) {
    back.push(
      `<line x1="${n(tick.x)}" y1="${AXIS - 4}" x2="${n(tick.x)}" y2="${height - 8}" stroke="#e3e3e8"/>`,
      `<text x="${n(tick.x)}" y="${AXIS - 9}" class="tick" text-anchor="middle">${Math.round(tick.ms)} ms</text>`,
    );
  }
  for (const b of scale.breaks) {
    const mid = (b.x1 + b.x2) / 2;
    back.push(
      `<rect x="${n(b.x1 + 6)}" y="${AXIS - 2}" width="${n(Math.max(0, b.x2 - b.x1 - 12))}" height="${height - AXIS - 6}" fill="#ffffff" fill-opacity="0.55"/>`,
      `<path d="M ${n(mid - 7)} ${AXIS + 2} l 6 -10 M ${n(mid + 1)} ${AXIS + 2} l 6 -10" stroke="#999" stroke-width="1.4"/>`,
      `<text x="${n(mid)}" y="${height - 1}" class="tick" text-anchor="middle">≈ ${Math.round(b.ms)} ms</text>`,
    );
  }

  // Spans: pauses and held bytes on a worker's lane, a cut-off on the Redis / network lane.
  for (const act of record.actions) spanOf(act, x, laneTop, centre, back, label, record.endedAt);

  // Leases: solid while valid, hatched while the holder only believes it still holds the lock.
  for (const g of a.grants) leaseBar(g, x, centre, middle, label);

  // Acquires that waited or failed: a thin line for the wait, a cross for a discarded grant.
  for (const o of record.ops) {
    if (o.op !== 'acquire') continue;
    const y = centre(o.worker) + 14;
    const x1 = x(o.outcome.startedAt);
    const x2 = x(o.outcome.endedAt);
    if (x2 - x1 > 3)
      middle.push(
        `<line x1="${n(x1)}" y1="${y}" x2="${n(x2)}" y2="${y}" stroke="${COLOURS.muted}" stroke-dasharray="2 2"/>`,
      );
    if (!o.outcome.ok) {
      front.push(cross(x2, centre(o.worker), COLOURS.muted));
      label(o.worker, { x: x2 + 6, text: 'no lease: grant discarded', colour: COLOURS.muted });
    }
  }

  // Reads: a small diamond with the value seen.
  for (const o of record.ops) {
    if (o.op !== 'read') continue;
    const cx = x(o.outcome.endedAt);
    const cy = centre(o.worker);
    front.push(
      `<path d="M ${n(cx)} ${cy - 5} l 5 5 l -5 5 l -5 -5 z" fill="#ffffff" stroke="#444" stroke-width="1.2"/>`,
    );
    label(o.worker, {
      x: cx - 3,
      text: o.outcome.ok ? `read ${o.outcome.value}` : 'read refused',
      colour: '#444',
    });
  }

  // Writes: green committed, red stale write accepted, a green ring with a cross for a refused stale write.
  for (const w of a.writes) {
    const cx = x(w.endedAt);
    const cy = centre(w.worker);
    const x1 = x(w.startedAt);
    if (cx - x1 > 4)
      middle.push(
        `<line x1="${n(x1)}" y1="${cy}" x2="${n(cx)}" y2="${cy}" stroke="#555" stroke-width="1.5" stroke-dasharray="5 3"/>`,
      );
    switch (w.status) {
      case 'committed':
        front.push(
          `<circle cx="${n(cx)}" cy="${cy}" r="7" fill="${COLOURS.good}" stroke="#fff" stroke-width="1.5"/>`,
        );
        label(w.worker, { x: cx - 3, text: `write ${w.value} ✓`, colour: COLOURS.good });
        break;
      case 'stale-accepted':
        front.push(
          `<circle cx="${n(cx)}" cy="${cy}" r="8" fill="${COLOURS.bad}" stroke="#fff" stroke-width="1.5"/>`,
          `<text x="${n(cx)}" y="${cy + 4}" class="bang" text-anchor="middle">!</text>`,
        );
        label(w.worker, {
          x: cx - 3,
          text: `stale write ${w.value} accepted`,
          colour: COLOURS.bad,
          weight: 'bold',
        });
        break;
      case 'forged-accepted':
        front.push(
          `<circle cx="${n(cx)}" cy="${cy}" r="8" fill="${COLOURS.bad}" stroke="#fff" stroke-width="1.5"/>`,
          `<text x="${n(cx)}" y="${cy + 4}" class="bang" text-anchor="middle">!</text>`,
        );
        label(w.worker, {
          x: cx - 3,
          text: `forged token accepted: fence at the maximum`,
          colour: COLOURS.bad,
          weight: 'bold',
        });
        break;
      case 'refused':
        front.push(
          `<circle cx="${n(cx)}" cy="${cy}" r="8" fill="#fff" stroke="${COLOURS.good}" stroke-width="2.5"/>`,
          cross(cx, cy, COLOURS.good),
        );
        label(w.worker, {
          x: cx - 3,
          text: `write ${w.value} refused${w.via === 'http' ? ' (409)' : ''}`,
          colour: COLOURS.good,
          weight: 'bold',
        });
        break;
      case 'failed':
        front.push(cross(cx, cy, COLOURS.muted));
        label(w.worker, { x: cx - 3, text: `write ${w.value} failed`, colour: COLOURS.muted });
        break;
    }
  }

  const labels = [...rows.values()].flatMap((r) =>
    r
      .layout()
      .map(
        ({ x: lx, y, label: l }) =>
          `<text x="${n(lx)}" y="${n(y)}" class="label" fill="${l.colour}"${l.weight ? ' font-weight="bold"' : ''}>${escapeXml(l.text)}</text>`,
      ),
  );
  const title = `${record.scenario} ${record.mode}: ${a.verdict.label}`;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 ${SVG_WIDTH} ${height}" width="${SVG_WIDTH}" height="${height}" role="img" aria-label="${escapeXml(title)}">`,
    `<title>${escapeXml(title)}</title>`,
    DEFS,
    ...back,
    ...middle,
    ...front,
    ...labels,
    '</svg>',
  ].join('\n');
}

const DEFS = `<defs>
<pattern id="hatch-A" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff"/><line x1="0" y1="0" x2="0" y2="6" stroke="${COLOURS.A}" stroke-width="2.2"/></pattern>
<pattern id="hatch-B" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff"/><line x1="0" y1="0" x2="0" y2="6" stroke="${COLOURS.B}" stroke-width="2.2"/></pattern>
<pattern id="hatch-pause" patternUnits="userSpaceOnUse" width="8" height="8" patternTransform="rotate(-45)"><line x1="0" y1="0" x2="0" y2="8" stroke="${COLOURS.pause}" stroke-width="1.5" stroke-opacity="0.55"/></pattern>
</defs>`;

function cross(cx: number, cy: number, colour: string): string {
  return `<path d="M ${n(cx - 4)} ${n(cy - 4)} L ${n(cx + 4)} ${n(cy + 4)} M ${n(cx + 4)} ${n(cy - 4)} L ${n(cx - 4)} ${n(cy + 4)}" stroke="${colour}" stroke-width="2.2"/>`;
}

function leaseBar(
  g: Grant,
  x: (t: number) => number,
  centre: (lane: Lane) => number,
  out: string[],
  label: (lane: Lane, l: Label) => void,
): void {
  const colour = COLOURS[g.worker];
  const y = centre(g.worker) - 8;
  const from = x(g.grantedAt);
  const validTo = Math.max(from, x(Math.min(g.validUntil, g.heldUntil)));
  const beliefTo = x(g.heldUntil);
  if (validTo - from > 0.5) {
    out.push(
      `<rect x="${n(from)}" y="${y}" width="${n(validTo - from)}" height="16" rx="3" fill="${colour}" fill-opacity="0.85"/>`,
    );
    label(g.worker, { x: from, text: g.label, colour, weight: 'bold' });
  }
  if (beliefTo - validTo > 0.5) {
    out.push(
      `<rect x="${n(validTo)}" y="${y}" width="${n(beliefTo - validTo)}" height="16" rx="3" fill="url(#hatch-${g.worker})" stroke="${colour}" stroke-dasharray="4 2"/>`,
    );
    if (validTo - from <= 0.5)
      label(g.worker, { x: validTo, text: `${g.label} (already expired)`, colour, weight: 'bold' });
  }
}

function spanOf(
  act: ActionRecord,
  x: (t: number) => number,
  laneTop: (lane: Lane) => number,
  centre: (lane: Lane) => number,
  out: string[],
  label: (lane: Lane, l: Label) => void,
  end: number,
): void {
  const x1 = x(act.t);
  if (act.kind === 'clock' || act.kind === 'restart') {
    const top = laneTop(act.lane);
    const cy = centre(act.lane);
    out.push(
      `<line x1="${n(x1)}" y1="${top + 6}" x2="${n(x1)}" y2="${top + LANE_HEIGHT - 6}" stroke="${COLOURS.bad}" stroke-width="2"/>`,
      `<circle cx="${n(x1)}" cy="${cy}" r="7" fill="#fff" stroke="${COLOURS.bad}" stroke-width="2"/>`,
      act.kind === 'clock'
        ? `<path d="M ${n(x1)} ${cy - 4} L ${n(x1)} ${cy} L ${n(x1 + 3)} ${cy + 2}" stroke="${COLOURS.bad}" stroke-width="1.6" fill="none"/>`
        : `<rect x="${n(x1 - 2.5)}" y="${cy - 2.5}" width="5" height="5" fill="${COLOURS.bad}"/>`,
    );
    label(act.lane, {
      x: x1 + 10,
      text: act.short ?? (act.kind === 'clock' ? 'clock jump' : 'restarted empty'),
      colour: COLOURS.bad,
      weight: 'bold',
    });
    return;
  }
  if (act.kind === 'note') return;
  const x2 = x(act.until ?? end);
  const top = laneTop(act.lane) + 4;
  const h = LANE_HEIGHT - 8;
  const ms = Math.round((act.until ?? end) - act.t);
  if (act.kind === 'pause') {
    out.push(
      `<rect x="${n(x1)}" y="${top}" width="${n(Math.max(1, x2 - x1))}" height="${h}" fill="url(#hatch-pause)" stroke="${COLOURS.pause}" stroke-opacity="0.6"/>`,
    );
    label(act.lane, {
      x: x1 + 4,
      text: `${act.short ?? 'SIGSTOP'} ${ms} ms`,
      colour: '#444',
      weight: 'bold',
    });
  } else if (act.kind === 'hold') {
    out.push(
      `<rect x="${n(x1)}" y="${top}" width="${n(Math.max(1, x2 - x1))}" height="${h}" fill="${COLOURS.hold}" fill-opacity="0.16" stroke="${COLOURS.hold}"/>`,
    );
    label(act.lane, {
      x: x1 + 4,
      text: `${act.short ?? 'held in the network'} ${ms} ms`,
      colour: '#b35900',
      weight: 'bold',
    });
  } else if (act.kind === 'cutoff') {
    out.push(
      `<rect x="${n(x1)}" y="${top}" width="${n(Math.max(1, x2 - x1))}" height="${h}" fill="${COLOURS.cutoff}" fill-opacity="0.12" stroke="${COLOURS.cutoff}" stroke-dasharray="6 3"/>`,
    );
    label(act.lane, { x: x1 + 4, text: act.short ?? 'cut off', colour: COLOURS.cutoff, weight: 'bold' });
  }
}

const LEGEND = `<svg xmlns="http://www.w3.org/2000/svg" class="legend" viewBox="0 0 980 46" width="980" height="46" role="img" aria-label="legend">
${DEFS}
<rect x="4" y="6" width="34" height="14" rx="3" fill="${COLOURS.A}" fill-opacity="0.85"/><text x="44" y="17" class="label">lease, valid</text>
<rect x="128" y="6" width="34" height="14" rx="3" fill="url(#hatch-A)" stroke="${COLOURS.A}" stroke-dasharray="4 2"/><text x="168" y="17" class="label">expired, holder still believes it</text>
<rect x="356" y="4" width="34" height="18" fill="url(#hatch-pause)" stroke="${COLOURS.pause}" stroke-opacity="0.6"/><text x="396" y="17" class="label">SIGSTOP</text>
<rect x="456" y="4" width="34" height="18" fill="${COLOURS.hold}" fill-opacity="0.16" stroke="${COLOURS.hold}"/><text x="496" y="17" class="label">bytes held in the network</text>
<rect x="664" y="4" width="34" height="18" fill="${COLOURS.cutoff}" fill-opacity="0.12" stroke="${COLOURS.cutoff}" stroke-dasharray="6 3"/><text x="704" y="17" class="label">client cut off (blackhole)</text>
<path d="M 10 31 l 5 5 l -5 5 l -5 -5 z" fill="#fff" stroke="#444" stroke-width="1.2"/><text x="22" y="40" class="label">read</text>
<circle cx="78" cy="36" r="7" fill="${COLOURS.good}"/><text x="90" y="40" class="label">write committed</text>
<circle cx="204" cy="36" r="8" fill="${COLOURS.bad}"/><text x="204" y="40" class="bang" text-anchor="middle">!</text><text x="218" y="40" class="label">stale write accepted (data damaged)</text>
<circle cx="466" cy="36" r="8" fill="#fff" stroke="${COLOURS.good}" stroke-width="2.5"/>${cross(466, 36, COLOURS.good)}<text x="480" y="40" class="label">stale write refused by the fence</text>
<line x1="716" y1="36" x2="750" y2="36" stroke="${COLOURS.muted}" stroke-dasharray="2 2"/><text x="756" y="40" class="label">waiting for the lock</text>
</svg>`;

const STYLE = `
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222; margin: 24px auto; max-width: 1020px; padding: 0 12px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; margin: 34px 0 4px; border-bottom: 2px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 2px; }
.story, .env, .mode { color: #555; }
.verdict { margin: 4px 0 6px; font-weight: 600; }
.pass-anomaly { color: #a05a00; } .pass-safe { color: #2e7d32; } .fail { color: #c62828; }
table.summary { border-collapse: collapse; margin: 12px 0; }
table.summary td, table.summary th { border-bottom: 1px solid #e5e5e5; padding: 4px 10px; text-align: left; vertical-align: top; }
table.summary td:nth-child(-n + 3) { white-space: nowrap; }
table.events { border-collapse: collapse; font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
table.events td { padding: 1px 8px; vertical-align: top; }
.tone-good { color: #2e7d32; } .tone-bad { color: #c62828; font-weight: bold; } .tone-warn { color: #a05a00; } .tone-muted { color: #888; }
svg text.lane { font: bold 13px system-ui, sans-serif; }
svg text.tick { font: 10px system-ui, sans-serif; fill: #777; }
svg text.label { font: 11px system-ui, sans-serif; }
svg text.bar { font: bold 10px system-ui, sans-serif; fill: #fff; }
svg text.bang { font: bold 12px system-ui, sans-serif; fill: #fff; }
svg text.bolt { font: 14px system-ui, sans-serif; fill: #d62728; }
ul.findings { margin: 4px 0 8px; color: #444; }
details { margin: 4px 0 12px; }
`;

/** The whole report: a summary, then per scenario its story and one SVG timeline per run. Well-formed XML. */
export function renderHtmlReport(
  scenarios: readonly Scenario[],
  analyses: readonly RunAnalysis[],
  context: ReportContext,
): string {
  const failed = analyses.filter((a) => !a.verdict.passed).length;
  const headline = demoHeadline(analyses);
  const titles = new Map(scenarios.map((s) => [s.id, s.title]));
  const summaryRows = analyses
    .map((a) => {
      const v = a.verdict;
      const cls = markClass(a);
      const id = a.record.scenario;
      return `<tr><td><a href="#${escapeXml(id)}">${escapeXml(id)}</a> ${escapeXml(titles.get(id) ?? '')}</td><td>${a.record.mode}</td><td class="${cls}">${runMark(a)} ${escapeXml(v.label)}</td><td>${escapeXml(v.headline)}</td></tr>`;
    })
    .join('\n');
  const skippedRows = context.skipped
    .map(
      (s) =>
        `<tr><td>${escapeXml(s.id)} ${escapeXml(titles.get(s.id) ?? '')}</td><td></td><td>skipped</td><td>${escapeXml(s.why)}</td></tr>`,
    )
    .join('\n');
  const sections = scenarios
    .map((s) => {
      const runs = analyses.filter((a) => a.record.scenario === s.id);
      if (runs.length === 0) return '';
      return `<section id="${escapeXml(s.id)}">
<h2>${escapeXml(s.id)} · ${escapeXml(s.title)}</h2>
<p class="story">${escapeXml(s.story)}</p>
${runs.map(renderRun).join('\n')}
</section>`;
    })
    .join('\n');
  return `<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" lang="en">
<head>
<meta charset="utf-8"/>
<title>fenced demo: stale writes with and without fencing tokens</title>
<style>${STYLE}</style>
</head>
<body>
<h1>fenced — what a lock alone cannot promise</h1>
${headline.scenarios > 0 ? `<p class="headline ${headline.fencedLost === 0 ? 'pass-safe' : 'fail'}"><b>${escapeXml(headline.text.charAt(0).toUpperCase() + headline.text.slice(1))}.</b></p>` : ''}
<p class="env">Generated ${escapeXml(context.generatedAt.toISOString())} by <code>npm run demo</code> in ${context.seconds.toFixed(1)} s. ${context.environment.map(escapeXml).join(' · ')}</p>
<p>Each scenario runs twice with the same orchestration: <b>unprotected</b> (${escapeXml(MODE_DESCRIPTIONS.unprotected)}) must lose data; <b>fenced</b> (${escapeXml(MODE_DESCRIPTIONS.fenced)}; in F3 through the fencedWrites middleware) must refuse the stale write and keep the data intact. Verdicts come from the recorded history, checked by the commit-order and lost-update checkers.</p>
<p class="${failed === 0 ? 'pass-safe' : 'fail'}"><b>${failed === 0 ? `All ${analyses.length} runs behaved as expected.` : `${failed} of ${analyses.length} runs did not behave as expected.`}</b></p>
<table class="summary">
<tr><th>scenario</th><th>run</th><th>data (✗ lost, ✔ intact) and verdict</th><th></th></tr>
${summaryRows}
${skippedRows}
</table>
${LEGEND}
${sections}
</body>
</html>
`;
}

function renderRun(a: RunAnalysis): string {
  const v = a.verdict;
  const cls = markClass(a);
  const rows = a.timeline
    .map(
      (e) =>
        `<tr><td>+${Math.round(e.t - a.record.startedAt)} ms</td><td>${e.lane === 'system' ? 'sys' : e.lane}</td><td class="tone-${toneClass(e.tone)}">${escapeXml(e.text)}</td></tr>`,
    )
    .join('\n');
  return `<div class="run">
<h3>${escapeXml(a.record.mode)}</h3>
<p class="mode">${escapeXml(describeRun(a.record))}</p>
<p class="verdict ${cls}">${runMark(a)} ${escapeXml(v.label)} (expected: ${v.expectation}) — ${escapeXml(v.headline)}</p>
${renderRunSvg(a)}
<ul class="findings">${v.findings.map((f) => `<li>${escapeXml(f)}</li>`).join('')}</ul>
<details><summary>timeline (${a.timeline.length} events)</summary>
<table class="events">
${rows}
</table>
</details>
</div>`;
}

/** Red for a run whose data was lost or that did not show what it had to; green for data kept intact. */
function markClass(a: RunAnalysis): string {
  return runMark(a) === '✔' ? 'pass-safe' : 'fail';
}

function toneClass(tone: Tone): string {
  return tone === 'info' ? 'info' : tone;
}
