import { FENCING_LEASE_ID_HEADER, FENCING_TOKEN_HEADER, IDEMPOTENCY_KEY_HEADER } from '@fenced/shared';
import express, { type Express } from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fencedErrorHandler as expressFencedErrorHandler,
  fencedWrites as expressFencedWrites,
  guardedWrite as expressGuardedWrite,
  type GuardedWrite,
} from '@fenced/guarded-store/express';
import {
  fencedErrorHandler as fastifyFencedErrorHandler,
  fencedWrites as fastifyFencedWrites,
  guardedWrite as fastifyGuardedWrite,
  fencedPlugin,
} from '@fenced/guarded-store/fastify';
import { createStoreFixture, unique, type StoreFixture } from '../../fixtures/guarded-store-fixture.js';

interface Db {
  item_write: { item: string; token: string; body: string };
}

let f: StoreFixture<Db>;
const FRAMEWORKS = ['express', 'fastify', 'fastify-plugin'] as const;
type Framework = (typeof FRAMEWORKS)[number];
const servers = {} as Record<Framework, Parameters<typeof request>[0]>;
let fastifyApp: FastifyInstance | undefined;
let pluginApp: FastifyInstance | undefined;

/** The route's write, the same under both frameworks. */
async function writeItem(write: GuardedWrite<Db>, body: string) {
  return write.run(async (trx) => {
    await trx
      .insertInto('item_write')
      .values({ item: write.resource, token: write.token.toString(), body })
      .execute();
    return { item: write.resource, token: write.token.toString(), body };
  });
}

function resourceOf(id: string | undefined): string {
  if (id === 'explode') throw new Error('secret internals');
  return `item:${String(id)}`;
}

/** An application's own HTTP error: not the guard's to answer. */
function insufficientFunds(): Error {
  return Object.assign(new Error('insufficient funds'), { status: 422, statusCode: 422, expose: true });
}

beforeAll(async () => {
  f = await createStoreFixture<Db>();
  await f.sql('create table item_write (item text not null, token bigint not null, body text not null)');

  const app: Express = express();
  app.use(express.json());
  app.put(
    '/items/:id',
    expressFencedWrites({ store: f.store, resource: (req) => resourceOf(req.params.id) }),
    async (req, res) => {
      const { body = '' } = req.body as { body?: string };
      res.json(await writeItem(expressGuardedWrite<Db>(res), body));
    },
  );
  app.put('/unwired/:id', (_req, res) => {
    expressGuardedWrite(res);
    res.json({});
  });
  app.put('/funds/:id', () => {
    throw insufficientFunds();
  });
  app.use(expressFencedErrorHandler());
  servers.express = app;

  // Long enough parameters for the resource-name test (fastify's router refuses those over 100 with 414).
  const fast = Fastify({ routerOptions: { maxParamLength: 1_000 } });
  fast.setErrorHandler(fastifyFencedErrorHandler());
  fast.put(
    '/items/:id',
    {
      preHandler: fastifyFencedWrites({
        store: f.store,
        resource: (req) => resourceOf((req.params as { id?: string }).id),
      }),
    },
    async (req) => {
      const { body = '' } = (req.body ?? {}) as { body?: string };
      return writeItem(fastifyGuardedWrite<Db>(req), body);
    },
  );
  fast.put('/unwired/:id', (req, reply) => {
    fastifyGuardedWrite(req);
    void reply.send({});
  });
  fast.put('/funds/:id', () => {
    throw insufficientFunds();
  });
  await fast.ready();
  fastifyApp = fast;
  servers.fastify = fast.server;

  // The plugin: a scope of guarded routes, the preHandler and the error handler registered for it.
  const plug = Fastify({ routerOptions: { maxParamLength: 1_000 } });
  plug.setErrorHandler(fastifyFencedErrorHandler());
  plug.put('/unwired/:id', (req, reply) => {
    fastifyGuardedWrite(req);
    void reply.send({});
  });
  plug.put('/funds/:id', () => {
    throw insufficientFunds();
  });
  await plug.register(async (guarded) => {
    await guarded.register(fencedPlugin, {
      store: f.store,
      resource: (req) => resourceOf((req.params as { id?: string }).id),
    });
    guarded.put('/items/:id', async (req) => {
      const { body = '' } = (req.body ?? {}) as { body?: string };
      return writeItem(fastifyGuardedWrite<Db>(req), body);
    });
  });
  await plug.ready();
  pluginApp = plug;
  servers['fastify-plugin'] = plug.server;
});
afterAll(async () => {
  await fastifyApp?.close();
  await pluginApp?.close();
  await f?.close();
});

