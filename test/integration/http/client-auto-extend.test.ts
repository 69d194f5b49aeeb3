import { setTimeout as sleep } from 'node:timers/promises';
import { LeaseLostError } from '@fenced/shared';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CoordinatorClient, type ClientLease } from '@fenced/coordinator/client';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { eventually, startTestService, uniqueResource, type TestService } from './service-harness.js';

// Self-renewing leases of the HTTP client (`autoExtend`) against the real service and real Redis: kept for ten
// ttls with one token, the signal aborts soon after the service loses a majority, onLost runs once, and no
// extension is sent after a release, a loss or `client.close()`.

/** A client whose requests are counted: every extension the keeper sends, and the requests still in flight. */
function countingClient(url: string): {
  client: CoordinatorClient;
  extensions: () => number;
  inFlight: () => number;
} {
  let extensions = 0;
  let inFlight = 0;
  const client = new CoordinatorClient({
    baseUrl: url,
    fetch: async (input, init) => {
      if (String(input instanceof Request ? input.url : input).endsWith('/extend')) extensions++;
      inFlight++;
      try {
        return await fetch(input, init);
      } finally {
        inFlight--;
      }
    },
  });
  return { client, extensions: () => extensions, inFlight: () => inFlight };
}

describe('CoordinatorClient autoExtend', () => {
  let redis: RedisNodes;
  let service: TestService;

  beforeAll(async () => {
    redis = await startRedisNodes(3, { useExisting: false });
    service = await startTestService(redis.urls, { FENCED_MIN_TTL_MS: '100' });
  });
  afterEach(() => {
    for (const node of redis.nodes) node.resume();
  });
  afterAll(async () => {
    await service?.close();
    await redis?.stop();
  });

  /**
   * Once every request has settled, no extension is sent for two ttls and the signal does not change (a
   * leftover expiry timer would abort a released lease's signal once its ttl passed).
   */
  async function expectNoTimers(
    lease: ClientLease,
    counting: ReturnType<typeof countingClient>,
    ttlMs: number,
  ): Promise<void> {
    expect(lease.autoExtending).toBe(false);
    await eventually(() => Promise.resolve(counting.inFlight() === 0), 30_000, 'requests settled');
    const before = counting.extensions();
    const aborted = lease.signal.aborted;
    await sleep(2 * ttlMs);
    expect(counting.extensions()).toBe(before);
    expect(lease.signal.aborted).toBe(aborted);
  }

  it('keeps a lease for ten times its ttl with the same token, and stops on release', async () => {
    const counting = countingClient(service.url);
    const resource = uniqueResource('auto-extend');
    // Well above one HTTP round trip plus an event-loop stall on a loaded machine: a 500 ms lease could arrive
    // with its validity already spent.
    const ttlMs = 1_000;
    const lost: unknown[] = [];
    const lease = await counting.client.acquire(resource, {
      ttlMs,
      autoExtend: true,
      onLost: (e) => lost.push(e),
    });
    expect(lease.autoExtending).toBe(true);
    const token = lease.token;
    const workUntil = performance.now() + 10 * ttlMs;
    while (performance.now() < workUntil) {
      await sleep(100);
      expect(lease.signal.aborted).toBe(false);
      expect(lease.remainingMs()).toBeGreaterThan(0);
    }
    expect(await counting.client.inspect(resource)).toEqual({ held: true, token });
    expect(lease.token).toBe(token);
    expect(counting.extensions()).toBeGreaterThanOrEqual(10);
    expect(lost).toEqual([]);

    await lease.release();
    expect(lease.signal.aborted).toBe(false);
    await expectNoTimers(lease, counting, ttlMs);
    expect(await counting.client.inspect(resource)).toEqual({ held: false });
    expect(lost).toEqual([]);
  });

  it('aborts the signal with LeaseLostError within one ttl of the lease end when the service loses a majority', async (ctx) => {
    const why = redis.missing('pause');
    if (why) ctx.skip(why);
    const counting = countingClient(service.url);
    const ttlMs = 1_000;
    const lost: LeaseLostError[] = [];
    const lease = await counting.client.acquire(uniqueResource('auto-lost'), {
      ttlMs,
      autoExtend: true,
      onLost: (e) => lost.push(e),
    });
    let abortedAt: number | undefined;
    let remainingAtAbort: number | undefined;
    lease.signal.addEventListener('abort', () => {
      abortedAt = performance.now();
      remainingAtAbort = lease.remainingMs();
    });
    await sleep(2 * ttlMs);
    expect(lease.signal.aborted).toBe(false);

    redis.nodes[0]!.pause();
    redis.nodes[1]!.pause();
    const pausedAt = performance.now();
    await eventually(() => Promise.resolve(lease.signal.aborted), 2 * ttlMs, 'the signal aborted');
    expect(abortedAt! - pausedAt).toBeLessThanOrEqual(2 * ttlMs);
    expect(remainingAtAbort!).toBeGreaterThan(-ttlMs);
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(lost).toEqual([lease.signal.reason]);

    redis.nodes[0]!.resume();
    redis.nodes[1]!.resume();
    await expectNoTimers(lease, counting, ttlMs);
    expect(lost).toHaveLength(1);
    await lease.release();
  });

  it('close() stops every kept lease: the signal aborts, onLost runs once, nothing more is sent', async () => {
    const counting = countingClient(service.url);
    const lost: LeaseLostError[] = [];
    const lease = await counting.client.acquire(uniqueResource('auto-close'), {
      ttlMs: 400,
      autoExtend: true,
      onLost: (e) => lost.push(e),
    });
    await sleep(500);
    counting.client.close();
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(lost).toEqual([lease.signal.reason]);
    await expectNoTimers(lease, counting, 400);
    counting.client.close();
    expect(lost).toHaveLength(1);
    await lease.release();
  });

  it('without autoExtend, the signal aborts when the lease runs out and never on release', async () => {
    const { client } = countingClient(service.url);
    const released = await client.acquire(uniqueResource('watch-released'), { ttlMs: 300 });
    const releasedSignal = released.signal;
    await released.release();
    const lease = await client.acquire(uniqueResource('watch-expiry'), { ttlMs: 300 });
    expect(lease.autoExtending).toBe(false);
    await eventually(() => Promise.resolve(lease.signal.aborted), 600, 'the signal aborted');
    expect(lease.signal.reason).toBeInstanceOf(LeaseLostError);
    await sleep(300);
    expect(releasedSignal.aborted).toBe(false);
  });
});
