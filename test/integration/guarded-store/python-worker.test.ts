// A worker that is not written in Node (examples/python-worker/worker.py: Python, psycopg 3, the standard
// library's HTTP client) takes its lease from the coordinator service and fences its Postgres transaction with
// the guard's SQL function. Run where a python3 with psycopg is installed (scripts/setup.sh installs Debian's
// python3-psycopg); elsewhere the test is skipped, and its title says why.
import { execFile, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { createStoreFixture, unique, type StoreFixture } from '../../fixtures/guarded-store-fixture.js';
import { startTestService, type TestService } from '../../fixtures/service-fixture.js';

const WORKER = fileURLToPath(new URL('../../../examples/python-worker/worker.py', import.meta.url));

/** The first python3 that has psycopg 3, or undefined. */
function findPython(): string | undefined {
  for (const candidate of ['python3', '/usr/bin/python3']) {
    const probe = spawnSync(candidate, ['-c', 'import psycopg'], { encoding: 'utf8' });
    if (probe.status === 0) return candidate;
  }
  return undefined;
}

const python = findPython();
const SKIPPED =
  'skipped: no python3 with psycopg 3 on this machine (apt-get install python3-psycopg, or pip install psycopg)';

describe.skipIf(python === undefined)(
  `a Python worker fences its transaction with the SQL function${python === undefined ? ` (${SKIPPED})` : ''}`,
  () => {
    let f: StoreFixture<unknown>;
    let redis: RedisNodes;
    let service: TestService;

    beforeAll(async () => {
      [f, redis] = await Promise.all([createStoreFixture(), startRedisNodes(3, { useExisting: false })]);
      service = await startTestService(redis.urls);
      await f.sql('create table account (id text primary key, balance bigint not null)');
    });
    afterAll(async () => {
      await service?.close();
      await redis?.stop();
      await f?.close();
    });

    /** Runs the worker (asynchronously: the service it calls runs in this process). */
    function runWorker(account: string, amount: number, leaseJson?: string) {
      const args = [
        WORKER,
        'deposit',
        account,
        String(amount),
        ...(leaseJson ? ['--lease-json', leaseJson] : []),
      ];
      const env = {
        PATH: process.env.PATH ?? '',
        FENCED_COORDINATOR_URL: service.url,
        FENCED_DATABASE_URL: f.server.url,
        FENCED_SCHEMA: f.schema.schema,
        PGOPTIONS: `-c search_path=${f.schema.schema}`,
      };
      return new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
        execFile(python!, args, { encoding: 'utf8', timeout: 60_000, env }, (error, stdout, stderr) => {
          const code = error === null ? 0 : typeof error.code === 'number' ? error.code : null;
          resolve({ status: code, stdout, stderr });
        });
      });
    }

    async function balance(account: string): Promise<string | undefined> {
      const [row] = await f.sql<{ balance: string }>('select balance::text from account where id = $1', [
        account,
      ]);
      return row?.balance;
    }

    it('writes under a lease from the service, and raises the fence to its token', async () => {
      const account = unique('py');
      const first = await runWorker(account, 10);
      expect(first.status, first.stderr).toBe(0);
      const written = JSON.parse(first.stdout) as { token: string; balance: number };
      expect(written.balance).toBe(10);
      expect((await f.store.fenceOf(`account:${account}`))?.token).toBe(BigInt(written.token));
      expect((await runWorker(account, 5)).status).toBe(0);
      expect(await balance(account)).toBe('15');
    });

    it('is refused with FN001 (resource, presented and current token) when a later lease has written', async () => {
      const account = unique('py-stale');
      const resource = `account:${account}`;
      const path = `/v1/locks/${encodeURIComponent(resource)}/leases`;
      // The old lease, as a paused worker still holds it; then a newer grant that fences in.
      const old = (await service.call(path, { method: 'POST', json: { ttlMs: 10_000 } })).body as {
        leaseId: string;
        token: string;
      };
      await service.call(`${path}/${encodeURIComponent(old.leaseId)}`, { method: 'DELETE' });
      const newer = (await service.call(path, { method: 'POST', json: { ttlMs: 10_000 } })).body as {
        leaseId: string;
        token: string;
      };
      await f.store.fenceIn({ resource, token: BigInt(newer.token), leaseId: newer.leaseId });

      const stale = await runWorker(account, 100, JSON.stringify(old));
      expect(stale.status, stale.stderr).toBe(3);
      const answer = JSON.parse(stale.stdout) as { written: boolean; stale: Record<string, unknown> };
      expect(answer.written).toBe(false);
      expect(answer.stale).toEqual({
        resource,
        presented: old.token,
        current: newer.token,
        named_lease: true,
      });
      expect(await balance(account)).toBeUndefined();
      // The newer lease's holder still writes.
      expect((await runWorker(account, 7, JSON.stringify(newer))).status).toBe(0);
      expect(await balance(account)).toBe('7');
    });
  },
);
