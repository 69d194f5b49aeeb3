import { createServer, type Server, type Socket } from 'node:net';
import { QuorumUnavailableError, ServiceUnreachableError } from '@fenced/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorClient } from '@fenced/coordinator/client';

/** A port nothing listens on: bound once, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('CoordinatorClient when the service cannot be reached', () => {
  let silent: Server;
  const sockets: Socket[] = [];

  beforeAll(async () => {
    // Accepts connections and never answers: a hung service, or a black-holing network.
    silent = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it('throws ServiceUnreachableError saying the connection was refused, not QuorumUnavailableError', async () => {
    const port = await closedPort();
    const client = new CoordinatorClient({ baseUrl: `http://127.0.0.1:${port}`, retryBaseDelayMs: 1 });
    const error = await client.acquire('r', { ttlMs: 1_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceUnreachableError);
    expect(error).not.toBeInstanceOf(QuorumUnavailableError);
    const unreachable = error as ServiceUnreachableError;
    expect(unreachable.code).toBe('SERVICE_UNREACHABLE');
    expect(unreachable.origin).toBe(`http://127.0.0.1:${port}`);
    expect(unreachable.message).toBe(
      `could not reach the coordinator service at http://127.0.0.1:${port}: connection refused (ECONNREFUSED) ` +
        '(1 attempt); is it running, and is baseUrl right?',
    );
    expect(unreachable.cause).toBeInstanceOf(Error);
  });

  it('retries calls that are safe to repeat, and says how many attempts it made', async () => {
    const port = await closedPort();
    const client = new CoordinatorClient({
      baseUrl: `http://127.0.0.1:${port}`,
      maxAttempts: 3,
      retryBaseDelayMs: 1,
    });
    const error = await client.inspect('r').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceUnreachableError);
    expect((error as ServiceUnreachableError).attempts).toBe(3);
    expect((error as Error).message).toContain('connection refused (ECONNREFUSED) (3 attempts)');
  });

  it('says how long it waited when the service accepts the connection and never answers', async () => {
    const { port } = silent.address() as { port: number };
    const client = new CoordinatorClient({ baseUrl: `http://127.0.0.1:${port}`, requestTimeoutMs: 200 });
    const error = await client.acquire('r', { ttlMs: 1_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ServiceUnreachableError);
    expect((error as Error).message).toBe(
      `could not reach the coordinator service at http://127.0.0.1:${port}: timed out after 200 ms ` +
        '(1 attempt); is it running, and is baseUrl right?',
    );
  });
});
