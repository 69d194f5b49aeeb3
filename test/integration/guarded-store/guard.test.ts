import { InvalidRequestError, MAX_TOKEN, StaleTokenError } from '@fenced/shared';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ConnectionLostError,
  LockTimeoutError,
  ReadOnlyTransactionError,
  type FenceLike,
  type GuardedStore,
} from '@fenced/guarded-store';
import { createStoreFixture, unique, type StoreFixture } from '../../fixtures/guarded-store-fixture.js';

interface Db {
  note: { resource: string; token: string; body: string };
}

let f: StoreFixture<Db>;
let store: GuardedStore<Db>;

beforeAll(async () => {
  f = await createStoreFixture<Db>();
  store = f.store;
  await f.sql('create table note (resource text not null, token bigint not null, body text not null)');
});
afterAll(async () => {
  await f?.close();
});

/** A guarded write that leaves a trace, so tests can check what committed. */
function write(fence: FenceLike | readonly FenceLike[], body: string) {
  const first: FenceLike | undefined = isList(fence) ? fence[0] : fence;
  return store.run(fence, async (trx) => {
    await trx
      .insertInto('note')
      .values({ resource: first!.resource, token: String(first!.token), body })
      .execute();
    return body;
  });
}

function isList(fence: FenceLike | readonly FenceLike[]): fence is readonly FenceLike[] {
  return Array.isArray(fence);
}

async function notes(resource: string): Promise<string[]> {
  const rows = await f.sql<{ body: string }>('select body from note where resource = $1 order by body', [
    resource,
  ]);
  return rows.map((r) => r.body);
}

async function staleError(promise: Promise<unknown>): Promise<StaleTokenError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StaleTokenError);
  return error as StaleTokenError;
}

