// Progress of a long operator command with a time estimate, for people watching a terminal. Knows nothing of the
// repair's phases: it takes whatever step a command reports (a phase name, words, and counts when the step has
// them) and decides what to print:
// - a line when the phase changes: the step's own words;
// - while a phase goes on, at most one line per interval: done/total, the percentage and the time left,
//   estimated from the rate since the phase began, when the step has counts; else how long the phase has lasted,
//   so a long wait never goes silent.
// The clock is injected (tests); nothing here waits or prints by itself.

/** One step as a command reports it. */
export interface ProgressStep {
  /** Which stage the operation is in; a new value is a new phase. */
  readonly phase: string;
  /** The step in words. */
  readonly detail: string;
  /** Units done in this phase so far (e.g. registers copied), when the phase counts them. */
  readonly done?: number;
  /** Units this phase has to do, when known. */
  readonly total?: number;
}

/** How a line reads the step it reports. */
export interface ProgressLine {
  readonly text: string;
  /** Milliseconds since the operation began. */
  readonly elapsedMs: number;
  /** Estimated milliseconds until the phase's units are done; absent when nothing can be estimated yet. */
  readonly etaMs?: number;
}

export interface ProgressEstimateOptions {
  /** Milliseconds since some fixed point (`performance.now`). */
  readonly now: () => number;
  /** The least time between two lines of the same phase. @defaultValue 2 000 */
  readonly intervalMs?: number;
}

export class ProgressEstimate {
  private readonly now: () => number;
  private readonly intervalMs: number;
  private readonly startedAt: number;
  private phase: string | undefined;
  private phaseStartedAt = 0;
  /** The first counted sample of this phase: the rate is measured from it. */
  private firstSample: { at: number; done: number } | undefined;
  private lastStep: ProgressStep | undefined;
  private lastLineAt = 0;

  constructor(options: ProgressEstimateOptions) {
    this.now = options.now;
    this.intervalMs = options.intervalMs ?? 2_000;
    this.startedAt = this.now();
  }

  /** A step happened: the line to print now, if any (always one for a new phase). */
  step(step: ProgressStep): ProgressLine | undefined {
    const at = this.now();
    this.lastStep = step;
    if (step.phase !== this.phase) {
      this.phase = step.phase;
      this.phaseStartedAt = at;
      this.firstSample = undefined;
      this.sample(step, at);
      this.lastLineAt = at;
      return this.line(step.detail, at);
    }
    this.sample(step, at);
    return this.periodic(at);
  }

  /** Time passed without a step: the periodic line, if one is due. */
  tick(): ProgressLine | undefined {
    return this.lastStep === undefined ? undefined : this.periodic(this.now());
  }

  /** Milliseconds since the operation began, and the current phase's estimate (absent until it can be made). */
  current(): { elapsedMs: number; etaMs?: number } {
    const at = this.now();
    const eta = this.lastStep === undefined ? undefined : this.etaMs(this.lastStep, at);
    return { elapsedMs: Math.round(at - this.startedAt), ...(eta === undefined ? {} : { etaMs: eta }) };
  }

  private periodic(at: number): ProgressLine | undefined {
    const step = this.lastStep;
    if (step === undefined || at - this.lastLineAt < this.intervalMs) return undefined;
    this.lastLineAt = at;
    const counted = this.countText(step, at);
    return this.line(
      counted === ''
        ? `${step.phase}: ${formatDuration(at - this.phaseStartedAt)} so far`
        : `${step.phase}${counted}`,
      at,
    );
  }

  private sample(step: ProgressStep, at: number): void {
    if (step.done !== undefined && this.firstSample === undefined) this.firstSample = { at, done: step.done };
  }

  private etaMs(step: ProgressStep, at: number): number | undefined {
    if (step.done === undefined || step.total === undefined) return undefined;
    if (step.done >= step.total) return 0;
    const first = this.firstSample;
    if (first === undefined || step.done <= first.done || at <= first.at) return undefined;
    // The rate up to now, not up to the last step: a phase that stalls sees its estimate grow.
    const rate = (step.done - first.done) / (at - first.at);
    return Math.ceil((step.total - step.done) / rate);
  }

  private countText(step: ProgressStep, at: number): string {
    if (step.done === undefined || step.total === undefined || step.total === 0) return '';
    const percent = Math.floor((step.done / step.total) * 100);
    const eta = this.etaMs(step, at);
    const left = eta === undefined ? 'estimating the time left' : `about ${formatDuration(eta)} left`;
    return ` (${step.done} of ${step.total}, ${percent}%; ${left})`;
  }

  private line(text: string, at: number): ProgressLine {
    const eta = this.lastStep === undefined ? undefined : this.etaMs(this.lastStep, at);
    return { text, elapsedMs: Math.round(at - this.startedAt), ...(eta === undefined ? {} : { etaMs: eta }) };
  }
}

/** `850 ms`, `12 s`, `3 min 20 s`, `2 h 5 min`. */
export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.max(0, Math.round(ms))} ms`;
  const seconds = Math.round(ms / 1_000);
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return seconds % 60 === 0 ? `${minutes} min` : `${minutes} min ${seconds % 60} s`;
  const hours = Math.floor(minutes / 60);
  return minutes % 60 === 0 ? `${hours} h` : `${hours} h ${minutes % 60} min`;
}
