/**
 * A time axis with breaks: a run spends most of its time waiting (a pause, a lease running out) and the
 * story happens in a few bursts of milliseconds. Gaps between interesting instants longer than `linearMs`
 * are drawn at a fixed width and marked as breaks; shorter gaps keep their proportions, with a minimum
 * width so that instants a millisecond apart stay apart.
 */
export interface TimeScale {
  /** Absolute ms → x in px. Clamped to the run. */
  readonly x: (t: number) => number;
  /** The compressed gaps: where they are drawn, and how long they really were. */
  readonly breaks: readonly { readonly x1: number; readonly x2: number; readonly ms: number }[];
  /** Where to put tick labels: the start, both sides of every break, the end. Relative ms. */
  readonly ticks: readonly { readonly x: number; readonly ms: number }[];
}

export interface TimeScaleOptions {
  /** Gaps up to this long are drawn to scale. @defaultValue 80 */
  readonly linearMs?: number;
  /** Width of a break, in the same units as the gaps drawn to scale. @defaultValue 70 */
  readonly breakUnits?: number;
  /** Smallest width of a non-empty gap, same units. @defaultValue 8 */
  readonly minGapUnits?: number;
}

export function compressedTimeScale(
  instants: readonly number[],
  start: number,
  end: number,
  x0: number,
  width: number,
  options: TimeScaleOptions = {},
): TimeScale {
  const linearMs = options.linearMs ?? 80;
  const breakUnits = options.breakUnits ?? 70;
  const minGapUnits = options.minGapUnits ?? 8;
  const clamp = (t: number): number => Math.min(Math.max(t, start), end);
  const points = [...new Set([start, end, ...instants.map(clamp)])].sort((a, b) => a - b);
  const segments = points.slice(1).map((to, i) => {
    const from = points[i]!;
    const ms = to - from;
    const broken = ms > linearMs;
    const units = ms <= 0 ? 0 : broken ? breakUnits : Math.max(ms, minGapUnits);
    return { from, to, ms, units, broken };
  });
  const total = segments.reduce((sum, s) => sum + s.units, 0) || 1;
  const scale = width / total;
  let acc = 0;
  const placed = segments.map((s) => {
    const x1 = x0 + acc * scale;
    acc += s.units;
    return { ...s, x1, x2: x0 + acc * scale };
  });
  const x = (t: number): number => {
    const c = clamp(t);
    const s = placed.find((p) => c >= p.from && c <= p.to);
    if (!s || s.ms <= 0) return s ? s.x1 : x0;
    return s.x1 + ((c - s.from) / s.ms) * (s.x2 - s.x1);
  };
  const breaks = placed.filter((p) => p.broken).map((p) => ({ x1: p.x1, x2: p.x2, ms: p.ms }));
  const ticks = [
    { x: x0, ms: 0 },
    ...placed.filter((p) => p.broken).flatMap((p) => [{ x: p.x2, ms: p.to - start }]),
    { x: x0 + width, ms: end - start },
  ];
  // Drop a tick that would sit on top of the previous one.
  const spaced = ticks.filter((tick, i) => i === 0 || tick.x - ticks[i - 1]!.x > 40);
  return { x, breaks, ticks: spaced };
}
