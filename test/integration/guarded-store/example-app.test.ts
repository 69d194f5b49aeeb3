import { FENCING_LEASE_ID_HEADER, FENCING_TOKEN_HEADER, IDEMPOTENCY_KEY_HEADER } from '@fenced/shared';
import type { Express } from 'express';
import { sql } from 'kysely';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createExampleApp,
  migrateExample,
  type ExampleDatabase,
  type ExampleProtection,
} from '../../../packages/guarded-store/src/example/index.js';
import { createStoreFixture, unique, type StoreFixture } from '../../fixtures/guarded-store-fixture.js';

let f: StoreFixture<ExampleDatabase>;
const apps = new Map<ExampleProtection, Express>();

beforeAll(async () => {
  f = await createStoreFixture<ExampleDatabase>();
  await migrateExample(f.db, { schema: f.schema.schema });
  for (const protection of ['guarded', 'reads-outside-guard', 'unguarded'] as const) {
    apps.set(protection, createExampleApp({ store: f.store, protection }));
  }
});
afterAll(async () => {
  await f?.close();
});

function app(protection: ExampleProtection = 'guarded'): Express {
  return apps.get(protection)!;
}

function id(): string {
  return unique('x').replace(/:/g, '-');
}

function deposit(protection: ExampleProtection, account: string, token: bigint, amount: string) {
  return request(app(protection))
    .post(`/accounts/${account}/deposit`)
    .set(FENCING_TOKEN_HEADER, token.toString())
    .send({ amount });
}

describe('example service', () => {
  it('answers /healthz', async () => {
    await request(app()).get('/healthz').expect(200, { status: 'ok' });
  });

  it('stores a document under a guarded PUT and serves it', async () => {
    const doc = id();
    await request(app())
      .get(`/documents/${doc}`)
      .expect(200, { id: doc, content: null, version: '0', token: null });
    const put = await request(app())
      .put(`/documents/${doc}`)
      .set(FENCING_TOKEN_HEADER, '5')
      .send({ content: 'v1' });
    expect(put.status).toBe(200);
    expect(put.body).toEqual({ id: doc, content: 'v1', version: '1', token: '5' });
    await request(app())
      .get(`/documents/${doc}`)
      .expect(200, { id: doc, content: 'v1', version: '1', token: '5' });
  });

  it('refuses a stale PUT with 409 and keeps the document', async () => {
    const doc = id();
    await request(app())
      .put(`/documents/${doc}`)
      .set(FENCING_TOKEN_HEADER, '8')
      .send({ content: 'new' })
      .expect(200);
    const stale = await request(app())
      .put(`/documents/${doc}`)
      .set(FENCING_TOKEN_HEADER, '7')
      .send({ content: 'old' });
    expect(stale.status).toBe(409);
    expect((stale.body as { error: { code: string } }).error.code).toBe('STALE_TOKEN');
    const read = await request(app()).get(`/documents/${doc}`);
    expect(read.body).toMatchObject({ content: 'new', token: '8', version: '1' });
  });

  it('answers 428 and 400 before touching anything', async () => {
    const doc = id();
    await request(app()).put(`/documents/${doc}`).send({ content: 'x' }).expect(428);
    await request(app())
      .put(`/documents/${doc}`)
      .set(FENCING_TOKEN_HEADER, '01')
      .send({ content: 'x' })
      .expect(400);
    await request(app())
      .put(`/documents/${doc}`)
      .set(FENCING_TOKEN_HEADER, '1')
      .send({ content: 42 })
      .expect(400);
    await request(app())
      .put(`/documents/bad%20id`)
      .set(FENCING_TOKEN_HEADER, '1')
      .send({ content: 'x' })
      .expect(400);
    await request(app())
      .post(`/accounts/${doc}/deposit`)
      .set(FENCING_TOKEN_HEADER, '1')
      .send({ amount: '0' })
      .expect(400);
    await request(app())
      .post(`/accounts/${doc}/deposit`)
      .set(FENCING_TOKEN_HEADER, '1')
      .send({ amount: 1.5 })
      .expect(400);
    expect(await f.store.fenceOf(`document:${doc}`)).toBeUndefined();
    expect(await f.store.fenceOf(`account:${doc}`)).toBeUndefined();
  });

  it('credits deposits, and applies one retried with an Idempotency-Key once', async () => {
    const account = id();
    const send = (key: string) =>
      request(app())
        .post(`/accounts/${account}/deposit`)
        .set(FENCING_TOKEN_HEADER, '4')
        .set(FENCING_LEASE_ID_HEADER, 'lease-4')
        .set(IDEMPOTENCY_KEY_HEADER, key)
        .send({ amount: '25' });
    const first = await send('deposit-1');
    expect(first.body).toEqual({ id: account, balance: '25', deposits: '1', token: '4' });
    expect((await send('deposit-1')).body).toEqual(first.body);
    expect((await send('deposit-2')).body).toMatchObject({ balance: '50', deposits: '2' });
    await request(app())
      .get(`/accounts/${account}`)
      .expect(200, { id: account, balance: '50', deposits: '2', token: '4' });
  });

  /**
   * Two deposits queue behind a third holder's open guarded transaction on the account, the older token first,
   * so that both have made any read outside the guard before either writes. Deterministic: no timing.
   */
  async function queuedDeposits(
    protection: ExampleProtection,
  ): Promise<{ balance: string; deposits: string }> {
    const account = id();
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    // The holder locks the existing fence row without changing it. Waiters on a locked row queue in order
    // (Postgres' tuple lock); waiters on a row version still being written by an open transaction all wake at
    // its commit and race, which would make the order of the two deposits a coin toss.
    const resource = `account:${account}`;
    await f.store.fenceIn({ resource, id: 'setup', token: 1n });
    const holder = f.store.dangerouslyRunUnguarded(async (trx) => {
      await sql`select 1 from fence where resource = ${resource} for update`.execute(trx);
      entered();
      await gate;
    });
    await inside;
    const first = deposit(protection, account, 2n, '10').then((r) => r);
    await waitForFenceWaiters(1);
    const second = deposit(protection, account, 3n, '10').then((r) => r);
    await waitForFenceWaiters(2);
    release();
    await holder;
    const [a, b] = await Promise.all([first, second]);
    expect([a.status, b.status]).toEqual([200, 200]);
    const read = await request(app()).get(`/accounts/${account}`);
    return read.body as { balance: string; deposits: string };
  }

  async function waitForFenceWaiters(n: number): Promise<void> {
    for (;;) {
      const [row] = await f.sql<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and position($1 in query) > 0`,
        [f.schema.schema],
      );
      if ((row?.n ?? 0) >= n) return;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  it('loses no deposit when overlapping holders read inside the guard', async () => {
    expect(await queuedDeposits('guarded')).toMatchObject({ balance: '20', deposits: '2' });
  });

  it('negative control: reading outside the guard loses a deposit', async () => {
    expect(await queuedDeposits('reads-outside-guard')).toMatchObject({ balance: '10', deposits: '1' });
  });

  it('negative control: without the guard a stale PUT is accepted', async () => {
    const doc = id();
    await request(app('unguarded'))
      .put(`/documents/${doc}`)
      .set(FENCING_TOKEN_HEADER, '8')
      .send({ content: 'new' });
    const stale = await request(app('unguarded'))
      .put(`/documents/${doc}`)
      .set(FENCING_TOKEN_HEADER, '7')
      .send({ content: 'old' });
    expect(stale.status).toBe(200);
    expect((await request(app()).get(`/documents/${doc}`)).body).toMatchObject({
      content: 'old',
      token: '7',
    });
  });
});
