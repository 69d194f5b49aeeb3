import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import {
  eventually,
  lockPath,
  startTestService,
  unique,
  type TestService,
} from '../../fixtures/service-fixture.js';

const SERVER_ENTRY = fileURLToPath(
  new URL('../../../packages/coordinator/src/bin/fenced-coordinator.ts', import.meta.url),
);

describe('coordinator service: disconnects during a wait, graceful shutdown, the entry point', () => {
  let redis: RedisNodes;
  let service: TestService;

  beforeAll(async () => {
    redis = await startRedisNodes(5, { useExisting: false });
    service = await startTestService(redis.urls);
  });
  afterAll(async () => {
    await service?.close();
    await redis?.stop();
  });

  async function metric(target: TestService, name: string, labels = ''): Promise<number> {
    const series = labels === '' ? name : `${name}{${labels}}`;
    const line = (await target.call('/metrics')).text.split('\n').find((l) => l.startsWith(`${series} `));
    return line === undefined ? 0 : Number(line.split(' ')[1]);
  }

  async function hold(target: TestService, resource: string): Promise<string> {
    const response = await target.call(lockPath(resource, 'leases'), {
      method: 'POST',
      json: { ttlMs: 60_000 },
    });
    expect(response.status).toBe(201);
    return (response.body as { leaseId: string }).leaseId;
  }

  /** Starts a waiting acquire and resolves once the server is waiting on it. */
  async function startWaiting(
    target: TestService,
    resource: string,
    signal?: AbortSignal,
  ): Promise<{ response: Promise<Response> }> {
    const inFlight = await metric(target, 'fenced_acquires_in_flight');
    const response = fetch(`${target.url}${lockPath(resource, 'leases')}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ttlMs: 60_000, waitMs: 20_000 }),
      ...(signal ? { signal } : {}),
    });
    response.catch(() => undefined);
    await eventually(async () => (await metric(target, 'fenced_acquires_in_flight')) > inFlight, {
      timeoutMs: 10_000,
      what: 'the acquire is waiting on the server',
    });
    return { response };
  }

  async function expectFree(resource: string): Promise<void> {
    await eventually(
      async () => ((await service.call(lockPath(resource))).body as { held: boolean }).held === false,
      { timeoutMs: 10_000, what: 'the resource is free' },
    );
    const fresh = await service.call(lockPath(resource, 'leases'), { method: 'POST', json: { ttlMs: 1000 } });
    expect(fresh.status).toBe(201);
    await service.call(lockPath(resource, 'leases', (fresh.body as { leaseId: string }).leaseId), {
      method: 'DELETE',
    });
  }

  it('cancels the wait of a client that disconnects, leaving no lease held', async () => {
    const resource = unique('disconnect');
    const holder = await hold(service, resource);
    const before = await metric(service, 'fenced_lease_denials_total', 'reason="client_disconnected"');
    const controller = new AbortController();
    const { response } = await startWaiting(service, resource, controller.signal);
    controller.abort();
    await expect(response).rejects.toThrow();
    await eventually(
      async () =>
        (await metric(service, 'fenced_lease_denials_total', 'reason="client_disconnected"')) === before + 1,
      { timeoutMs: 10_000, what: 'the server noticed the disconnect' },
    );
    // The waiter is gone: when the holder releases, nobody gets the lease.
    expect((await service.call(lockPath(resource, 'leases', holder), { method: 'DELETE' })).status).toBe(204);
    await expectFree(resource);
  });

  it('releases at once a lease granted just as its waiting client disconnected', async () => {
    // The release of the holder and the disconnect of the waiter race: whichever wins, the waiter must end up
    // holding nothing (either its wait was cancelled, or its late grant was released by the server).
    for (let round = 0; round < 5; round++) {
      const resource = unique(`race-${round}`);
      const holder = await hold(service, resource);
      const cancelled = await metric(service, 'fenced_lease_denials_total', 'reason="client_disconnected"');
      const releasedLate = await metric(service, 'fenced_lease_grants_released_after_disconnect_total');
      const controller = new AbortController();
      const { response } = await startWaiting(service, resource, controller.signal);
      await Promise.all([
        service.call(lockPath(resource, 'leases', holder), { method: 'DELETE' }),
        Promise.resolve().then(() => controller.abort()),
      ]);
      await response.catch(() => undefined);
      await eventually(
        async () =>
          (await metric(service, 'fenced_lease_denials_total', 'reason="client_disconnected"')) -
            cancelled +
            (await metric(service, 'fenced_lease_grants_released_after_disconnect_total')) -
            releasedLate >=
          1,
        { timeoutMs: 10_000, what: 'the server handled the disconnect' },
      );
      await expectFree(resource); // the orphan lease had a 60 s TTL: free within the bound means released
    }
  });

  it('shuts down gracefully: waiting acquires get 503, held leases stay, new connections are refused', async () => {
    const resource = unique('shutdown');
    const stopping = await startTestService(redis.urls);
    const holder = await hold(stopping, resource);
    const { response } = await startWaiting(stopping, resource);
    await stopping.close();
    const answered = await response;
    expect(answered.status).toBe(503);
    expect(await answered.json()).toEqual({
      error: { code: 'QUORUM_UNAVAILABLE', message: expect.stringContaining('shutting down') as string },
    });
    await expect(fetch(`${stopping.url}/healthz`)).rejects.toThrow();
    // The lease held through the stopped instance is untouched; the waiter got nothing.
    expect((await service.call(lockPath(resource))).body).toMatchObject({ held: true });
    expect((await service.call(lockPath(resource, 'leases', holder), { method: 'DELETE' })).status).toBe(204);
    await expectFree(resource);
  });

  it('runs as a process: SIGTERM drains and exits 0', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', SERVER_ENTRY], {
      env: {
        ...process.env,
        FENCED_REDIS_URLS: redis.urls.join(','),
        FENCED_PORT: '0',
        FENCED_LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    const listening = new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        const line = output.split('\n').find((l) => l.includes('"fenced coordinator listening"'));
        if (line) resolve(line);
      });
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.once('exit', () => reject(new Error(`exited before listening:\n${output}`)));
    });
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      child.once('exit', (code, signal) => resolve([code, signal])),
    );
    try {
      const { port } = JSON.parse(await listening) as { port: number };
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(health.status).toBe(200);
      child.kill('SIGTERM');
      expect(await exited).toEqual([0, null]);
      expect(output).toContain('"msg":"stopped"');
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });

  it('refuses to start without FENCED_REDIS_URLS, naming the variable, with exit code 2', async () => {
    const env = { ...process.env };
    delete env.FENCED_REDIS_URLS;
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@fenced/source', SERVER_ENTRY], {
      env: { ...env, FENCED_PORT: 'eighty' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    expect(code).toBe(2);
    expect(stderr).toContain('FENCED_REDIS_URLS is required');
    expect(stderr).toContain('FENCED_PORT must be an integer from 0 to 65535, got "eighty" (string)');
  });
});
