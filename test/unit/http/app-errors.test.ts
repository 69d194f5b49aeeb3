import { EventEmitter } from 'node:events';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../../packages/service/src/http/app.js';
import type { LeaseService } from '../../../packages/service/src/http/lease-service.js';
import { createServiceLogger } from '../../../packages/service/src/http/service-logger.js';

/** A lease service whose every call fails the way a driver bug would: with internals in the message. */
class BrokenLeaseService extends EventEmitter implements LeaseService {
  readonly quorum = 2;
  readonly nodeCount = 3;
  private fail(): Promise<never> {
    return Promise.reject(
      Object.assign(new Error('ERR at 10.1.2.3:6379 evalsha deadbeef lease AAAAAAAAAAAAAAAAAAAAAA'), {
        command: { name: 'evalsha', args: ['AAAAAAAAAAAAAAAAAAAAAA'] },
      }),
    );
  }
  acquire = (): Promise<never> => this.fail();
  extend = (): Promise<never> => this.fail();
  release = (): Promise<never> => this.fail();
  inspect = (): Promise<never> => this.fail();
  nodeStatus = (): Promise<never> => this.fail();
}

describe('createApp with a failing lease service', () => {
  const logs: string[] = [];
  const app = createApp({
    coordinator: new BrokenLeaseService(),
    logger: createServiceLogger({ destination: { write: (line: string) => void logs.push(line) } }),
  });
  const server = app.server;
  beforeAll(() => app.ready());
  afterAll(() => app.close());

  it('answers unknown errors with 500 INTERNAL and no internals, on every route', async () => {
    const responses = [
      await request(server).post('/v1/locks/r/leases').send({ ttlMs: 1000 }),
      await request(server).post('/v1/locks/r/leases/AAAAAAAAAAAAAAAAAAAAAA/extend').send({ ttlMs: 1000 }),
      await request(server).delete('/v1/locks/r/leases/AAAAAAAAAAAAAAAAAAAAAA'),
      await request(server).get('/v1/locks/r'),
      await request(server).get('/readyz'),
    ];
    for (const response of responses) {
      expect(response.status).toBe(500);
      expect(response.body).toEqual({ error: { code: 'INTERNAL', message: 'internal error' } });
      expect(response.text).not.toContain('10.1.2.3');
    }
  });

  it('logs the unexpected error for operators, without the command arguments', () => {
    const errors = logs.map((l) => JSON.parse(l) as { msg: string; err?: { message: string } });
    const unexpected = errors.filter((l) => l.msg === 'unexpected error');
    expect(unexpected).toHaveLength(5);
    expect(unexpected[0]?.err?.message).toContain('evalsha');
    expect(logs.join('\n')).not.toContain('"args"');
  });

  it('still answers /healthz, which touches no Redis', async () => {
    expect((await request(server).get('/healthz')).status).toBe(200);
  });
});
