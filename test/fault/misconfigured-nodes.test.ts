// F14: a token register that is evicted (or expired, or deleted) is a node that forgot what it promised. The
// start-up checks must refuse nodes configured to evict; a node that lost its keys anyway is caught as one that
// restarted empty.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnsafeNodeError } from '@fenced/coordinator';
import { proxyEach, type FaultProxies } from '@fenced/test-utils/fault-proxy';
import { History } from '@fenced/test-utils/history';
import { keysOf, nodeKeysOf } from '../fixtures/keys.js';
import { holderIncrement, recordedIncrement } from '../fixtures/fault/counter-ops.js';
import { FaultWorld, seedRegistersAhead, unique } from '../fixtures/fault/fault-world.js';
import {
  guardedCriticalSections,
  judge,
  recordedAcquire,
  recordedRelease,
  type Verdict,
} from '../fixtures/fault/verdict.js';

/** Nodes 0-2, a majority, may evict any key under memory pressure: `maxmemory-policy allkeys-lru`. */
const EVICTING = [0, 1, 2];

let world: FaultWorld;
const linkSets: FaultProxies[] = [];

beforeAll(async () => {
  world = await FaultWorld.start({
    initialize: false, // a safe coordinator would refuse this cluster
    nodeOptions: (i) => (EVICTING.includes(i) ? { extraArgs: ['--maxmemory-policy', 'allkeys-lru'] } : {}),
  });
});

afterAll(async () => {
  await Promise.allSettled(linkSets.map((l) => l.stop()));
  await world?.close();
});

describe('nodes that may evict token registers (F14)', () => {
  it('are refused by the start-up checks: with a majority of them nothing is granted', async () => {
    const resource = unique('f14-refused');
    const history = new History();
    const coordinator = world.coordinator({ keyPrefix: `f14-${randomUUID().slice(0, 8)}` });
    const error: unknown = await coordinator.ready().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnsafeNodeError);
    expect((error as Error).message).toMatch(/maxmemory-policy is 'allkeys-lru'; it must be 'noeviction'/);
    expect(await recordedAcquire(history, 'A', coordinator, resource, { ttlMs: 1_000 })).toBeNull();
    const verdict = await judge(world, history, [resource]);
    expect(verdict.violations).toEqual([]);
    expect(verdict.info.join('\n')).not.toMatch(/grants/);
  });

  /**
   * With the checks waived: A grants three times (tokens on every node), then memory pressure on the evicting
   * nodes evicts every key they hold. B — a fresh process cut off from nodes 3 and 4 — asks next, so the
   * majority it sees is exactly the nodes that forgot. With restart detection off, the evicted incarnation keys
   * are put back (eviction takes them first: nothing ever reads them but EXISTS, which does not touch the LRU
   * clock), as if only the registers had gone.
   */
  async function evicted(detection: boolean): Promise<Verdict> {
    const keyPrefix = `f14-${randomUUID().slice(0, 8)}`;
    const options = { keyPrefix, unsafeAllowUnsafeNodes: true };
    const resource = unique('f14');
    await world.ensureCounter(resource);
    const history = new History();
    const raw = await world.connectedClients(world.urls);
    const init = world.coordinator(options);
    await init.ready();
    await world.closeCoordinator(init);
    await seedRegistersAhead(raw, resource, keyPrefix);

    const a = world.coordinator(options);
    await guardedCriticalSections(world, history, 'A', a, resource, 3);
    await world.closeCoordinator(a);

    const incarnation = nodeKeysOf(keyPrefix).incarnation;
    for (const i of EVICTING) {
      const node = raw[i]!;
      // Memory pressure: with maxmemory at one byte, the next write makes Redis evict every key it can.
      await node.config('SET', 'maxmemory', '1');
      await node.set('pressure', 'x').catch(() => undefined); // OOM once nothing is left to evict
      await node.config('SET', 'maxmemory', '0');
      expect(await node.exists(keysOf(resource, keyPrefix).token)).toBe(0);
      if (!detection) await node.set(incarnation, 'pretend-nothing-happened');
    }

    const links = await proxyEach(world.urls);
    linkSets.push(links);
    for (const i of [3, 4]) links.proxies[i]!.setMode('blackhole');
    const b = world.coordinator({ ...options, nodes: links.urls });
    let lease = await recordedAcquire(history, 'B', b, resource, { ttlMs: 2_000, waitMs: 2_000 });
    // Healed, B reaches nodes 3 and 4 again, but only two nodes remember anything: a repair needs three
    // sources, so the forgetful majority never votes again. B retries a few times, then gives up.
    links.release();
    for (let attempt = 0; attempt < 3 && !lease; attempt++)
      lease = await recordedAcquire(history, 'B', b, resource, { ttlMs: 2_000, waitMs: 1_000 });
    if (lease) {
      await recordedIncrement(history, world.store, holderIncrement('B', lease, 'guarded')).catch(
        () => undefined,
      );
      await recordedRelease(history, 'B', lease);
    }
    await world.closeCoordinator(b);
    return judge(world, history, [resource]);
  }

  it('waived, a majority whose keys were all evicted is caught like empty restarts: refusal, not regression', async () => {
    const verdict = await evicted(true);
    expect(verdict.violations).toEqual([]);
    // A's three grants only: B is refused for as long as it tries (no majority can be repaired from two nodes).
    expect(verdict.info.join('\n')).toMatch(/: 3 grants/);
    expect(verdict.info.join('\n')).toMatch(/final 3, 3 increments ok/);
  });

  it('negative control: waived checks and restart detection off let evicted registers send tokens backwards', async () => {
    const verdict = await evicted(false);
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/tokens: .*yet its token is not larger/);
  });
});
