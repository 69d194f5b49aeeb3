import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { lockPath, startTestService, unique, type TestService } from '../../fixtures/service-fixture.js';

/** Liveness bound for "the server closed it": far above every configured timeout, never a measurement. */
const CLOSED_WITHIN_MS = 15_000;

/** A raw TCP connection to the service: what a slow or stuck client looks like from the server's side. */
class RawConnection {
  private received = '';
  private readonly socket: net.Socket;
  /** Resolves when the connection closes; `byUs` says whether this side ended it. */
  readonly closed: Promise<{ byUs: boolean; received: string }>;
  private endedByUs = false;
  private readonly connecting: Promise<void>;

  constructor(url: string) {
    const { hostname, port } = new URL(url);
    this.socket = net.connect(Number(port), hostname);
    this.connecting = new Promise((resolve, reject) => {
      this.socket.once('connect', resolve);
      this.socket.once('error', reject);
    });
    this.connecting.catch(() => undefined);
    this.socket.setEncoding('utf8');
    this.socket.on('data', (chunk: string) => (this.received += chunk));
    this.closed = new Promise((resolve) => {
      this.socket.on('error', () => undefined);
      this.socket.on('close', () => resolve({ byUs: this.endedByUs, received: this.received }));
    });
  }

  connected(): Promise<void> {
    return this.connecting;
  }

  write(text: string): void {
    this.socket.write(text);
  }

  /** Sends a complete keep-alive GET and resolves with the status line of its answer. */
  async get(path: string): Promise<string> {
    const start = this.received.length;
    this.socket.write(`GET ${path} HTTP/1.1\r\nHost: fenced\r\nConnection: keep-alive\r\n\r\n`);
    for (;;) {
      const answer = this.received.slice(start);
      if (/\r\n\r\n/.test(answer) && /"status":"ok"\}$/.test(answer)) return answer.split('\r\n')[0]!;
      await new Promise<void>((resolve, reject) => {
        const onData = (): void => {
          this.socket.off('close', onClose);
          resolve();
        };
        const onClose = (): void => {
          this.socket.off('data', onData);
          reject(new Error(`connection closed; received: ${this.received.slice(start)}`));
        };
        this.socket.once('data', onData);
        this.socket.once('close', onClose);
      });
    }
  }

  destroy(): void {
    this.endedByUs = true;
    this.socket.destroy();
  }
}

/** Resolves with how the connection ended, failing when it is still open after the liveness bound. */
async function closedByServer(connection: RawConnection): Promise<string> {
  let timer: NodeJS.Timeout | undefined;
  const stillOpen = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('the server kept the connection open')), CLOSED_WITHIN_MS);
  });
  try {
    const { byUs, received } = await Promise.race([connection.closed, stillOpen]);
    expect(byUs).toBe(false);
    return received;
  } finally {
    clearTimeout(timer);
    connection.destroy();
  }
}

describe('coordinator service: limits on slow clients and on connections', () => {
  let redis: RedisNodes;
  let timeouts: TestService;
  let capped: TestService;

  beforeAll(async () => {
    redis = await startRedisNodes(3, { useExisting: false });
    [timeouts, capped] = await Promise.all([
      startTestService(redis.urls, {
        FENCED_HEADERS_TIMEOUT_MS: '500',
        FENCED_REQUEST_TIMEOUT_MS: '1000',
      }),
      startTestService(redis.urls, { FENCED_MAX_CONNECTIONS: '4' }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([timeouts?.close(), capped?.close()]);
    await redis?.stop();
  });

  it('closes a connection whose headers never finish, after the headers timeout', async () => {
    const slow = new RawConnection(timeouts.url);
    await slow.connected();
    slow.write(`POST ${lockPath(unique('slow-headers'), 'leases')} HTTP/1.1\r\nHost: fenced\r\n`);
    const received = await closedByServer(slow);
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('closes a connection whose body never finishes, after the request timeout', async () => {
    const slow = new RawConnection(timeouts.url);
    await slow.connected();
    slow.write(
      `POST ${lockPath(unique('slow-body'), 'leases')} HTTP/1.1\r\nHost: fenced\r\n` +
        'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"ttlMs":',
    );
    const received = await closedByServer(slow);
    expect(received).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('lets a waiting acquire wait past the request timeout: the timeout bounds receiving, not waiting', async () => {
    const resource = unique('long-wait');
    const held = await timeouts.call(lockPath(resource, 'leases'), {
      method: 'POST',
      json: { ttlMs: 60_000 },
    });
    expect(held.status).toBe(201);
    const waiting = timeouts.call(lockPath(resource, 'leases'), {
      method: 'POST',
      json: { ttlMs: 1_000, waitMs: 10_000 },
    });
    // Longer than the 1 s request timeout, then free the lock.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const { leaseId } = held.body as { leaseId: string };
    expect((await timeouts.call(lockPath(resource, 'leases', leaseId), { method: 'DELETE' })).status).toBe(
      204,
    );
    expect((await waiting).status).toBe(201);
  });

  it('closes connections past the cap while the open ones keep working', async () => {
    const open = Array.from({ length: 4 }, () => new RawConnection(capped.url));
    try {
      for (const connection of open) {
        await connection.connected();
        expect(await connection.get('/healthz')).toBe('HTTP/1.1 200 OK');
      }
      const extra = new RawConnection(capped.url);
      extra.write('GET /healthz HTTP/1.1\r\nHost: fenced\r\n\r\n');
      expect(await closedByServer(extra)).toBe('');
      for (const connection of open) expect(await connection.get('/healthz')).toBe('HTTP/1.1 200 OK');
    } finally {
      for (const connection of open) connection.destroy();
    }
  });
});
