import { generateKeyPairSync } from 'node:crypto';
import {
  FENCING_LEASE_ID_HEADER,
  FENCING_PROOF_HEADER,
  FENCING_TOKEN_HEADER,
  MAX_TOKEN,
} from '@fenced/shared';
import express, { type Express } from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Coordinator, type Lease } from '@fenced/coordinator';
import {
  fencedErrorHandler,
  fencedWrites,
  guardedWrite,
  type GuardedWrite,
} from '@fenced/guarded-store/express';
import {
  fencedErrorHandler as fastifyFencedErrorHandler,
  fencedWrites as fastifyFencedWrites,
  guardedWrite as fastifyGuardedWrite,
} from '@fenced/guarded-store/fastify';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { createStoreFixture, unique, type StoreFixture } from '../../fixtures/guarded-store-fixture.js';

// The write middleware with proof verification on (DESIGN §4b, §5): 403 INVALID_PROOF for every missing or
// invalid proof, nothing written, the fence untouched, and neither the proof nor the lease id in a log or a body.

interface Db {
  item_write: { item: string; token: string; body: string };
}

const key = generateKeyPairSync('ed25519');
const stranger = generateKeyPairSync('ed25519');
let f: StoreFixture<Db>;
let redis: RedisNodes;
let coordinator: Coordinator;
let strangerCoordinator: Coordinator;
const FRAMEWORKS = ['express', 'fastify'] as const;
type Framework = (typeof FRAMEWORKS)[number];
const servers = {} as Record<Framework, Parameters<typeof request>[0]>;
let fastifyApp: FastifyInstance | undefined;
const logged: unknown[] = [];
let routeRuns = 0;

beforeAll(async () => {
  [f, redis] = await Promise.all([
    createStoreFixture<Db>({ verifyKeys: { k1: key.publicKey } }),
    startRedisNodes(3, { useExisting: false }),
  ]);
  await f.sql('create table item_write (item text not null, token bigint not null, body text not null)');
  coordinator = new Coordinator({ nodes: redis.urls, signingKey: { id: 'k1', privateKey: key.privateKey } });
  strangerCoordinator = new Coordinator({
    nodes: redis.urls,
    keyPrefix: 'stranger',
    signingKey: { id: 'k9', privateKey: stranger.privateKey },
  });
  const logger = {
    error: (details: unknown, message: string) => logged.push([details, message]),
  };
  const app: Express = express();
  app.use(express.json());
  app.put(
    '/items/:id',
    fencedWrites({ store: f.store, resource: (req) => `item:${String(req.params.id)}` }),
    async (req, res) => {
      const { body = '' } = req.body as { body?: string };
      await writeItem(guardedWrite<Db>(res), body);
      res.json({ ok: true });
    },
  );
  app.use(fencedErrorHandler({ logger }));
  servers.express = app;

  const fast = Fastify();
  fast.setErrorHandler(fastifyFencedErrorHandler({ logger }));
  fast.put(
    '/items/:id',
    {
      preHandler: fastifyFencedWrites({
        store: f.store,
        resource: (req) => `item:${String((req.params as { id?: string }).id)}`,
      }),
    },
    async (req) => {
      const { body = '' } = (req.body ?? {}) as { body?: string };
      await writeItem(fastifyGuardedWrite<Db>(req), body);
      return { ok: true };
    },
  );
  await fast.ready();
  fastifyApp = fast;
  servers.fastify = fast.server;
});

async function writeItem(write: GuardedWrite<Db>, body: string): Promise<void> {
  routeRuns++;
  await write.run(async (trx) => {
    await trx
      .insertInto('item_write')
      .values({ item: write.resource, token: write.token.toString(), body })
      .execute();
  });
}

afterAll(async () => {
  await coordinator?.close();
  await strangerCoordinator?.close();
  await f?.close();
  await redis?.stop();
  await fastifyApp?.close();
});

let framework: Framework = 'express';

function put(id: string, headers: Record<string, string | undefined>) {
  let req = request(servers[framework]).put(`/items/${id}`);
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) req = req.set(name, value);
  return req.send({ body: 'payload' });
}

