// The pieces every scenario's tables are built from (bench/suite/report.ts puts the tables together): numbers at
// display precision, ratios, Markdown tables, and the library columns of a run.
import type { ChartScenario } from './charts.js';
import { LIBRARY_NAMES } from './lock-library.js';
import type { BenchResults } from './results.js';

/** What a scenario's tables share with the rest of the report. */
export interface SectionView {
  /** Table columns: fenced, its earlier versions, then the peers (absent ones print as –). */
  columns: string[];
  /** The lines that show a scenario's SVG chart above its table; none when the run drew no chart for it. */
  chart: (scenario: ChartScenario) => string[];
}

const PEERS = LIBRARY_NAMES.filter((n) => n !== 'fenced');

/** The earlier fenced versions of a run (`--baseline-ref`: `fenced@<ref>`), in the order they were created. */
export function baselineNames(results: BenchResults): string[] {
  return Object.keys(results.libraries ?? {}).filter((n) => n.startsWith('fenced@'));
}

/** Table columns: fenced, its earlier versions, then the peers (absent ones print as –). */
export function libraryColumns(results: BenchResults): string[] {
  return ['fenced', ...baselineNames(results), ...PEERS];
}

/** Display precision only: the JSON keeps every digit measured. */
export function num(value: number | undefined, digits = 0): string {
  if (value === undefined || !Number.isFinite(value)) return '–';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** `a ÷ b` as `1.23×`, or – when either is missing. */
export function ratio(a: number | undefined, b: number | undefined): string {
  if (a === undefined || b === undefined || !Number.isFinite(a) || !Number.isFinite(b) || b === 0) return '–';
  return `${(a / b).toFixed(2)}×`;
}

export function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}
