import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FailureLog } from '../../../bench/suite/runner.js';
import { Progress } from '../../../bench/suite/progress.js';
import { runHttp } from '../../../bench/suite/scenarios/http.js';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';

/** A tiny plan: the scenario's processes and plumbing, not its numbers (benchmarks are never judged on time). */
const PLAN = { concurrencies: [1, 4], warmupMs: 50, durationMs: 150, ttlMs: 5_000 };
const LIMITS = { maxTtlMs: 5_000, tokenRetentionMs: 5_000 };

function runState() {
  return { progress: new Progress(), failures: new FailureLog(), runs: 1 };
}

describe('bench scenario 6 (the HTTP service as a process)', () => {
  it("fails with the service's own words when the service refuses to start", async () => {
    const state = runState();
    const run = runHttp(['http://not-redis.invalid'], LIMITS, [], PLAN, state);
    await expect(run).rejects.toThrow(/exited \(code 2\)[\s\S]*FENCED_REDIS_URLS/);
  });

  describe('on five Redis nodes', () => {
    let redis: RedisNodes;
    let admin: Redis[];

    beforeAll(async () => {
      redis = await startRedisNodes(5, { useExisting: false });
      admin = redis.urls.map((url) => new Redis(url, { enableAutoPipelining: false }));
    });
    afterAll(async () => {
      for (const client of admin ?? []) client.disconnect();
      await redis?.stop();
    });

    it('measures the service and the canned server with the load generator in its own process', async () => {
      const state = runState();
      const result = await runHttp(redis.urls, LIMITS, admin, PLAN, state);
      expect(state.failures.list()).toEqual([]);
      expect(Object.keys(result.byConcurrency)).toEqual(['1', '4']);
      for (const { service, canned, ratio } of Object.values(result.byConcurrency)) {
        expect(service.runs).toHaveLength(1);
        expect(service.medianPerSecond).toBeGreaterThan(0);
        expect(canned.medianPerSecond).toBeGreaterThan(0);
        expect(service.errors + canned.errors).toBe(0);
        expect(Number.isFinite(ratio)).toBe(true);
        expect(service.redisCpuUsPerCycle).toBeGreaterThanOrEqual(0);
        expect(canned.redisCpuUsPerCycle).toBeUndefined();
      }
      expect(result.profile).toBeUndefined();
    });
  });
});
