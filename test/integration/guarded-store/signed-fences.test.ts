import { generateKeyPairSync } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { InvalidProofError, InvalidRequestError, MAX_TOKEN, type InvalidProofReason } from '@fenced/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Coordinator, type Lease } from '@fenced/coordinator';
import { GuardedStore, createDatabase, type FenceLike } from '@fenced/guarded-store';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { createStoreFixture, unique, type StoreFixture } from '../../fixtures/guarded-store-fixture.js';

// Signed fences (DESIGN §4b) on real Redis (a signing coordinator) and real Postgres (a verifying store): every
// bad proof is refused with INVALID_PROOF before the fence row or the data is touched; valid leases write.

interface Db {
  note: { resource: string; token: string; body: string };
}

const current = generateKeyPairSync('ed25519');
const next = generateKeyPairSync('ed25519');
const stranger = generateKeyPairSync('ed25519');
const pem = (key: typeof current.publicKey) => key.export({ format: 'pem', type: 'spki' }).toString();

let f: StoreFixture<Db>;
let store: GuardedStore<Db>;
let redis: RedisNodes;
let coordinator: Coordinator;
let strangerCoordinator: Coordinator;

beforeAll(async () => {
  [f, redis] = await Promise.all([
    createStoreFixture<Db>({ verifyKeys: { k1: current.publicKey } }),
    startRedisNodes(3, { useExisting: false }),
  ]);
  store = f.store;
  await f.sql('create table note (resource text not null, token bigint not null, body text not null)');
  coordinator = new Coordinator({
    nodes: redis.urls,
    signingKey: { id: 'k1', privateKey: current.privateKey },
  });
  // Another deployment's coordinator: same key id, its own key (or a leaked key id with a made-up key).
  strangerCoordinator = new Coordinator({
    nodes: redis.urls,
    keyPrefix: 'stranger',
    signingKey: { id: 'k9', privateKey: stranger.privateKey },
  });
});
afterAll(async () => {
  await coordinator?.close();
  await strangerCoordinator?.close();
  await f?.close();
  await redis?.stop();
});

let calls = 0;

function write(target: GuardedStore<Db>, fence: FenceLike, body: string): Promise<string> {
  return target.run(fence, async (trx) => {
    calls++;
    await trx
      .insertInto('note')
      .values({ resource: fence.resource, token: String(fence.token), body })
      .execute();
    return body;
  });
}

async function snapshot(resource: string) {
  const fence = await f.sql<{ token: string; lease_id_hash: Buffer | null; updated_at: Date }>(
    'select token::text as token, lease_id_hash, updated_at from fence where resource = $1',
    [resource],
  );
  const notes = await f.sql<{ body: string }>('select body from note where resource = $1 order by body', [
    resource,
  ]);
  return { fence, notes: notes.map((n) => n.body) };
}

/** The write is refused with INVALID_PROOF, the callback never ran, and neither fence nor data changed. */
async function refused(
  fence: FenceLike,
  reason: InvalidProofReason,
  target = store,
): Promise<InvalidProofError> {
  const before = await snapshot(fence.resource);
  const callsBefore = calls;
  const error = await write(target, fence, 'should-not-exist').then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(InvalidProofError);
  expect((error as InvalidProofError).code).toBe('INVALID_PROOF');
  expect((error as InvalidProofError).reason).toBe(reason);
  expect(calls).toBe(callsBefore);
  expect(await snapshot(fence.resource)).toEqual(before);
  return error as InvalidProofError;
}

async function held(resource: string): Promise<Lease> {
  return coordinator.acquire(resource, { ttlMs: 10_000 });
}

