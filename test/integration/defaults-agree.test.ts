// Defaults agree (DESIGN §3): every product of the project on its defaults — the library, the HTTP service, the
// Redlock drop-in and the operator CLI — works over the same fresh nodes, whichever initializes them. Each order
// below starts a different product first (it initializes the nodes and records its settings: the library and the
// service one hour and the 'fenced' layout, a Redlock Number.MAX_SAFE_INTEGER and the 'redlock' layout); the others
// then start on their defaults, adopt what is recorded, and each takes and releases a lease on the same resource (the
// CLI reads the status, which needs a quorum; it only reads, and never initializes nodes, so it never goes first). Before, a service and a library worker on their own defaults refused
// each other (maxTtlMs 300 000 against 3 600 000), and a Coordinator was refused on nodes a Redlock initialized.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Coordinator } from '@fenced/coordinator';
import { Redlock } from '@fenced/redlock';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { runCli } from '../../packages/coordinator/src/cli/run-cli.js';
import { startTestService, type TestService } from '../fixtures/service-fixture.js';

type Product = 'library' | 'service' | 'redlock' | 'cli';

let env: RedisNodes;
let raw: Redis[];

beforeAll(async () => {
  env = await startRedisNodes(3);
  raw = env.urls.map((url) => new Redis(url));
});

afterAll(async () => {
  for (const client of raw ?? []) client.disconnect();
  await env?.stop();
});

/** Starts `product` on its defaults over the nodes and has it take and release a lease on `resource`. */
async function use(product: Product, resource: string, closers: (() => Promise<unknown>)[]): Promise<string> {
  switch (product) {
    case 'library': {
      const coordinator = new Coordinator({ nodes: env.urls });
      closers.push(() => coordinator.close());
      const lease = await coordinator.acquire(resource, { ttlMs: 5_000, waitMs: 10_000 });
      await lease.release();
      return `library token ${lease.token}`;
    }
    case 'service': {
      const service: TestService = await startTestService(env.urls);
      closers.push(() => service.close());
      const granted = await service.call(`/v1/locks/${encodeURIComponent(resource)}/leases`, {
        method: 'POST',
        json: { ttlMs: 5_000, waitMs: 10_000 },
      });
      expect(granted.status, granted.text).toBe(201);
      const { leaseId, token } = granted.body as { leaseId: string; token: string };
      const released = await service.call(
        `/v1/locks/${encodeURIComponent(resource)}/leases/${encodeURIComponent(leaseId)}`,
        { method: 'DELETE' },
      );
      expect(released.status, released.text).toBe(204);
      return `service token ${token}`;
    }
    case 'redlock': {
      const clients = env.urls.map((url) => new Redis(url));
      const redlock = new Redlock(clients);
      closers.push(async () => {
        await redlock.quit();
        for (const client of clients) client.disconnect();
      });
      const lock = await redlock.acquire([resource], 5_000);
      await redlock.release(lock);
      return `redlock token ${lock.token}`;
    }
    case 'cli': {
      const lines: string[] = [];
      const code = await runCli(
        ['status'],
        { FENCED_REDIS_URLS: env.urls.join(',') },
        { out: (l) => lines.push(l), err: (l) => lines.push(l) },
      );
      expect(code, lines.join('\n')).toBe(0);
      return 'cli status ok';
    }
  }
}

const ORDERS: Product[][] = [
  ['library', 'service', 'redlock', 'cli'],
  ['service', 'redlock', 'cli', 'library'],
  ['redlock', 'cli', 'library', 'service'],
  ['library', 'cli', 'redlock', 'service'],
];

describe('every product on its defaults over the same fresh nodes', () => {
  it.each(ORDERS)(
    'starting with the %s, then the %s, the %s and the %s: all serve',
    async (...order) => {
      await Promise.all(raw.map((client) => client.flushall()));
      const closers: (() => Promise<unknown>)[] = [];
      const done: string[] = [];
      try {
        for (const product of order) done.push(await use(product, 'defaults-agree', closers));
      } finally {
        for (const close of closers.reverse()) await close().catch(() => undefined);
      }
      expect(done, done.join('; ')).toHaveLength(order.length);
      // Tokens only grow across the products: they share one register for the resource.
      const tokens = done.filter((d) => d.includes('token')).map((d) => BigInt(d.split(' ').at(-1)!));
      for (let i = 1; i < tokens.length; i++) expect(tokens[i]! > tokens[i - 1]!, done.join('; ')).toBe(true);
    },
    90_000,
  );
});
