import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { Kysely } from 'kysely';
import { fencedErrorHandler, fencedWrites, guardedWrite, type GuardedStore } from '@fenced/guarded-store';
import { writeCounter, type CounterDb } from '@fenced/test-utils/counter-worker/counter-tables';
import { counterResource } from './counter-table.js';
import type { Mode } from './run-record.js';

/** The counter service of scenario F3: workers write through it over HTTP, so a write can sit in the network. */
export interface CounterService {
  readonly url: string;
  stop(): Promise<void>;
}

export interface CounterServiceOptions {
  readonly db: Kysely<CounterDb>;
  readonly store: GuardedStore<CounterDb>;
  /** `fenced`: writes go through the guarded-store middleware (409 STALE_TOKEN); `unprotected`: a plain UPDATE. */
  readonly mode: Mode;
}

const COUNTER_ID = /^[a-z0-9-]{1,64}$/;

/**
 * `PUT /counters/:id` with `{ value, worker, leaseRef }` sets the counter. In fenced mode the route sits behind
 * `fencedWrites`, which reads `Fencing-Token` (and `Fencing-Lease-Id`), and the write runs in the request's
 * guarded transaction; `fencedErrorHandler` answers a stale token with 409 STALE_TOKEN and nothing written.
 * Listens on a free loopback port.
 */
export async function startCounterService(options: CounterServiceOptions): Promise<CounterService> {
  const { db, store, mode } = options;
  const app = express();
  app.disable('x-powered-by');
  app.use(express.json({ limit: '4kb' }));

  const counterOf = (id: unknown): string => {
    if (typeof id !== 'string' || !COUNTER_ID.test(id)) throw new Error('bad counter id');
    return id;
  };
  const bodyOf = (body: unknown): { value: number; worker: string; leaseRef: string } => {
    const { value, worker, leaseRef } = (body ?? {}) as Record<string, unknown>;
    if (!Number.isSafeInteger(value) || typeof worker !== 'string' || typeof leaseRef !== 'string')
      throw new Error('body must be { value: integer, worker: string, leaseRef: string }');
    return { value: value as number, worker, leaseRef };
  };

  if (mode === 'fenced') {
    app.put(
      '/counters/:id',
      fencedWrites({ store, resource: (req) => counterResource(counterOf(req.params.id)) }),
      async (req, res) => {
        const resource = counterResource(counterOf(req.params.id));
        const { value, worker, leaseRef } = bodyOf(req.body);
        const write = guardedWrite<CounterDb>(res);
        const result = await write.run(async (trx) => {
          const logged = { resource, token: write.token, leaseRef, process: worker, via: 'http' } as const;
          await writeCounter(trx, logged, BigInt(value));
          return { value };
        });
        res.json(result);
      },
    );
  } else {
    app.put('/counters/:id', async (req, res) => {
      const resource = counterResource(counterOf(req.params.id));
      const { value, worker, leaseRef } = bodyOf(req.body);
      // No fence: whatever arrives is written, however late.
      const logged = { resource, token: null, leaseRef, process: worker, via: 'http' } as const;
      await db.transaction().execute((trx) => writeCounter(trx, logged, BigInt(value)));
      res.json({ value });
    });
  }
  app.use(fencedErrorHandler());

  const server: Server = await new Promise((resolve, reject) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
    s.once('error', reject);
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
