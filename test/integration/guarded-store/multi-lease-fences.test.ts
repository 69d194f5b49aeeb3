import { generateKeyPairSync } from 'node:crypto';
import { InvalidProofError, LeaseLostError, StaleTokenError, type FencedMultiLease } from '@fenced/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Coordinator } from '@fenced/coordinator';
import type { GuardedStore } from '@fenced/guarded-store';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { createStoreFixture, unique, type StoreFixture } from '../../fixtures/guarded-store-fixture.js';

// store.run(multiLease, …) on real Redis (a signing coordinator) and real Postgres (a verifying store): every
// resource of the lease is fenced, with its own token and proof, in one transaction.

interface Db {
  note: { resource: string; body: string };
}

const key = generateKeyPairSync('ed25519');

let f: StoreFixture<Db>;
let store: GuardedStore<Db>;
let redis: RedisNodes;
let coordinator: Coordinator;

beforeAll(async () => {
  [f, redis] = await Promise.all([
    createStoreFixture<Db>({ verifyKeys: { k1: key.publicKey } }),
    startRedisNodes(3, { useExisting: false }),
  ]);
  store = f.store;
  await f.sql('create table note (resource text not null, body text not null)');
  coordinator = new Coordinator({ nodes: redis.urls, signingKey: { id: 'k1', privateKey: key.privateKey } });
});
afterAll(async () => {
  await coordinator?.close();
  await f?.close();
  await redis?.stop();
});

function write(lease: FencedMultiLease, body: string): Promise<void> {
  return store.run(lease, async (trx) => {
    for (const resource of lease.resources) await trx.insertInto('note').values({ resource, body }).execute();
  });
}

describe('store.run with a multi-resource lease', () => {
  it('fences every resource with its own token and proof', async () => {
    const [a, b] = [unique('a'), unique('b')];
    const lease = await coordinator.acquire([b, a], { ttlMs: 10_000 });
    expect(lease.proofs?.size).toBe(2);
    await write(lease, 'first');
    await write(lease, 'again');
    for (const resource of [a, b])
      expect((await store.fenceOf(resource))?.token).toBe(lease.tokens.get(resource));
    await lease.release();
  });

  it('refuses the older lease once a newer lease over an overlapping set fenced in', async () => {
    const [a, b, c] = [unique('a'), unique('b'), unique('c')];
    const old = await coordinator.acquire([a, b], { ttlMs: 10_000 });
    await write(old, 'old');
    await old.release();
    const newer = await coordinator.acquire([b, c], { ttlMs: 10_000 });
    await store.fenceIn(newer);
    // A released lease is refused by the store at once (LeaseLostError, nothing sent); the fence is what stops a
    // holder that does not know it lost the resource: the same grants, as a paused process still holds them.
    expect(await write(old, 'released').catch((e: unknown) => e)).toBeInstanceOf(LeaseLostError);
    const unaware = { resources: old.resources, id: old.id, tokens: old.tokens, proofs: old.proofs };
    const error: unknown = await write(unaware, 'stale').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StaleTokenError);
    expect((error as StaleTokenError).resource).toBe(b);
    // Nothing of the stale transaction was written, on either resource.
    expect(await f.sql('select 1 from note where body = $1', ['stale'])).toEqual([]);
    await newer.release();
  });

  it('refuses a multi lease whose proofs were swapped between its resources', async () => {
    const [a, b] = [unique('a'), unique('b')];
    const lease = await coordinator.acquire([a, b], { ttlMs: 10_000 });
    const swapped = {
      resources: lease.resources,
      id: lease.id,
      tokens: lease.tokens,
      proofs: new Map([
        [a, lease.proofs!.get(b)!],
        [b, lease.proofs!.get(a)!],
      ]),
    };
    await expect(store.run(swapped, () => Promise.resolve())).rejects.toBeInstanceOf(InvalidProofError);
    expect(await store.fenceOf(a)).toBeUndefined();
    await lease.release();
  });
});

describe('a released coordinator lease', () => {
  it('is refused by store.run at once, even when nobody wrote since', async () => {
    const resource = unique('released');
    const lease = await coordinator.acquire(resource, { ttlMs: 10_000 });
    await store.run(lease, () => Promise.resolve());
    await lease.release();
    let ran = false;
    const error = await store
      .run(lease, () => {
        ran = true;
        return Promise.resolve();
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LeaseLostError);
    expect((error as Error).message).toContain('was released');
    expect(ran).toBe(false);
    const multi = await coordinator.acquire([unique('m1'), unique('m2')], { ttlMs: 10_000 });
    await write(multi, 'held');
    await multi.release();
    expect(await write(multi, 'released').catch((e: unknown) => e)).toBeInstanceOf(LeaseLostError);
  });
});