describe('a store with verifyKeys', () => {
  it('lets a signed lease write, again and again (store.run(lease) sends its proof)', async () => {
    const lease = await held(unique('ok'));
    expect(await write(store, lease, 'first')).toBe('first');
    expect(await write(store, lease, 'second')).toBe('second');
    await store.fenceIn(lease);
    expect((await snapshot(lease.resource)).notes).toEqual(['first', 'second']);
    expect((await store.fenceOf(lease.resource))?.token).toBe(lease.token);
    await lease.release();
  });

  it('refuses a forged maximum token with the lease proof, leaving the fence where it was', async () => {
    const lease = await held(unique('forged'));
    await write(store, lease, 'honest');
    await refused(
      { resource: lease.resource, token: MAX_TOKEN, leaseId: lease.id, proof: lease.proof },
      'mismatch',
    );
    // The honest holder is not locked out.
    expect(await write(store, lease, 'honest-again')).toBe('honest-again');
    expect((await store.fenceOf(lease.resource))?.token).toBe(lease.token);
    await lease.release();
  });

  it("refuses another resource's token with that resource's valid proof", async () => {
    const mine = await held(unique('mine'));
    const theirs = await held(unique('theirs'));
    await write(store, mine, 'mine');
    await refused(
      { resource: mine.resource, token: theirs.token, leaseId: theirs.id, proof: theirs.proof },
      'mismatch',
    );
    await Promise.all([mine.release(), theirs.release()]);
  });

  it('refuses a proof made for another lease', async () => {
    const resource = unique('other-lease');
    const first = await held(resource);
    await first.release();
    const second = await held(resource);
    // The second lease's id with the first lease's proof, and the first's token with the second's proof.
    await refused({ resource, token: second.token, leaseId: second.id, proof: first.proof }, 'mismatch');
    await refused({ resource, token: first.token, leaseId: first.id, proof: second.proof }, 'mismatch');
    await refused({ resource, token: second.token, leaseId: first.id, proof: second.proof }, 'mismatch');
    expect(await write(store, second, 'second')).toBe('second');
    await second.release();
  });

  it('refuses a proof signed by an unknown key, and a trusted key id signed with another key', async () => {
    const lease = await strangerCoordinator.acquire(unique('stranger'), { ttlMs: 10_000 });
    const error = await refused(lease, 'unknown-key');
    expect(error.message).toMatch(/key 'k9', which this store does not trust/);
    const impostor = new Coordinator({
      nodes: redis.urls,
      keyPrefix: 'impostor',
      signingKey: { id: 'k1', privateKey: stranger.privateKey },
    });
    try {
      const forged = await impostor.acquire(unique('impostor'), { ttlMs: 10_000 });
      await refused(forged, 'mismatch');
    } finally {
      await impostor.close();
    }
    await lease.release();
  });

  it('refuses a truncated proof, a malformed one, no proof and no lease id, without echoing the proof', async () => {
    const lease = await held(unique('malformed'));
    const base = { resource: lease.resource, token: lease.token, leaseId: lease.id };
    const truncated = await refused({ ...base, proof: lease.proof!.slice(0, -3) }, 'malformed');
    expect(truncated.message).not.toContain(lease.proof!.slice(6, 40));
    expect(truncated.message).not.toContain(lease.id);
    await refused({ ...base, proof: `x${lease.proof!}` }, 'malformed');
    await refused(base, 'missing');
    await refused({ ...base, proof: '' }, 'missing');
    await refused({ resource: lease.resource, token: lease.token, proof: lease.proof }, 'missing-lease-id');
    await lease.release();
  });

  it('refuses before opening any transaction (a store over a closed pool still answers INVALID_PROOF)', async () => {
    const closed = createDatabase<Db>({ connectionString: f.server.url, searchPath: f.schema.schema });
    await closed.destroy();
    const offline = new GuardedStore(closed, {
      schema: f.schema.schema,
      verifyKeys: { k1: current.publicKey },
    });
    const lease = await held(unique('offline'));
    await expect(write(offline, { ...lease, token: MAX_TOKEN, id: lease.id }, 'x')).rejects.toBeInstanceOf(
      InvalidProofError,
    );
    await expect(
      write(offline, { resource: lease.resource, token: lease.token }, 'x'),
    ).rejects.toBeInstanceOf(InvalidProofError);
    await lease.release();
  });

  it('checks several fences of one transaction, refusing all if one is bad', async () => {
    const a = await held(unique('multi-a'));
    const b = await held(unique('multi-b'));
    const before = [await snapshot(a.resource), await snapshot(b.resource)];
    await expect(
      store.run([a, { resource: b.resource, token: MAX_TOKEN, leaseId: b.id, proof: b.proof }], () => {
        calls++;
        return Promise.resolve();
      }),
    ).rejects.toBeInstanceOf(InvalidProofError);
    expect([await snapshot(a.resource), await snapshot(b.resource)]).toEqual(before);
    await store.run([a, b], () => Promise.resolve());
    expect((await store.fenceOf(b.resource))?.token).toBe(b.token);
    await Promise.all([a.release(), b.release()]);
  });
});

describe('key rotation', () => {
  it('keeps old proofs valid while the old public key is listed, and refuses them once it is removed', async () => {
    const newCoordinator = new Coordinator({
      nodes: redis.urls,
      signingKey: { id: 'k2', privateKey: next.privateKey },
    });
    try {
      // Step 1: stores trust both keys (PEM strings work as well as KeyObjects).
      const both = f.anotherStore({ verifyKeys: { k1: pem(current.publicKey), k2: next.publicKey } });
      const old = await held(unique('rotate-old'));
      // Step 2: the coordinator signs with the new key; leases granted before still carry k1 proofs.
      const fresh = await newCoordinator.acquire(unique('rotate-new'), { ttlMs: 10_000 });
      expect(old.proof?.startsWith('v1.k1.')).toBe(true);
      expect(fresh.proof?.startsWith('v1.k2.')).toBe(true);
      expect(await write(both, old, 'old-key')).toBe('old-key');
      expect(await write(both, fresh, 'new-key')).toBe('new-key');
      // A store that does not know k2 yet refuses the new proofs: add keys to stores first.
      await refused(fresh, 'unknown-key', store);
      // Step 3: once no lease signed by k1 is alive, k1 is removed; its proofs are refused from then on.
      const onlyNew = f.anotherStore({ verifyKeys: { k2: next.publicKey } });
      await refused(old, 'unknown-key', onlyNew);
      expect(await write(onlyNew, fresh, 'new-key-again')).toBe('new-key-again');
      await Promise.all([old.release(), fresh.release()]);
    } finally {
      await newCoordinator.close();
    }
  });
});

