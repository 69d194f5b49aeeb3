import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freePort } from '@fenced/test-utils/free-port';
import { own, waitForExit } from '@fenced/test-utils/owned-processes';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SERVER_ENTRY = 'packages/coordinator/src/bin/fenced-coordinator.ts';

/** How much of a process's output is kept: enough for the last few hundred log lines. */
const OUTPUT_LIMIT = 256 * 1024;

/**
 * A coordinator service run as its own process, started the way an operator starts `fenced-coordinator`: the
 * command with its configuration in the environment. Tests drive it over HTTP only.
 */
export interface ServiceProcess {
  readonly pid: number;
  readonly url: string;
  /** The process's stdout and stderr, interleaved as they arrived. */
  output(): string;
  /** The last `lines` lines of the output, for failure messages. */
  tail(lines?: number): string;
  /** Whether the process has exited (by itself or by a signal). */
  exited(): boolean;
  /** Sends `signal` to this process (by its pid) and waits until it has exited. */
  kill(signal: NodeJS.Signals): Promise<void>;
}

export interface StartServiceProcessOptions {
  /** The environment on top of `PATH`/`HOME`; `FENCED_HOST` and `FENCED_PORT` are set here. */
  env: Record<string, string>;
  /** Liveness bound of the start-up, until `/readyz` answers 200. @defaultValue 45000 */
  readyWithinMs?: number;
  /** Sent to `/readyz` when the service requires a key for its health routes. */
  apiKey?: string;
}

/**
 * Starts `node --conditions=@fenced/source --import tsx packages/coordinator/src/bin/fenced-coordinator.ts` on a
 * free loopback port and resolves once `GET /readyz` answers 200. A free port can be taken by someone else
 * between the probe and the bind, so a start that fails with EADDRINUSE is retried on another port.
 * @throws Error with the output's tail when the process exits first or is not ready within the bound.
 */
export async function startServiceProcess(options: StartServiceProcessOptions): Promise<ServiceProcess> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    try {
      return await startOn(port, options);
    } catch (error) {
      if (attempt < 3 && error instanceof PortTakenError) continue;
      throw error;
    }
  }
}

class PortTakenError extends Error {}

async function startOn(port: number, options: StartServiceProcessOptions): Promise<ServiceProcess> {
  const child: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    ['--conditions=@fenced/source', '--import', 'tsx', SERVER_ENTRY],
    {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        ...options.env,
        FENCED_HOST: '127.0.0.1',
        FENCED_PORT: String(port),
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  own(child);
  child.stdin.end();
  let output = '';
  const append = (chunk: Buffer): void => {
    output += chunk.toString('utf8');
    if (output.length > OUTPUT_LIMIT) output = output.slice(-OUTPUT_LIMIT);
  };
  child.stdout.on('data', append);
  child.stderr.on('data', append);
  const exitedPromise = waitForExit(child);
  const exited = (): boolean => child.exitCode !== null || child.signalCode !== null;
  const tail = (lines = 40): string => output.split('\n').slice(-lines).join('\n');
  const url = `http://127.0.0.1:${port}`;
  const pid = child.pid;
  if (pid === undefined) throw new Error(`could not start the service process:\n${tail()}`);

  const service: ServiceProcess = {
    pid,
    url,
    output: () => output,
    tail,
    exited,
    kill: async (signal) => {
      if (!exited()) process.kill(pid, signal);
      await exitedPromise;
    },
  };

  const bound = options.readyWithinMs ?? 45_000;
  const deadline = performance.now() + bound;
  const headers: Record<string, string> =
    options.apiKey !== undefined ? { authorization: `Bearer ${options.apiKey}` } : {};
  for (;;) {
    if (exited()) {
      const why = `the service process exited (${child.exitCode ?? child.signalCode}) before it was ready`;
      if (output.includes('EADDRINUSE')) throw new PortTakenError(`${why}: port ${port} taken`);
      throw new Error(`${why}:\n${tail()}`);
    }
    try {
      const response = await fetch(`${url}/readyz`, { headers, signal: AbortSignal.timeout(2_000) });
      await response.arrayBuffer();
      if (response.status === 200) return service;
    } catch {
      // not listening yet
    }
    if (performance.now() > deadline) {
      await service.kill('SIGKILL');
      throw new Error(`the service process was not ready within ${bound} ms:\n${tail()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
