import { dataLost, demoHeadline, type RunAnalysis, type Tone } from './analysis.js';
import type { Lane, RunRecord } from './run-record.js';
import type { Scenario } from './scenarios.js';
import type { Mode } from './run-record.js';

/** ANSI styling that turns itself off (not a TTY, NO_COLOR). */
export interface Painter {
  bold(text: string): string;
  dim(text: string): string;
  red(text: string): string;
  green(text: string): string;
  yellow(text: string): string;
  cyan(text: string): string;
  magenta(text: string): string;
}

export function createPainter(enabled: boolean): Painter {
  const style =
    (open: number, close: number) =>
    (text: string): string =>
      enabled ? `\x1b[${open}m${text}\x1b[${close}m` : text;
  return {
    bold: style(1, 22),
    dim: style(2, 22),
    red: style(31, 39),
    green: style(32, 39),
    yellow: style(33, 39),
    cyan: style(36, 39),
    magenta: style(35, 39),
  };
}

/** Colours by default on a terminal; NO_COLOR turns them off, FORCE_COLOR on. */
export function colourWanted(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0') return true;
  return stream.isTTY === true;
}

export const MODE_DESCRIPTIONS: Readonly<Record<Mode, string>> = {
  unprotected: 'plain Redlock (the redlock package) + plain UPDATEs: no token, no guard',
  fenced: '@fenced/coordinator lease with its fencing token + guarded reads and writes (GuardedStore)',
};

/** How a run protected its writes, in words; runs that wrote through the counter service say so. */
export function describeRun(record: RunRecord): string {
  if (record.protection === 'signatures') {
    return record.mode === 'fenced'
      ? '@fenced/coordinator signs every lease (Ed25519 proof) + a GuardedStore that verifies the proofs (verifyKeys)'
      : '@fenced/coordinator lease + GuardedStore without signatures: the store believes any token';
  }
  const overHttp = record.ops.some((o) => o.op === 'write' && o.via === 'http');
  if (!overHttp) return MODE_DESCRIPTIONS[record.mode];
  return record.mode === 'fenced'
    ? '@fenced/coordinator lease with its fencing token; writes over HTTP through the fencedWrites middleware (Fencing-Token header, 409 STALE_TOKEN)'
    : 'plain Redlock (the redlock package); writes over HTTP to a service that runs a plain UPDATE';
}

const WIDTH = 108;

/**
 * A run's mark says what happened to its data: `✗` (red) lost or damaged, `✔` (green) intact as the run had to
 * keep it, `?` (red) intact but not what the run had to show (no anomaly provoked, nothing exercised, broken).
 */
export function runMark(a: RunAnalysis): '✗' | '✔' | '?' {
  if (dataLost(a)) return '✗';
  return a.verdict.passed ? '✔' : '?';
}