describe('signing off (the default)', () => {
  it('believes any token, as before: a forged maximum bricks the resource for honest holders', async () => {
    const plain = f.anotherStore({ verifyKeys: undefined });
    expect(plain.verifiesProofs).toBe(false);
    const resource = unique('unsigned');
    await write(plain, { resource, token: MAX_TOKEN }, 'forged');
    const lease = await held(resource);
    await expect(write(plain, lease, 'honest')).rejects.toMatchObject({ code: 'STALE_TOKEN' });
    await lease.release();
  });

  it('refuses bad verifyKeys at construction, naming the key and the given type', () => {
    const build = (verifyKeys: unknown) =>
      new GuardedStore(f.db, { schema: f.schema.schema, verifyKeys: verifyKeys as never });
    expect(() => build({})).toThrow(/at least one key id/);
    expect(() => build({ k1: current.privateKey })).toThrow(/verifyKeys\.k1 .*got a private KeyObject/);
    expect(() => build({ k1: 'nonsense' })).toThrow(/verifyKeys\.k1 .*got a string of 8 characters/);
    expect(() => build({ 'k.1': current.publicKey })).toThrow(/verifyKeys key id must be 1 to 64/);
    expect(() => build([current.publicKey])).toThrow(/got an array/);
    expect(() => build({ k1: current.publicKey })).not.toThrow();
  });
});

describe('resetFence (administrative, audited)', () => {
  it('lowers a fence a forged token raised, writes the audit row, and lets honest holders in again', async () => {
    const plain = f.anotherStore({ verifyKeys: undefined });
    const resource = unique('reset');
    const lease = await held(resource);
    await write(plain, { resource, token: MAX_TOKEN }, 'forged');
    await expect(write(store, lease, 'honest')).rejects.toMatchObject({ code: 'STALE_TOKEN' });

    const reset = await store.resetFence(resource, {
      toToken: lease.token - 1n,
      reason: 'INC-42: fence raised by a forged token before signing was on',
      actor: 'alice@ops',
    });
    expect(reset).toMatchObject({
      resource,
      fromToken: MAX_TOKEN,
      toToken: lease.token - 1n,
      actor: 'alice@ops',
    });
    const audit = await f.sql<{ from_token: string; to_token: string; reason: string; actor: string }>(
      'select from_token::text, to_token::text, reason, actor from fence_reset where resource = $1',
      [resource],
    );
    expect(audit).toEqual([
      {
        from_token: MAX_TOKEN.toString(),
        to_token: (lease.token - 1n).toString(),
        reason: 'INC-42: fence raised by a forged token before signing was on',
        actor: 'alice@ops',
      },
    ]);
    expect(await write(store, lease, 'honest')).toBe('honest');
    await lease.release();
  });

  it('keeps the audit log append-only', async () => {
    await expect(f.sql('update fence_reset set actor = $1', ['mallory'])).rejects.toThrow(/append-only/);
    await expect(f.sql('delete from fence_reset')).rejects.toThrow(/append-only/);
  });

  it('refuses to raise a fence, to reset a missing one, and blank reasons or actors', async () => {
    const lease = await held(unique('reset-bad'));
    await write(store, lease, 'x');
    const args = { toToken: lease.token - 1n, reason: 'r', actor: 'a' };
    await expect(store.resetFence(lease.resource, { ...args, toToken: lease.token })).rejects.toThrow(
      /toToken must be below the current fence/,
    );
    await expect(store.resetFence(unique('none'), args)).rejects.toThrow(/no fence to reset/);
    await expect(store.resetFence(lease.resource, { ...args, reason: '  ' })).rejects.toThrow(
      InvalidRequestError,
    );
    await expect(store.resetFence(lease.resource, { ...args, actor: 7 as never })).rejects.toThrow(
      /actor must be a non-blank string/,
    );
    await expect(store.resetFence(lease.resource, { ...args, toToken: 0n })).rejects.toThrow(/toToken/);
    expect((await store.fenceOf(lease.resource))?.token).toBe(lease.token);
    await lease.release();
  });

  it('is not reachable from the write path or the middleware', async () => {
    const src = path.resolve(fileURLToPath(import.meta.url), '../../../../packages/guarded-store/src');
    const middleware = await readdir(path.join(src, 'middleware'));
    for (const file of middleware)
      expect(await readFile(path.join(src, 'middleware', file), 'utf8'), file).not.toContain('resetFence');
    const example = await readdir(path.join(src, 'example'));
    for (const file of example)
      expect(await readFile(path.join(src, 'example', file), 'utf8'), file).not.toContain('resetFence');
  });
});
