import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { eventually, lockPath, startTestService, unique } from '../../fixtures/service-fixture.js';

const SERVER_ENTRY = fileURLToPath(
  new URL('../../../packages/coordinator/src/bin/fenced-coordinator.ts', import.meta.url),
);
const WORKERS = 16;

interface Answer {
  status: number;
  connection: string | undefined;
  retryAfter: string | undefined;
  body: string;
  /** The request was sent after the shutdown began. */
  sentWhileDraining: boolean;
}

/**
 * Keep-alive clients sending acquire + release in a loop, as a busy application does, until the service
 * stops taking connections. Every answer and every socket error is recorded.
 */
class SteadyStream {
  readonly answers: Answer[] = [];
  readonly errors: string[] = [];
  cycles = 0;
  draining = false;
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: WORKERS });
  private readonly done: Promise<void[]>;

  constructor(private readonly url: URL) {
    this.done = Promise.all(Array.from({ length: WORKERS }, (_, worker) => this.worker(worker)));
  }

  /** Resolves when every worker has stopped (refused by the stopped service); the agent is then destroyed. */
  async finished(): Promise<void> {
    await this.done;
    this.agent.destroy();
  }

  private async worker(worker: number): Promise<void> {
    const resource = unique(`drain-${worker}`);
    for (;;) {
      try {
        const granted = await this.send('POST', lockPath(resource, 'leases'), '{"ttlMs":10000}');
        if (granted.status !== 201) continue;
        const { leaseId } = JSON.parse(granted.body) as { leaseId: string };
        await this.send('DELETE', lockPath(resource, 'leases', leaseId));
        this.cycles++;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        // A new connection refused by a stopped service is the clean end; anything else is a failure.
        if (code !== 'ECONNREFUSED') this.errors.push(`${code ?? ''} ${(error as Error).message}`);
        return;
      }
    }
  }

  private send(method: string, path: string, body?: string): Promise<Answer> {
    const sentWhileDraining = this.draining;
    return new Promise((resolve, reject) => {
      const request = http.request(
        {
          agent: this.agent,
          host: this.url.hostname,
          port: this.url.port,
          method,
          path,
          headers: body === undefined ? {} : { 'content-type': 'application/json' },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('error', reject);
          response.on('end', () => {
            const answer: Answer = {
              status: response.statusCode ?? 0,
              connection: response.headers.connection,
              retryAfter: response.headers['retry-after'],
              body: Buffer.concat(chunks).toString('utf8'),
              sentWhileDraining,
            };
            this.answers.push(answer);
            resolve(answer);
          });
        },
      );
      request.on('error', reject);
      request.end(body);
    });
  }
}

/** What every drain must show: no reset, no hang-up, only clean answers. */
function expectCleanDrain(stream: SteadyStream): void {
  expect(stream.errors).toEqual([]);
  for (const answer of stream.answers) {
    expect([201, 204, 503], answer.body).toContain(answer.status);
    if (answer.status === 503) {
      expect(answer.retryAfter).toBe('1');
      expect(JSON.parse(answer.body)).toEqual({
        error: { code: 'QUORUM_UNAVAILABLE', message: expect.stringContaining('shutting down') as string },
      });
    }
  }
}

describe('coordinator service: shutdown under a steady keep-alive load', () => {
  let redis: RedisNodes;

  beforeAll(async () => {
    redis = await startRedisNodes(3, { useExisting: false });
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('close() drains keep-alive clients without a single reset: Connection: close, then refused', async () => {
    const service = await startTestService(redis.urls);
    const stream = new SteadyStream(new URL(service.url));
    // A client that used its connection once and left it idle, to come back during the drain.
    const idleAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const before = await get(idleAgent, `${service.url}/healthz`);
    expect(before.connection).toBe('keep-alive');
    await eventually(() => Promise.resolve(stream.cycles >= 100), {
      timeoutMs: 30_000,
      what: '100 cycles before the shutdown',
    });

    stream.draining = true;
    const closed = service.close();
    // The idle connection's next request is answered, with Connection: close, not reset.
    const during = await get(idleAgent, `${service.url}/healthz`);
    expect(during).toEqual({ status: 200, connection: 'close', reusedSocket: true });
    await closed;
    await stream.finished();
    idleAgent.destroy();

    expectCleanDrain(stream);
    for (const answer of stream.answers.filter((a) => a.sentWhileDraining)) {
      expect(answer.connection).toBe('close');
    }
    // Requests in flight when the drain began were answered with Connection: close too.
    expect(stream.answers.some((a) => a.connection === 'close')).toBe(true);
  });

  it('SIGTERM to the process drains keep-alive clients without a single reset', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', SERVER_ENTRY], {
      env: {
        ...process.env,
        FENCED_REDIS_URLS: redis.urls.join(','),
        FENCED_HOST: '127.0.0.1',
        FENCED_PORT: '0',
        FENCED_LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      const port = await listeningPort(child);
      const stream = new SteadyStream(new URL(`http://127.0.0.1:${port}`));
      await eventually(() => Promise.resolve(stream.cycles >= 100), {
        timeoutMs: 30_000,
        what: '100 cycles before SIGTERM',
      });
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      await stream.finished();
      expect(await exited).toBe(0);
      expectCleanDrain(stream);
      expect(stream.answers.some((a) => a.connection === 'close')).toBe(true);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });
});

function get(
  agent: http.Agent,
  url: string,
): Promise<{ status: number; connection: string | undefined; reusedSocket: boolean }> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { agent }, (response) => {
      response.resume();
      response.on('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          connection: response.headers.connection,
          reusedSocket: request.reusedSocket,
        }),
      );
    });
    request.on('error', reject);
  });
}

function listeningPort(child: ChildProcess): Promise<number> {
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const line = output.split('\n').find((l) => l.includes('"fenced coordinator listening"'));
      if (line) resolve((JSON.parse(line) as { port: number }).port);
    });
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', () => reject(new Error(`exited before listening:\n${output}`)));
  });
}