async function writesTo(id: string): Promise<number> {
  const [row] = await f.sql<{ n: number }>('select count(*)::int as n from item_write where item = $1', [
    `item:${id}`,
  ]);
  return row?.n ?? -1;
}

function expectErrorBody(body: unknown, code: string): void {
  expect(body).toEqual({ error: { code, message: expect.any(String) as unknown } });
}

describe.each(FRAMEWORKS)('guarded writes over %s', (framework) => {
  const put = (id: string) =>
    request(servers[framework])
      .put(`/items/${encodeURIComponent(id)}`)
      .set('content-type', 'application/json');

  it('runs the route’s write in the guarded transaction and answers 200', async () => {
    const id = unique('ok');
    const res = await put(id).set(FENCING_TOKEN_HEADER, '42').send({ body: 'hello' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ item: `item:${id}`, token: '42', body: 'hello' });
    expect(await writesTo(id)).toBe(1);
    expect((await f.store.fenceOf(`item:${id}`))?.token).toBe(42n);
  });

  it('answers 428 MISSING_TOKEN without a Fencing-Token header, writing nothing', async () => {
    const id = unique('missing');
    const res = await put(id).send({ body: 'x' });
    expect(res.status).toBe(428);
    expectErrorBody(res.body, 'MISSING_TOKEN');
    expect(await writesTo(id)).toBe(0);
    expect(await f.store.fenceOf(`item:${id}`)).toBeUndefined();
  });

  // Node strips the optional whitespace around a header value (RFC 9110), so ' 5' arrives as '5'; spaces
  // inside the value are refused.
  it.each([
    ['empty', ''],
    ['not a number', 'abc'],
    ['negative', '-1'],
    ['zero', '0'],
    ['plus sign', '+5'],
    ['leading zero', '05'],
    ['inner space', '5 6'],
    ['decimal point', '5.0'],
    ['exponent', '1e3'],
    ['hex', '0x10'],
    ['comma list (as a proxy would join repeats)', '5, 6'],
    ['2^63', '9223372036854775808'],
    ['far above 2^63', '99999999999999999999'],
  ])('answers 400 INVALID_REQUEST for a malformed token: %s', async (_name, value) => {
    const id = unique('malformed');
    const res = await put(id).set(FENCING_TOKEN_HEADER, value).send({ body: 'x' });
    expect(res.status).toBe(400);
    expectErrorBody(res.body, 'INVALID_REQUEST');
    expect(await writesTo(id)).toBe(0);
    expect(await f.store.fenceOf(`item:${id}`)).toBeUndefined();
  });

  it.each([
    ['Fencing-Token sent twice', { [FENCING_TOKEN_HEADER]: ['5', '6'] }, 'must appear once'],
    ['Fencing-Token sent twice with one value', { [FENCING_TOKEN_HEADER]: ['5', '5'] }, 'must appear once'],
    [
      'Fencing-Lease-Id sent twice',
      { [FENCING_TOKEN_HEADER]: ['5'], [FENCING_LEASE_ID_HEADER]: ['a', 'b'] },
      'must appear once',
    ],
    [
      'Fencing-Lease-Id with a space',
      { [FENCING_TOKEN_HEADER]: ['5'], [FENCING_LEASE_ID_HEADER]: ['a b'] },
      'visible ASCII',
    ],
    [
      'Idempotency-Key sent twice',
      { [FENCING_TOKEN_HEADER]: ['5'], [IDEMPOTENCY_KEY_HEADER]: ['k1', 'k2'] },
      'must appear once',
    ],
    [
      'Idempotency-Key too long',
      { [FENCING_TOKEN_HEADER]: ['5'], [IDEMPOTENCY_KEY_HEADER]: ['k'.repeat(256)] },
      'visible ASCII',
    ],
  ])('answers 400 INVALID_REQUEST for %s', async (_name, headers, message) => {
    const id = unique('headers');
    let req = put(id);
    // An array sends one header line per value (superagent types arrays for Cookie only).
    for (const [name, values] of Object.entries(headers)) req = req.set(name as 'Cookie', values);
    const res = await req.send({ body: 'x' });
    expect(res.status).toBe(400);
    expectErrorBody(res.body, 'INVALID_REQUEST');
    expect((res.body as { error: { message: string } }).error.message).toContain(message);
    expect(await writesTo(id)).toBe(0);
  });

  it('answers 400 INVALID_REQUEST when the resource name is invalid', async () => {
    const res = await put('a'.repeat(300)).set(FENCING_TOKEN_HEADER, '5').send({ body: 'x' });
    expect(res.status).toBe(400);
    expectErrorBody(res.body, 'INVALID_REQUEST');
  });

  it('answers 409 STALE_TOKEN for a token below the fence, writing nothing', async () => {
    const id = unique('stale');
    await put(id).set(FENCING_TOKEN_HEADER, '10').send({ body: 'first' }).expect(200);
    const res = await put(id).set(FENCING_TOKEN_HEADER, '9').send({ body: 'stale' });
    expect(res.status).toBe(409);
    expectErrorBody(res.body, 'STALE_TOKEN');
    expect((res.body as { error: { message: string } }).error.message).toContain('presented 9');
    expect(await writesTo(id)).toBe(1);
    expect((await f.store.fenceOf(`item:${id}`))?.token).toBe(10n);
  });

  it('accepts a second write with the same token only from the same Fencing-Lease-Id', async () => {
    const id = unique('lease');
    const lease = (leaseId: string | undefined, body: string) => {
      const req = put(id).set(FENCING_TOKEN_HEADER, '7');
      return (leaseId === undefined ? req : req.set(FENCING_LEASE_ID_HEADER, leaseId)).send({ body });
    };
    expect((await lease('lease-a', 'one')).status).toBe(200);
    expect((await lease('lease-a', 'two')).status).toBe(200);
    expect((await lease('lease-b', 'other lease')).status).toBe(409);
    expect((await lease(undefined, 'no lease')).status).toBe(409);
    expect(await writesTo(id)).toBe(2);
  });

  it('replays a write retried with the same Idempotency-Key', async () => {
    const id = unique('idem');
    const send = () =>
      put(id).set(FENCING_TOKEN_HEADER, '3').set(IDEMPOTENCY_KEY_HEADER, 'request-1').send({ body: 'once' });
    const first = await send();
    const retry = await send();
    expect(first.status).toBe(200);
    expect(retry.status).toBe(200);
    expect(retry.body).toEqual(first.body);
    expect(await writesTo(id)).toBe(1);
  });

  it('answers 400 for a body that is not JSON', async () => {
    const id = unique('json');
    const res = await put(id).set(FENCING_TOKEN_HEADER, '3').send('{not json');
    expect(res.status).toBe(400);
    expectErrorBody(res.body, 'INVALID_REQUEST');
    expect(await writesTo(id)).toBe(0);
  });

  it('answers 500 INTERNAL without internals for unexpected errors', async () => {
    const res = await put('explode').set(FENCING_TOKEN_HEADER, '3').send({ body: 'x' });
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ error: { code: 'INTERNAL', message: 'internal error' } });
    expect(JSON.stringify(res.body)).not.toContain('secret');
  });

  it('answers 500 when a route asks for its guarded write without the middleware', async () => {
    const res = await request(servers[framework]).put('/unwired/x').send({});
    expect(res.status).toBe(500);
    expectErrorBody(res.body, 'INTERNAL');
  });

  it('passes an application error with its own status on untouched: a 422 stays a 422', async () => {
    const res = await request(servers[framework]).put('/funds/x').send({});
    expect(res.status).toBe(422);
    expect(JSON.stringify(res.body)).not.toContain('INVALID_REQUEST');
  });
});
