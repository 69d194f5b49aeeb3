import { inspect } from 'node:util';
import { InvalidRequestError, LeaseLostError, LockedError, UnauthorizedError } from '@fenced/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientLease, CoordinatorClient } from '@fenced/coordinator/client';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import {
  eventually,
  lockPath,
  startTestService,
  unique,
  type TestService,
} from '../../../fixtures/service-fixture.js';

const KEY = 'client-test-key-0123456789';

describe('CoordinatorClient against the real service', () => {
  let redis: RedisNodes;
  let service: TestService;
  let client: CoordinatorClient;

  beforeAll(async () => {
    redis = await startRedisNodes(5, { useExisting: false });
    service = await startTestService(redis.urls, { FENCED_API_KEYS: KEY });
    client = new CoordinatorClient({ baseUrl: service.url, apiKey: KEY });
  });
  afterAll(async () => {
    await service?.close();
    await redis?.stop();
  });

  it('acquires, inspects, extends with the same token, and releases', async () => {
    const resource = unique('client');
    const lease = await client.acquire(resource, { ttlMs: 5_000 });
    expect(lease).toBeInstanceOf(ClientLease);
    expect(lease.resource).toBe(resource);
    expect(typeof lease.token).toBe('bigint');
    expect(lease.ttlMs).toBe(5_000);
    expect(lease.remainingMs()).toBeGreaterThan(0);
    expect(lease.remainingMs()).toBeLessThanOrEqual(lease.validityMs);
    expect(await client.inspect(resource)).toEqual({ held: true, token: lease.token });

    await client.extend(lease, 20_000);
    expect(lease.ttlMs).toBe(20_000);
    expect(lease.validityMs).toBeGreaterThan(5_000);
    expect((await client.inspect(resource)).token).toBe(lease.token);

    await client.release(lease);
    expect(lease.released).toBe(true);
    await lease.release(); // idempotent
    expect(await client.inspect(resource)).toEqual({ held: false });
  });

  it('tryAcquire returns null while the resource is held; acquire throws LockedError', async () => {
    const resource = unique('try');
    const first = await client.tryAcquire(resource, { ttlMs: 5_000 });
    expect(first).not.toBeNull();
    expect(await client.tryAcquire(resource, { ttlMs: 5_000 })).toBeNull();
    const error = await client.acquire(resource, { ttlMs: 5_000, waitMs: 50 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockedError);
    expect((error as LockedError).resource).toBe(resource);
    await first!.release();
    const second = await client.tryAcquire(resource, { ttlMs: 5_000 });
    expect(second!.token).toBeGreaterThan(first!.token);
    await second!.release();
  });

  it('waits on the server when asked, and gets the lease when the holder releases', async () => {
    const resource = unique('wait');
    const holder = await client.acquire(resource, { ttlMs: 10_000 });
    const waiter = client.acquire(resource, { ttlMs: 10_000, waitMs: 10_000 });
    setTimeout(() => void holder.release(), 50);
    const lease = await waiter;
    expect(lease.token).toBeGreaterThan(holder.token);
    await lease.release();
  });

  it('throws the typed errors of @fenced/shared, mapped from the error codes', async () => {
    const resource = unique('errors');
    await expect(client.acquire(resource, { ttlMs: 10 })).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(client.acquire('', { ttlMs: 1000 })).rejects.toBeInstanceOf(InvalidRequestError);
    const stranger = new CoordinatorClient({ baseUrl: service.url, apiKey: 'wrong-key-0123456789' });
    await expect(stranger.acquire(resource, { ttlMs: 1000 })).rejects.toBeInstanceOf(UnauthorizedError);
    await expect(new CoordinatorClient({ baseUrl: service.url }).inspect(resource)).rejects.toBeInstanceOf(
      UnauthorizedError,
    );

    const lease = await client.acquire(resource, { ttlMs: 5_000 });
    await service.call(lockPath(resource, 'leases', lease.id), { method: 'DELETE', apiKey: KEY });
    const lost = await lease.extend().catch((e: unknown) => e);
    expect(lost).toBeInstanceOf(LeaseLostError);
    expect((lost as LeaseLostError).resource).toBe(resource);
  });

  it('keeps the lease id out of JSON and inspect output', async () => {
    const lease = await client.acquire(unique('secret'), { ttlMs: 5_000 });
    expect(JSON.stringify(lease)).not.toContain(lease.id);
    expect(JSON.stringify(lease)).toContain(lease.token.toString());
    expect(inspect(lease)).not.toContain(lease.id);
    expect(Object.keys(lease)).not.toContain('id');
    await lease.release();
  });

  it('releases at the end of an `await using` block', async () => {
    const resource = unique('await-using');
    {
      await using lease = await client.acquire(resource, { ttlMs: 5_000 });
      expect((await client.inspect(resource)).token).toBe(lease.token);
    }
    expect(await client.inspect(resource)).toEqual({ held: false });
  });

  it('using() extends the lease in the background while the routine runs, then releases it', async () => {
    const resource = unique('using');
    const result = await client.using(resource, { ttlMs: 1_000 }, async (lease, signal) => {
      const firstExpiry = lease.expiresAt.getTime();
      // Outlive the TTL: only extensions keep the lease.
      await eventually(() => Promise.resolve(lease.expiresAt.getTime() > firstExpiry + 1_000), {
        timeoutMs: 10_000,
        what: 'extensions',
      });
      expect(signal.aborted).toBe(false);
      expect(await client.inspect(resource)).toEqual({ held: true, token: lease.token });
      return 'done';
    });
    expect(result).toBe('done');
    expect(await client.inspect(resource)).toEqual({ held: false });
  });

  it("using() rethrows the routine's own error and still releases", async () => {
    const resource = unique('using-error');
    const failure = new Error('the routine failed');
    const thrown = await client
      .using(resource, { ttlMs: 5_000 }, async () => {
        await Promise.resolve();
        throw failure;
      })
      .catch((e: unknown) => e);
    expect(thrown).toBe(failure);
    expect(await client.inspect(resource)).toEqual({ held: false });
  });

  it('using() aborts the signal with LeaseLostError when the lease is lost', async () => {
    const resource = unique('using-lost');
    const reason = await client.using(resource, { ttlMs: 300 }, async (lease, signal) => {
      // Somebody (an operator, a successor after expiry) releases the lease behind the holder's back.
      await service.call(lockPath(resource, 'leases', lease.id), { method: 'DELETE', apiKey: KEY });
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener('abort', () => resolve(), { once: true });
      });
      return signal.reason as unknown;
    });
    expect(reason).toBeInstanceOf(LeaseLostError);
    expect(await client.inspect(resource)).toEqual({ held: false });
  });

  it('a caller abort cancels a waiting acquire, and no lease is left behind', async () => {
    const resource = unique('abort');
    const holder = await client.acquire(resource, { ttlMs: 10_000 });
    const controller = new AbortController();
    const waiting = client.acquire(resource, { ttlMs: 10_000, waitMs: 10_000, signal: controller.signal });
    setTimeout(() => controller.abort(new Error('caller gave up')), 50);
    await expect(waiting).rejects.toThrow('caller gave up');
    await holder.release();
    await eventually(async () => (await client.inspect(resource)).held === false, {
      timeoutMs: 10_000,
      what: 'resource free',
    });
    const fresh = await client.tryAcquire(resource, { ttlMs: 1_000 });
    expect(fresh).not.toBeNull();
    await fresh!.release();
  });
});
