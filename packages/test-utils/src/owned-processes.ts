import type { ChildProcess } from 'node:child_process';

// Every process the environment starts is registered here and killed by pid when this process exits, so a
// failing or interrupted test never leaves servers behind. We only ever signal pids we spawned ourselves.
const owned = new Set<ChildProcess>();
const cleanups = new Set<() => void>();
let hooked = false;

function hook(): void {
  if (hooked) return;
  hooked = true;
  const killAll = (): void => {
    for (const c of owned) {
      if (c.pid !== undefined && c.exitCode === null && c.signalCode === null) {
        try {
          process.kill(c.pid, 'SIGCONT'); // a paused process cannot die of SIGTERM until continued
          process.kill(c.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    for (const cleanup of cleanups) {
      try {
        cleanup();
      } catch {
        // best effort: the process is exiting
      }
    }
  };
  process.once('exit', killAll);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      // A program with its own handler (the demo, the soak runner) does its orderly, asynchronous clean-up and
      // exits; the 'exit' hook above still kills our children then. Without one, we exit here.
      if (process.listenerCount(signal) > 0) return;
      killAll();
      process.exit(130);
    });
  }
}

export function own(child: ChildProcess): void {
  owned.add(child);
  child.once('exit', () => owned.delete(child));
  hook();
}

/**
 * Runs `cleanup` (synchronously) if this process exits, or is interrupted, before `cancel()` is called: for
 * servers that are not our children, such as a Postgres cluster `pg_ctl` daemonised. Returns `cancel`.
 */
export function onExit(cleanup: () => void): () => void {
  cleanups.add(cleanup);
  hook();
  return () => {
    cleanups.delete(cleanup);
  };
}

export function waitForExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}
