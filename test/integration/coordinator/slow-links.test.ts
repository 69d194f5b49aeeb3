// The acquire and extend rules that only a slow network or a split of replies can reach, on real Redis nodes: a
// fault proxy (packages/test-utils/src/fault-proxy.ts) delays the replies of chosen nodes, and registers or lease keys written
// straight to the nodes build the split. The unit tests (acquire-attempt.test.ts, extend.test.ts) pin the same
// rules on virtual time; these show they hold over real sockets and the real scripts.
//
// No timing thresholds: the delays only order events (a round trip through a delayed link ends after one that is
// not delayed, and two of them take longer than the ttl); every assertion is about what was granted.
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Coordinator } from '@fenced/coordinator';
import { LeaseLostError, QuorumUnavailableError } from '@fenced/shared';
import { proxyEach, type FaultProxies } from '@fenced/test-utils/fault-proxy';
import type { RedisNodes } from '@fenced/test-utils/redis-cluster';
import {
  keysOf,
  startCoordinatorFixture,
  unique,
  type CoordinatorFixture,
} from '../../fixtures/coordinator-fixture.js';

let env: RedisNodes;
let raw: Redis[];
let links: FaultProxies;
let cluster: CoordinatorFixture;
const tokenKey = (resource: string): string => keysOf(resource).token;
const leaseKey = (resource: string): string => keysOf(resource).lease;

/** A coordinator whose links to the nodes go through `links` (node 0's too, left in `pass`). */
async function coordinator(): Promise<Coordinator> {
  // A generous per-node timeout: the delayed links must be slow, not failed.
  const c = cluster.another({ nodes: links.urls, nodeTimeoutMs: 5_000, retryJitterMs: 0 });
  await c.ready();
  return c;
}

beforeAll(async () => {
  cluster = await startCoordinatorFixture(3, { coordinator: false });
  ({ env, raw } = cluster);
  links = await proxyEach(env.urls);
});

afterEach(async () => {
  links.setMode('pass');
  await cluster.closeOthers();
});

afterAll(async () => {
  await links?.stop();
  await cluster?.close();
});

describe('a slow second promise round (mutants 01, 03, 04)', () => {
  it('refuses the lease when the round that completes the token ends after the ttl, and releases it', async () => {
    const c = await coordinator();
    const resource = unique('slow-second-round');
    // Nodes 1 and 2 hold a register ahead of any first proposal: the first round gets one promise (node 0's), so
    // the token needs a second round, and both rounds need an answer from node 1 or 2.
    const ahead = (BigInt(Date.now()) << 20n) + (1n << 40n);
    await raw[1]!.set(tokenKey(resource), ahead.toString());
    await raw[2]!.set(tokenKey(resource), ahead.toString());
    // Their replies take 600 ms each way round: the first round ends after 600 ms (a lease with validity left),
    // the second after 1 200 ms — past the 1 000 ms ttl.
    links.proxies[1]!.setMode('delay', { direction: 'to-client', delayMs: 600 });
    links.proxies[2]!.setMode('delay', { direction: 'to-client', delayMs: 600 });

    const error: unknown = await c.acquire(resource, { ttlMs: 1_000 }).then(
      (lease) => lease,
      (e: unknown) => e,
    );

    expect(error).toBeInstanceOf(QuorumUnavailableError);
    expect((error as Error).message).toMatch(/answered too slowly for a 1000 ms ttl/);
    // The token rounds did run: a majority now holds a register above `ahead` ...
    const registers = await Promise.all(raw.map(async (r) => BigInt((await r.get(tokenKey(resource))) ?? 0)));
    expect(registers.filter((r) => r > ahead).length).toBeGreaterThanOrEqual(2);
    // ... and nothing of the refused lease is left on any node.
    for (const r of raw) expect(await r.exists(leaseKey(resource))).toBe(0);

    // The same acquire on healthy links is granted, above every register.
    links.setMode('pass');
    const lease = await c.acquire(resource, { ttlMs: 1_000 });
    expect(lease.token).toBeGreaterThan(ahead);
    await lease.release();
  });
});

describe('an extend while a successor holds the majority (mutant 05)', () => {
  it('is LeaseLostError although our node answers "extended" first, and leaves the successor alone', async () => {
    const c = await coordinator();
    const resource = unique('successor-majority');
    const lease = await c.acquire(resource, { ttlMs: 10_000 });
    // Our keys on nodes 1 and 2 are gone (expired early, F4) and a successor holds them now.
    const successor = `successor|${lease.token + 1n}`;
    for (const r of [raw[1]!, raw[2]!]) await r.set(leaseKey(resource), successor, 'PX', 10_000);
    // Node 0 (ours) answers at once; the successor's nodes after 300 ms.
    links.proxies[1]!.setMode('delay', { direction: 'to-client', delayMs: 300 });
    links.proxies[2]!.setMode('delay', { direction: 'to-client', delayMs: 300 });

    await expect(lease.extend(10_000)).rejects.toBeInstanceOf(LeaseLostError);

    for (const r of [raw[1]!, raw[2]!]) {
      expect(await r.get(leaseKey(resource))).toBe(successor);
      expect(await r.pttl(leaseKey(resource))).toBeGreaterThan(0);
    }
  });
});
