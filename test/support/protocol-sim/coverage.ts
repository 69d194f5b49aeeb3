/**
 * What a nemesis search reached, counted over its schedules (search.ts fills it, `npm run sim` prints it): for every
 * step (COVERAGE_KEYS: each script by name, the sealing read and the marker's claim and renew apart, a completed
 * grant, a guarded write at the modelled guard, a fold pass), in how many schedules it ran and in how many a cut
 * struck right after it; for every (step, fault kind) pair, in how many schedules that fault struck right after that
 * step, and which pairs no schedule took; and which of the coordinator's scripts no schedule ran at all.
 */
import { SCRIPT_NAMES } from '../../../packages/coordinator/src/scripts/scripts.js';
import { COVERAGE_KEYS, FAULT_KINDS, type NemesisResult } from './nemesis.js';

export interface Coverage {
  /** Per step, the schedules in which a cut struck right after it. */
  readonly cutAfter: Map<string, number>;
  /** Per step, the schedules in which it ran at least once. */
  readonly ran: Map<string, number>;
  /** Per `step|fault kind`, the schedules in which that fault struck right after that step. */
  readonly pairs: Map<string, number>;
}

export function newCoverage(): Coverage {
  return {
    cutAfter: new Map(COVERAGE_KEYS.map((key) => [key, 0])),
    ran: new Map(COVERAGE_KEYS.map((key) => [key, 0])),
    pairs: new Map(),
  };
}

const bump = (map: Map<string, number>, key: string): void => void map.set(key, (map.get(key) ?? 0) + 1);

/** Adds one schedule's result. */
export function addRun(
  coverage: Coverage,
  result: Pick<NemesisResult, 'cutAfter' | 'stepsRun' | 'features'>,
): void {
  for (const key of result.cutAfter) bump(coverage.cutAfter, key);
  const ran = new Set(result.stepsRun);
  for (const feature of result.features) {
    if (!feature.startsWith('cut:')) continue;
    const kind = feature.slice(feature.lastIndexOf(':') + 1);
    const step = feature.slice(4, feature.lastIndexOf(':'));
    bump(coverage.pairs, `${step}|${kind}`);
    // A fold runs fold.lua on the node, as a fault of the nemesis (not through a process's connection).
    if (kind === 'fold' || kind === 'fold-all') ran.add('fold');
  }
  for (const key of ran) bump(coverage.ran, key);
}

export interface CoverageGaps {
  /** Steps no cut struck right after. */
  readonly neverCutAfter: readonly string[];
  /** Per step, the fault kinds that never struck right after it. */
  readonly neverTaken: ReadonlyMap<string, readonly string[]>;
  /** The coordinator's scripts that no schedule ran. */
  readonly scriptsNeverRun: readonly string[];
}

export function coverageGaps(coverage: Coverage): CoverageGaps {
  const neverTaken = new Map<string, string[]>();
  for (const step of COVERAGE_KEYS) {
    const missing = FAULT_KINDS.filter((kind) => (coverage.pairs.get(`${step}|${kind}`) ?? 0) === 0);
    if (missing.length > 0) neverTaken.set(step, missing);
  }
  const ranScripts = new Set(
    [...coverage.ran]
      .filter(([, n]) => n > 0)
      .map(([step]) => step.replace(/ \(seal\)$| claim$| renew$/, '')),
  );
  return {
    neverCutAfter: COVERAGE_KEYS.filter((key) => (coverage.cutAfter.get(key) ?? 0) === 0),
    neverTaken,
    scriptsNeverRun: SCRIPT_NAMES.filter((name) => !ranScripts.has(name)),
  };
}

/** The printed report: the table per step, the (step, fault) matrix's holes, and the scripts never run. */
export function formatCoverage(coverage: Coverage, schedules: number): string[] {
  const lines: string[] = [];
  lines.push(
    `${'step'.padEnd(22)} ${'ran in'.padStart(9)} ${'cut after'.padStart(9)}   (of ${schedules} schedules)`,
  );
  for (const key of COVERAGE_KEYS) {
    lines.push(
      `  ${key.padEnd(20)} ${(key === 'start' ? '-' : String(coverage.ran.get(key) ?? 0)).padStart(9)} ${String(coverage.cutAfter.get(key) ?? 0).padStart(9)}`,
    );
  }
  const gaps = coverageGaps(coverage);
  const pairs = COVERAGE_KEYS.length * FAULT_KINDS.length;
  const taken = [...coverage.pairs.values()].filter((n) => n > 0).length;
  lines.push(`(step, fault) cuts taken: ${taken} of ${pairs}; never taken:`);
  for (const [step, kinds] of gaps.neverTaken) lines.push(`  after ${step.padEnd(20)} ${kinds.join(', ')}`);
  lines.push(`steps no cut struck right after: ${gaps.neverCutAfter.join(', ') || 'none'}`);
  lines.push(`coordinator scripts no schedule ran: ${gaps.scriptsNeverRun.join(', ') || 'none'}`);
  return lines;
}