describe('GuardedStore.run', () => {
  it('accepts the first token for a resource and records it as the fence', async () => {
    const resource = unique('r');
    await expect(write({ resource, token: 5n }, 'a')).resolves.toBe('a');
    expect((await store.fenceOf(resource))?.token).toBe(5n);
    expect(await notes(resource)).toEqual(['a']);
  });

  it('accepts a higher token and raises the fence', async () => {
    const resource = unique('r');
    await write({ resource, token: 5n }, 'a');
    await write({ resource, token: 9n }, 'b');
    expect((await store.fenceOf(resource))?.token).toBe(9n);
    expect(await notes(resource)).toEqual(['a', 'b']);
  });

  it('refuses a lower token with StaleTokenError carrying the presented and current tokens, writing nothing', async () => {
    const resource = unique('r');
    await write({ resource, token: 9n }, 'a');
    let called = false;
    const error = await staleError(
      store.run({ resource, token: 5n }, async () => {
        called = true;
        return Promise.resolve();
      }),
    );
    expect(error).toMatchObject({ code: 'STALE_TOKEN', resource, presented: 5n, current: 9n });
    expect(called).toBe(false);
    expect(await notes(resource)).toEqual(['a']);
    expect((await store.fenceOf(resource))?.token).toBe(9n);
  });

  it('refuses an equal token from another lease', async () => {
    const resource = unique('r');
    await write({ resource, token: 7n, leaseId: 'lease-a' }, 'a');
    const error = await staleError(write({ resource, token: 7n, leaseId: 'lease-b' }, 'b'));
    expect(error).toMatchObject({ presented: 7n, current: 7n });
    expect(await notes(resource)).toEqual(['a']);
  });

  it('accepts an equal token from the same lease, so a lease can write more than once', async () => {
    const resource = unique('r');
    await write({ resource, token: 7n, leaseId: 'lease-a' }, 'a');
    await write({ resource, token: 7n, leaseId: 'lease-a' }, 'b');
    expect(await notes(resource)).toEqual(['a', 'b']);
  });

  it('accepts a coordinator lease (resource, id, token) as its fence', async () => {
    const resource = unique('r');
    const lease = { resource, id: 'opaque-lease-id', token: 12n, ttlMs: 1000 };
    await write(lease, 'a');
    await write(lease, 'b');
    await staleError(write({ resource, token: 12n, leaseId: 'another' }, 'c'));
    expect(await notes(resource)).toEqual(['a', 'b']);
  });

  it('refuses an equal token without a lease id, even when the fence was set without one', async () => {
    const resource = unique('r');
    await write({ resource, token: 7n }, 'a');
    await staleError(write({ resource, token: 7n }, 'b'));
    await staleError(write({ resource, token: 7n, leaseId: 'lease-a' }, 'c'));
    const withLease = unique('r');
    await write({ resource: withLease, token: 7n, leaseId: 'lease-a' }, 'a');
    await staleError(write({ resource: withLease, token: 7n }, 'b'));
  });

  it('stores a digest of the lease id, never the id', async () => {
    const resource = unique('r');
    await write({ resource, token: 3n, leaseId: 'secret-lease-id' }, 'a');
    const [row] = await f.sql<{ hash: string }>(
      "select encode(lease_id_hash, 'hex') as hash from fence where resource = $1",
      [resource],
    );
    expect(row?.hash).toMatch(/^[0-9a-f]{64}$/);
    const dump = await f.sql('select * from fence where resource = $1', [resource]);
    expect(JSON.stringify(dump)).not.toContain('secret-lease-id');
  });

  it('rolls back the callback’s writes and rethrows its error unchanged', async () => {
    const resource = unique('r');
    const boom = new Error('boom');
    await expect(
      store.run({ resource, token: 4n }, async (trx) => {
        await trx.insertInto('note').values({ resource, token: '4', body: 'x' }).execute();
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(await notes(resource)).toEqual([]);
    expect(await store.fenceOf(resource)).toBeUndefined();
  });

  it('validates tokens, resources and op ids before sending anything', async () => {
    const resource = unique('r');
    for (const token of [0n, -1n, MAX_TOKEN + 1n, 5 as unknown as bigint]) {
      await expect(write({ resource, token }, 'x')).rejects.toBeInstanceOf(InvalidRequestError);
    }
    await expect(write({ resource: '', token: 1n }, 'x')).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(write([], 'x')).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(
      store.run({ resource, token: 1n }, () => Promise.resolve(null), { opId: 'has space' }),
    ).rejects.toBeInstanceOf(InvalidRequestError);
    expect(await store.fenceOf(resource)).toBeUndefined();
  });
});

describe('tokens near 2^53 and 2^63 − 1', () => {
  it('orders tokens above 2^53 exactly (doubles would merge them)', async () => {
    const resource = unique('r');
    const base = 2n ** 53n;
    await write({ resource, token: base + 1n }, 'a');
    const error = await staleError(write({ resource, token: base }, 'b'));
    expect(error.presented).toBe(base);
    expect(error.current).toBe(base + 1n);
    await write({ resource, token: base + 2n }, 'c');
    expect((await store.fenceOf(resource))?.token).toBe(base + 2n);
  });

  it('round-trips 2^63 − 1 through the fence and the stale error', async () => {
    const resource = unique('r');
    await write({ resource, token: MAX_TOKEN - 1n }, 'a');
    await write({ resource, token: MAX_TOKEN }, 'b');
    expect((await store.fenceOf(resource))?.token).toBe(MAX_TOKEN);
    const error = await staleError(write({ resource, token: MAX_TOKEN - 1n }, 'c'));
    expect(error.current).toBe(MAX_TOKEN);
    expect(error.presented).toBe(MAX_TOKEN - 1n);
    const [row] = await f.sql<{ token: string }>('select token::text from fence where resource = $1', [
      resource,
    ]);
    expect(row?.token).toBe('9223372036854775807');
  });

  it('returns int8 columns as bigint through createDatabase', async () => {
    const rows = await f.db.selectNoFrom(sql<bigint>`${'9223372036854775807'}::bigint`.as('big')).execute();
    expect(rows[0]?.big).toBe(MAX_TOKEN);
  });
});

describe('several resources in one transaction', () => {
  it('raises all fences together, and refuses all when one is stale', async () => {
    const a = unique('a');
    const b = unique('b');
    await write(
      [
        { resource: b, token: 5n },
        { resource: a, token: 5n },
      ],
      'both',
    );
    await write({ resource: b, token: 8n }, 'b-alone');
    const error = await staleError(
      write(
        [
          { resource: a, token: 6n },
          { resource: b, token: 6n },
        ],
        'late',
      ),
    );
    expect(error).toMatchObject({ resource: b, presented: 6n, current: 8n });
    expect((await store.fenceOf(a))?.token).toBe(5n);
  });

  it('refuses a resource listed twice', async () => {
    const a = unique('r');
    await expect(
      write(
        [
          { resource: a, token: 1n },
          { resource: a, token: 2n },
        ],
        'x',
      ),
    ).rejects.toBeInstanceOf(InvalidRequestError);
  });

  it('does not deadlock when transactions list overlapping resources in opposite orders', async () => {
    const names = [unique('x'), unique('y'), unique('z')];
    let token = 0n;
    const runs = Array.from({ length: 24 }, (_, i) => {
      token += 1n;
      const order = i % 2 === 0 ? names : [...names].reverse();
      return store
        .run(
          order.map((resource) => ({ resource, token })),
          async (trx) => {
            await trx
              .insertInto('note')
              .values({ resource: names[0]!, token: String(token), body: `t${i}` })
              .execute();
          },
        )
        .then(
          () => 'ok',
          (e: unknown) => (e instanceof StaleTokenError ? 'stale' : e),
        );
    });
    const outcomes = await Promise.all(runs);
    expect(outcomes.every((o) => o === 'ok' || o === 'stale')).toBe(true);
    expect(outcomes).toContain('ok');
  });
});

describe('fenceIn (G3)', () => {
  it('locks out every earlier grant once the new holder has fenced in', async () => {
    const resource = unique('r');
    const old = { resource, id: 'old-lease', token: 10n };
    const next = { resource, id: 'new-lease', token: 11n };
    await write(old, 'old-1');
    await store.fenceIn(next);
    await staleError(write(old, 'old-2'));
    expect(await notes(resource)).toEqual(['old-1']);
    await write(next, 'new-1');
  });

  it('waits for an older holder’s open transaction, after which the older holder is locked out', async () => {
    const resource = unique('r');
    const old = { resource, id: 'old-lease', token: 20n };
    const next = { resource, id: 'new-lease', token: 21n };
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const oldWrite = store.run(old, async (trx) => {
      entered();
      await gate;
      await trx.insertInto('note').values({ resource, token: '20', body: 'old-in-flight' }).execute();
    });
    await inside;
    const fenceIn = store.fenceIn(next);
    // The fence-in is blocked on the old holder's row lock until the old transaction ends.
    const blocked = await waitForLockWaiter();
    expect(blocked).toBe(true);
    release();
    await oldWrite;
    await fenceIn;
    await staleError(write(old, 'old-after'));
    expect(await notes(resource)).toEqual(['old-in-flight']);
  });

  it('fails for a lease older than the fence', async () => {
    const resource = unique('r');
    await store.fenceIn({ resource, id: 'b', token: 2n });
    await staleError(store.fenceIn({ resource, id: 'a', token: 1n }));
  });
});

/** Polls until some session of our schema waits for a lock (observed, no timing assumptions). */
async function waitForLockWaiter(): Promise<boolean> {
  for (;;) {
    const rows = await f.sql<{ n: number }>(
      `select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and position($1 in query) > 0`,
      [f.schema.schema],
    );
    if ((rows[0]?.n ?? 0) > 0) return true;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('bounded stalls', () => {
  it('gives up on a fence row held too long with LockTimeoutError, keeping the driver error as cause', async () => {
    const resource = unique('r');
    const impatient = f.anotherStore({ lockTimeoutMs: 50 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const holder = store.run({ resource, token: 1n, leaseId: 'h' }, async () => {
      entered();
      await gate;
    });
    await inside;
    const error = await impatient
      .run({ resource, token: 2n }, () => Promise.resolve(undefined))
      .catch((e: unknown) => e);
    release();
    await holder;
    expect(error).toBeInstanceOf(LockTimeoutError);
    expect(error).toMatchObject({ sqlstate: '55P03', retryable: true, code: 'INTERNAL' });
    expect((error as LockTimeoutError).cause).toMatchObject({ code: '55P03' });
    await impatient.run({ resource, token: 2n }, () => Promise.resolve(undefined));
  });

  it('ends a guarded transaction that sits idle too long, freeing the fence row', async () => {
    const resource = unique('r');
    const sleepy = f.anotherStore({ idleInTransactionTimeoutMs: 100, maxConnections: 1 });
    const error = await sleepy
      .run({ resource, token: 1n }, async (trx) => {
        const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
        // Idle in transaction until Postgres ends the session (observed, not timed).
        for (;;) {
          const alive = await f.sql('select 1 from pg_stat_activity where pid = $1', [rows[0]!.pid]);
          if (alive.length === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await trx.insertInto('note').values({ resource, token: '1', body: 'late' }).execute();
      })
      .catch((e: unknown) => e);
    // The session ended while idle, so pg reports the next statement as "not queryable": never sent, so not
    // indeterminate (IdleInTransactionTimeoutError only when the FATAL races an active statement).
    expect(error).toBeInstanceOf(ConnectionLostError);
    expect(error).toMatchObject({ indeterminate: false, retryable: true });
    expect(await notes(resource)).toEqual([]);
    // The pool replaced the dead connection; the next guarded write goes through.
    await sleepy.run({ resource, token: 2n }, () => Promise.resolve(undefined));
  });
});

describe('read() and the unguarded escape hatch', () => {
  it('lets read() read and makes Postgres refuse its writes', async () => {
    const resource = unique('r');
    await write({ resource, token: 1n }, 'a');
    const rows = await store.read((trx) =>
      trx.selectFrom('note').select('body').where('resource', '=', resource).execute(),
    );
    expect(rows).toEqual([{ body: 'a' }]);
    await expect(
      store.read((trx) => trx.insertInto('note').values({ resource, token: '1', body: 'sneaky' }).execute()),
    ).rejects.toBeInstanceOf(ReadOnlyTransactionError);
    expect(await notes(resource)).toEqual(['a']);
  });

  it('dangerouslyRunUnguarded writes without a fence (that is the point of the name)', async () => {
    const resource = unique('r');
    await write({ resource, token: 9n }, 'a');
    await store.dangerouslyRunUnguarded((trx) =>
      trx.insertInto('note').values({ resource, token: '1', body: 'stale-but-unguarded' }).execute(),
    );
    expect(await notes(resource)).toEqual(['a', 'stale-but-unguarded']);
  });
});
