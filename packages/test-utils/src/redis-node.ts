import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './free-port.js';
import { own, waitForExit } from './owned-processes.js';

/** How a node keeps its data. `fsync-always` is what DESIGN §3 requires; the others exist for negative controls. */
export type Persistence = 'fsync-always' | 'fsync-everysec' | 'none';

export interface RedisNodeOptions {
  persistence?: Persistence;
  /** Extra `redis-server` arguments, e.g. `['--maxmemory-policy', 'allkeys-lru']` for a misconfigured node. */
  extraArgs?: string[];
  /** Extra environment for the server process, e.g. `LD_PRELOAD` of the clock shim. */
  env?: NodeJS.ProcessEnv;
  /** Port to use; a free one is picked when absent. The port is kept across restarts. */
  port?: number;
}

/**
 * One `redis-server` process owned by the test: its own data directory, a loopback port, and fault
 * controls (kill, restart with or without data, pause/resume). Stopped by pid, never by name.
 */
export class RedisNode {
  private child: ChildProcess | null = null;
  private constructor(
    readonly port: number,
    readonly dataDir: string,
    private options: RedisNodeOptions,
  ) {}

  static async start(options: RedisNodeOptions = {}): Promise<RedisNode> {
    for (let attempt = 0; ; attempt++) {
      const port = options.port ?? (await freePort());
      const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), `fenced-redis-${port}-`));
      const node = new RedisNode(port, dataDir, options);
      try {
        await node.spawn();
        return node;
      } catch (error) {
        await node.stop();
        if (attempt >= 4 || options.port !== undefined) throw error;
      }
    }
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Arguments for the server; persistence per DESIGN §3 unless a negative control asks otherwise. */
  private args(): string[] {
    return [
      '--port',
      String(this.port),
      '--bind',
      '127.0.0.1',
      '--dir',
      this.dataDir,
      '--daemonize',
      'no',
      '--logfile',
      path.join(this.dataDir, 'redis.log'),
      '--protected-mode',
      'no',
      ...redisServerArgs(this.options.persistence ?? 'fsync-always'),
      ...(this.options.extraArgs ?? []),
    ];
  }

  private async spawn(): Promise<void> {
    const child = spawn('redis-server', this.args(), {
      stdio: 'ignore',
      env: { ...process.env, ...this.options.env },
    });
    own(child);
    this.child = child;
    const exited = new Promise<never>((_, reject) =>
      child.once('exit', (code, signal) =>
        reject(new Error(`redis-server on port ${this.port} exited (${code ?? signal}) during start-up`)),
      ),
    );
    exited.catch(() => undefined);
    await Promise.race([this.waitUntilReady(), exited]);
  }

  private async waitUntilReady(timeoutMs = 10_000): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    while (performance.now() < deadline) {
      if (await ping(this.port)) return;
      await sleep(20);
    }
    throw new Error(`redis-server on port ${this.port} did not answer PING within ${timeoutMs} ms`);
  }

  /** SIGKILL: the process dies at once, without a chance to write anything more. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    if (child.pid !== undefined) {
      process.kill(child.pid, 'SIGCONT');
      process.kill(child.pid, 'SIGKILL');
    }
    await waitForExit(child);
  }

  /**
   * Kills the node (if running) and starts it again on the same port. `keepData: false` wipes the data
   * directory first: the node comes back empty, as after a disk loss or a Redis without persistence.
   */
  async restart({
    keepData = true,
    keepFiles = [],
    options,
  }: {
    keepData?: boolean;
    /** With `keepData: false`, files of the data directory that survive (a cluster node's `nodes.conf`). */
    keepFiles?: readonly string[];
    options?: RedisNodeOptions;
  } = {}): Promise<void> {
    await this.kill();
    if (options) this.options = { ...this.options, ...options, port: this.port };
    if (!keepData) {
      for (const entry of await fs.readdir(this.dataDir)) {
        if (keepFiles.includes(entry)) continue;
        await fs.rm(path.join(this.dataDir, entry), {
          recursive: true,
          force: true,
          maxRetries: 10,
          retryDelay: 100,
        });
      }
    }
    await this.spawn();
  }

  /** SIGSTOP: the node stops answering but keeps its sockets; queued commands run after `resume()`. */
  pause(): void {
    if (this.child?.pid !== undefined && this.running) process.kill(this.child.pid, 'SIGSTOP');
  }

  resume(): void {
    if (this.child?.pid !== undefined && this.running) process.kill(this.child.pid, 'SIGCONT');
  }

  /** Stops the process and removes its data directory. */
  async stop(): Promise<void> {
    await this.kill();
    this.child = null;
    // An AOF rewrite's forked child can outlive the server by a moment and still write its temp file: retried on
    // ENOTEMPTY instead of failing the run.
    await fs.rm(this.dataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  }
}

/**
 * The `redis-server` arguments every node gets wherever it runs (process or container): no RDB snapshots,
 * `noeviction`, and the append-only file per DESIGN §3 (`fsync-always`) or a weaker setting for a negative
 * control.
 */
export function redisServerArgs(persistence: Persistence = 'fsync-always'): string[] {
  const args = ['--save', '', '--maxmemory-policy', 'noeviction'];
  if (persistence === 'none') return [...args, '--appendonly', 'no'];
  return [
    ...args,
    '--appendonly',
    'yes',
    '--appendfsync',
    persistence === 'fsync-always' ? 'always' : 'everysec',
  ];
}

/** Raw RESP PING so readiness does not depend on the client library under test. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')));
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