function headersOf(lease: Pick<Lease, 'token' | 'id' | 'proof'>): Record<string, string | undefined> {
  return {
    [FENCING_TOKEN_HEADER]: lease.token.toString(),
    [FENCING_LEASE_ID_HEADER]: lease.id,
    [FENCING_PROOF_HEADER]: lease.proof,
  };
}

async function state(id: string) {
  const writes = await f.sql('select body from item_write where item = $1', [`item:${id}`]);
  const fence = await f.sql('select token::text, lease_id_hash, updated_at from fence where resource = $1', [
    `item:${id}`,
  ]);
  return { writes, fence };
}

async function expectRefused(id: string, headers: Record<string, string | undefined>, secrets: string[]) {
  const before = await state(id);
  const runs = routeRuns;
  const response = await put(id, headers);
  expect(response.status).toBe(403);
  expect(response.body).toMatchObject({ error: { code: 'INVALID_PROOF' } });
  for (const secret of secrets) expect(response.text).not.toContain(secret);
  expect(routeRuns).toBe(runs);
  expect(await state(id)).toEqual(before);
}

async function lease(id: string): Promise<Lease> {
  return coordinator.acquire(`item:${id}`, { ttlMs: 10_000 });
}

describe.each(FRAMEWORKS)('guarded writes over %s with verifyKeys', (name) => {
  beforeAll(() => {
    framework = name;
  });

  it('writes with a valid Fencing-Proof, more than once under one lease', async () => {
    const id = unique('ok');
    const l = await lease(id);
    expect((await put(id, headersOf(l))).status).toBe(200);
    expect((await put(id, headersOf(l))).status).toBe(200);
    expect((await state(id)).writes).toHaveLength(2);
    await l.release();
  });

  it('answers 403 INVALID_PROOF in every refused case, writing nothing', async () => {
    const id = unique('refused');
    const mine = await lease(id);
    expect((await put(id, headersOf(mine))).status).toBe(200); // the fence exists and stays as it is
    const secrets = [mine.id, mine.proof!.slice(6, 50)];
    // A forged maximum token (with the lease's real proof and id).
    await expectRefused(id, { ...headersOf(mine), [FENCING_TOKEN_HEADER]: MAX_TOKEN.toString() }, secrets);
    // Another resource's token with that resource's valid proof.
    const other = await lease(unique('other'));
    await expectRefused(id, headersOf(other), [...secrets, other.id]);
    // A proof for another lease of the same resource.
    await mine.release();
    const next = await lease(id);
    await expectRefused(id, { ...headersOf(next), [FENCING_PROOF_HEADER]: mine.proof }, secrets);
    // A proof signed by a key the store does not trust.
    const foreign = await strangerCoordinator.acquire(`item:${id}`, { ttlMs: 10_000 });
    await expectRefused(id, headersOf(foreign), [foreign.id]);
    // A truncated proof, and no proof at all, and a proof without the lease id it signs.
    await expectRefused(id, { ...headersOf(next), [FENCING_PROOF_HEADER]: next.proof!.slice(0, -2) }, [
      next.id,
    ]);
    await expectRefused(id, { ...headersOf(next), [FENCING_PROOF_HEADER]: undefined }, [next.id]);
    await expectRefused(id, { ...headersOf(next), [FENCING_LEASE_ID_HEADER]: undefined }, [
      next.proof!.slice(6, 50),
    ]);
    // The rightful holder still writes.
    expect((await put(id, headersOf(next))).status).toBe(200);
    expect(logged).toEqual([]);
    await Promise.all([other.release(), next.release(), foreign.release()]);
  });

  it('refuses a repeated Fencing-Proof header as a bad request', async () => {
    const id = unique('twice');
    const l = await lease(id);
    const response = await request(servers[framework])
      .put(`/items/${id}`)
      .set(FENCING_TOKEN_HEADER, l.token.toString())
      .set(FENCING_LEASE_ID_HEADER, l.id)
      .set(FENCING_PROOF_HEADER as 'Cookie', [l.proof!, l.proof!]) // one line per value
      .send({ body: 'x' });
    expect(response.status).toBe(400);
    expect((response.body as { error: { message: string } }).error.message).toMatch(
      /Fencing-Proof header must appear once/,
    );
    await l.release();
  });
});
