/**
 * What the demo started, stopped in reverse order: every step runs even when an earlier one fails, each is
 * bounded in time, and running the stack twice (an error and a Ctrl-C at once) stops everything once.
 */
export class CleanupStack {
  private readonly steps: { name: string; run: () => Promise<void> }[] = [];
  private running: Promise<string[]> | undefined;

  /** Registers a step; returns a function that runs it now (and removes it from the stack). */
  defer(name: string, run: () => Promise<void>): () => Promise<void> {
    const step = { name, run };
    this.steps.push(step);
    return async () => {
      const index = this.steps.indexOf(step);
      if (index < 0) return;
      this.steps.splice(index, 1);
      await run();
    };
  }

  /** Runs every step, last registered first. Resolves with the problems met (never rejects). */
  run(timeoutMs = 10_000): Promise<string[]> {
    this.running ??= (async () => {
      const problems: string[] = [];
      while (this.steps.length > 0) {
        const step = this.steps.pop()!;
        let timer: NodeJS.Timeout | undefined;
        try {
          await Promise.race([
            step.run(),
            new Promise<never>((_, reject) => {
              timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
            }),
          ]);
        } catch (error) {
          problems.push(`${step.name}: ${error instanceof Error ? error.message : String(error)}`);
        } finally {
          clearTimeout(timer);
        }
      }
      return problems;
    })().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }
}