/** Splits `text` into lines of at most `width` characters (words are never cut), each prefixed by `indent`. */
export function wrapText(text: string, width: number, indent: string): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line.length + word.length + 1 > width && line.length > 0) {
      lines.push(indent + line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(indent + line);
  return lines;
}

/** Prints the demo to a terminal: a timeline per run and the verdicts. */
export class TerminalReport {
  constructor(
    private readonly out: (line: string) => void,
    private readonly p: Painter,
  ) {}

  line(text = ''): void {
    this.out(text);
  }

  scenario(s: Scenario): void {
    const head = `━━ ${s.id} · ${s.title} `;
    this.out('');
    this.out(this.p.bold(head + '━'.repeat(Math.max(3, WIDTH - head.length))));
    for (const l of wrapText(s.story, WIDTH - 3, '   ')) this.out(this.p.dim(l));
  }

  skipped(s: Scenario, why: string): void {
    this.scenario(s);
    this.out(`   ${this.p.yellow('skipped')}: ${why}`);
  }

  run(a: RunAnalysis): void {
    const { record, verdict } = a;
    this.out('');
    this.out(`   ${this.p.bold(`▸ ${record.mode}`)} ${this.p.dim(`— ${describeRun(record)}`)}`);
    for (const e of a.timeline) {
      const t = `+${Math.round(e.t - record.startedAt)
        .toString()
        .padStart(5)} ms`;
      const text = wrapText(e.text, WIDTH - 22, '').map((l, i) => (i === 0 ? l : `${' '.repeat(22)}${l}`));
      this.out(`     ${this.p.dim(t)}  ${this.lane(e.lane)}  ${this.tone(e.tone, text.join('\n'))}`);
    }
    const mark = this.mark(a);
    const label = verdict.passed
      ? verdict.expectation === 'anomaly'
        ? this.p.red(verdict.label)
        : this.p.green(verdict.label)
      : this.p.red(this.p.bold(verdict.label));
    this.out(`   ${mark} ${label}${this.p.dim(` (expected: ${verdict.expectation})`)} — ${verdict.headline}`);
    for (const f of verdict.findings)
      wrapText(f, WIDTH - 9, '').forEach((l, i) =>
        this.out(this.p.dim(`       ${i === 0 ? '·' : ' '} ${l}`)),
      );
    if (!verdict.passed && verdict.checks.violations.length > 0) {
      for (const v of verdict.checks.violations) this.out(this.p.dim(`       checker: ${v}`));
    }
  }

  summary(
    scenarios: readonly Scenario[],
    analyses: readonly RunAnalysis[],
    skipped: readonly { id: string; why: string }[],
    seconds: number,
  ): void {
    this.out('');
    this.out(this.p.bold(`━━ Summary ${'━'.repeat(WIDTH - 11)}`));
    const headline = demoHeadline(analyses);
    if (headline.scenarios > 0) {
      const painted = `   ${headline.text.charAt(0).toUpperCase()}${headline.text.slice(1)}.`;
      this.out(this.p.bold(headline.fencedLost === 0 ? painted : this.p.red(painted)));
    }
    for (const scenario of scenarios) {
      const runs = analyses.filter((a) => a.record.scenario === scenario.id);
      const skip = skipped.find((s) => s.id === scenario.id);
      if (runs.length === 0 && skip === undefined) continue;
      this.out('');
      this.out(`   ${this.p.bold(scenario.id.padEnd(4))}${scenario.title}`);
      if (skip !== undefined) this.out(`       ${this.p.yellow('skipped')}: ${skip.why}`);
      for (const a of runs) {
        const v = a.verdict;
        const label = v.label.padEnd(14);
        const painted = v.passed
          ? v.expectation === 'anomaly'
            ? this.p.red(label)
            : this.p.green(label)
          : this.p.red(this.p.bold(label));
        const text = `${a.record.mode.padEnd(12)}${this.mark(a)} ${painted} `;
        const rest = wrapText(v.headline, WIDTH - 36, '');
        this.out(`       ${text}${rest[0] ?? ''}`);
        for (const l of rest.slice(1)) this.out(`${' '.repeat(36)}${l}`);
      }
    }
    const failed = analyses.filter((a) => !a.verdict.passed).length;
    const count = new Set(analyses.map((a) => a.record.scenario)).size;
    this.out('');
    this.out(
      failed === 0
        ? this.p.green(
            `   All ${analyses.length} runs of ${count} scenario${count === 1 ? '' : 's'} behaved as expected (${seconds.toFixed(1)} s).`,
          )
        : this.p.red(
            this.p.bold(
              `   ${failed} of ${analyses.length} runs did not behave as expected (${seconds.toFixed(1)} s).`,
            ),
          ),
    );
  }

  private mark(a: RunAnalysis): string {
    const mark = runMark(a);
    return mark === '✔' ? this.p.green(mark) : this.p.red(this.p.bold(mark));
  }

  private lane(lane: Lane): string {
    if (lane === 'A') return this.p.cyan(this.p.bold('A  '));
    if (lane === 'B') return this.p.magenta(this.p.bold('B  '));
    return this.p.yellow('sys');
  }

  private tone(tone: Tone, text: string): string {
    switch (tone) {
      case 'good':
        return this.p.green(text);
      case 'bad':
        return this.p.red(this.p.bold(text));
      case 'warn':
        return this.p.yellow(text);
      case 'muted':
        return this.p.dim(text);
      case 'info':
        return text;
    }
  }
}
