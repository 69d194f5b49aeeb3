/**
 * Progress on stderr while the benchmark runs: one rewritten status line on a terminal, plain lines otherwise
 * (CI logs, pipes). Results never go to stderr, so `npm run bench 2>/dev/null` stays quiet.
 */
export class Progress {
  private readonly tty: boolean;
  private readonly started = performance.now();
  private status = '';
  private lastPlainAt = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {
    this.tty = stream.isTTY === true && process.env.CI === undefined;
    if (this.tty) {
      // Keeps the elapsed time moving during long steps; unref'd so it never holds the process open.
      this.timer = setInterval(() => this.redraw(), 500);
      this.timer.unref();
    }
  }

  /** A step that deserves its own line (scenario start, environment, summary). */
  log(message: string): void {
    if (this.tty) {
      this.stream.write(`\r\x1b[2K${this.stamp()} ${message}\n`);
      this.redraw();
    } else {
      this.stream.write(`${this.stamp()} ${message}\n`);
    }
  }

  /**
   * The current sub-step (library, repetition). On a terminal it replaces the status line; in plain mode it is
   * printed at most once a second (or always when `force`), so a log does not get thousands of lines.
   */
  update(message: string, force = false): void {
    this.status = message;
    if (this.tty) {
      this.redraw();
      return;
    }
    const now = performance.now();
    if (force || now - this.lastPlainAt >= 1_000) {
      this.lastPlainAt = now;
      this.stream.write(`${this.stamp()}   ${message}\n`);
    }
  }

  /** Clears the status line (terminal) and stops the redraw timer. */
  done(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    if (this.tty) this.stream.write('\r\x1b[2K');
  }

  private redraw(): void {
    if (!this.tty || this.status === '') return;
    const columns = this.stream.columns ?? 120;
    const line = `${this.stamp()}   ${this.status}`;
    this.stream.write(`\r\x1b[2K${line.length > columns - 1 ? line.slice(0, columns - 2) + '…' : line}`);
  }

  private stamp(): string {
    const seconds = (performance.now() - this.started) / 1_000;
    const m = Math.floor(seconds / 60);
    const s = Math.floor(seconds % 60);
    return `[${String(m).padStart(2, '0')}:${String(s).padStart(2, '0')}]`;
  }
}
