import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import {
  eventually,
  lockPath,
  startTestService,
  unique,
  type TestService,
} from '../../fixtures/service-fixture.js';

const WAITERS = 25;

describe('coordinator service: many waiters make no noise', () => {
  let redis: RedisNodes;
  let service: TestService;

  beforeAll(async () => {
    redis = await startRedisNodes(3, { useExisting: false });
    service = await startTestService(redis.urls);
  });
  afterAll(async () => {
    await service?.close();
    await redis?.stop();
  });

  it(`serves ${WAITERS} waiters on one resource, and another ${WAITERS} on one lease set, without a process warning or a byte on stderr`, async () => {
    const warnings: Error[] = [];
    const stderr: string[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning);
    const write = process.stderr.write.bind(process.stderr);
    process.on('warning', onWarning);
    process.stderr.write = (chunk: string | Uint8Array, ...rest: never[]) => {
      stderr.push(String(chunk));
      return write(chunk, ...rest);
    };
    try {
      const resource = unique('many-waiters');
      const set = [unique('many-a'), unique('many-b')];
      const single = await service.call(lockPath(resource, 'leases'), {
        method: 'POST',
        json: { ttlMs: 30_000 },
      });
      const multi = await service.call('/v1/leases', {
        method: 'POST',
        json: { resources: set, ttlMs: 30_000 },
      });
      expect([single.status, multi.status]).toEqual([201, 201]);

      // Every waiter in turn gets the lock and gives it back, so all of them are served.
      const serve = async (
        acquire: () => Promise<{ status: number; body: unknown }>,
        release: (id: string) => Promise<unknown>,
      ) => {
        const granted = await acquire();
        expect(granted.status).toBe(201);
        await release((granted.body as { leaseId: string }).leaseId);
      };
      const waiters = [
        ...Array.from({ length: WAITERS }, () =>
          serve(
            () =>
              service.call(lockPath(resource, 'leases'), {
                method: 'POST',
                json: { ttlMs: 30_000, waitMs: 20_000 },
              }),
            (id) => service.call(lockPath(resource, 'leases', id), { method: 'DELETE' }),
          ),
        ),
        ...Array.from({ length: WAITERS }, () =>
          serve(
            () =>
              service.call('/v1/leases', {
                method: 'POST',
                json: { resources: set, ttlMs: 30_000, waitMs: 20_000 },
              }),
            (id) => service.call(`/v1/leases/${id}`, { method: 'DELETE', json: { resources: set } }),
          ),
        ),
      ];
      await eventually(
        async () =>
          /fenced_acquires_in_flight (\d+)/.exec((await service.call('/metrics')).text)?.[1] ===
          String(2 * WAITERS),
        { timeoutMs: 20_000, what: 'every waiter is waiting on the server' },
      );
      await service.call(lockPath(resource, 'leases', (single.body as { leaseId: string }).leaseId), {
        method: 'DELETE',
      });
      await service.call(`/v1/leases/${(multi.body as { leaseId: string }).leaseId}`, {
        method: 'DELETE',
        json: { resources: set },
      });
      await Promise.all(waiters);
      // Warnings are emitted on the next tick.
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      process.off('warning', onWarning);
      process.stderr.write = write;
    }
    expect(warnings.map((w) => `${w.name}: ${w.message}`)).toEqual([]);
    expect(stderr).toEqual([]);
  });
});
