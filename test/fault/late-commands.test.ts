// F11: an extend and a release that arrive late — after their lease expired and a successor took the
// resource — must not touch the successor's lease.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { proxyEach } from '@fenced/test-utils/fault-proxy';
import { History } from '@fenced/test-utils/history';
import { keysOf } from '../fixtures/keys.js';
import {
  holderIncrement,
  readOutside,
  recordedIncrement,
  type WriteMode,
} from '../fixtures/fault/counter-ops.js';
import { FaultWorld, leaseRef, unique } from '../fixtures/fault/fault-world.js';
import {
  judge,
  recordedAcquire,
  recordedRelease,
  sleep,
  until,
  type Verdict,
} from '../fixtures/fault/verdict.js';

let world: FaultWorld;

beforeAll(async () => {
  world = await FaultWorld.start();
});

afterAll(async () => {
  await world?.close();
});

/**
 * A holds the lease; its extend and its release leave A but wait in the network (FaultProxy 'hold', to-server)
 * until A's lease expired and B acquired. Then they arrive. C tries the lease while B is still inside its
 * critical section; B writes last. The negative control releases the way a naive client does — DEL the key,
 * without checking whose it is — and writes without the guard.
 */
async function lateExtendAndRelease(
  protectedRun: boolean,
): Promise<{ verdict: Verdict; heldBy: bigint | undefined; bToken: bigint }> {
  const resource = unique('f11');
  await world.ensureCounter(resource);
  const history = new History();
  const mode: WriteMode = protectedRun ? 'guarded' : 'unguarded';
  const links = await proxyEach(world.urls);
  let heldBy: bigint | undefined;
  try {
    const a = world.coordinator({ nodes: links.urls, nodeTimeoutMs: 200 });
    const aRaw = await world.connectedClients(links.urls);
    const c = world.coordinator();
    const aLease = await recordedAcquire(history, 'A', a, resource, { ttlMs: 500 });
    if (!aLease) throw new Error('A did not get the lease');

    links.setMode('hold', { direction: 'to-server' });
    if (protectedRun) {
      const extend = history
        .run(
          'A',
          'extend',
          resource,
          // By id, so an ok outcome would record the token the nodes returned, not the lease object's own.
          () => a.extend(resource, aLease.id, 500),
          (extended) => ({ token: extended.token }),
          { fields: { leaseId: leaseRef(aLease.id) } },
        )
        .catch(() => undefined);
      await recordedRelease(history, 'A', aLease);
      await extend;
    } else {
      for (const r of aRaw) void r.del(keysOf(resource).lease).catch(() => undefined);
    }
    await until('A’s commands waiting in the network', () =>
      links.proxies.every((p) => p.stats.queuedBytes > 0),
    );
    await sleep(700); // A's lease has expired on every node

    const bLease = await recordedAcquire(history, 'B', c, resource, { ttlMs: 3_000, waitMs: 5_000 });
    if (!bLease) throw new Error('B did not get the lease');
    const bRead = await readOutside(world.store, resource); // B's critical section begins
    links.release(); // A's extend and release land now, on B's keys
    await until('A’s commands delivered', () => links.proxies.every((p) => p.stats.queuedBytes === 0));
    await sleep(50);
    heldBy = (await c.inspect(resource)).token;

    const cLease = await recordedAcquire(history, 'C', world.coordinator(), resource, { ttlMs: 3_000 });
    if (cLease) {
      await recordedIncrement(history, world.store, holderIncrement('C', cLease, mode));
      await recordedRelease(history, 'C', cLease);
    }
    await recordedIncrement(
      history,
      world.store,
      holderIncrement('B', bLease, mode, mode === 'unguarded' ? { readBefore: bRead } : {}),
    ).catch(() => undefined);
    await recordedRelease(history, 'B', bLease);
    return { verdict: await judge(world, history, [resource]), heldBy, bToken: bLease.token };
  } finally {
    await links.stop();
  }
}

describe('a late extend and a late release (F11)', () => {
  it('leave the successor’s lease alone: it stays held with its token, and nobody else gets in', async () => {
    const { verdict, heldBy, bToken } = await lateExtendAndRelease(true);
    expect(verdict.violations).toEqual([]);
    expect(heldBy).toBe(bToken); // still B's after A's commands landed
    expect(verdict.info.join('\n')).toMatch(/final 1, 1 increments ok/);
    expect(verdict.overlaps).toBe(0);
  });

  it('negative control: a naive DEL release deletes the successor’s lease, and without the guard it is overwritten', async () => {
    const { verdict } = await lateExtendAndRelease(false);
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/below the high-water mark/);
  });
});
