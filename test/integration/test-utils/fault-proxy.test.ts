import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy, proxyEach } from '@fenced/test-utils/fault-proxy';
import { findOrStartPostgres } from '@fenced/test-utils/postgres';
import { RedisNode } from '@fenced/test-utils/redis-node';
import { NO_REPLY, RespConnection } from '@fenced/test-utils/resp-connection';

const QUIET_MS = 250; // how long "no reply" is watched for

async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 3_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('fault proxy', () => {
  let node: RedisNode;
  let direct: RespConnection;
  let proxy: FaultProxy;
  const opened: { close(): void }[] = [];
  let keyNo = 0;

  /** A unique key per use: tests share one node. */
  const key = (): string => `k${++keyNo}`;

  async function viaProxy(): Promise<RespConnection> {
    const conn = await RespConnection.connect(proxy.port);
    opened.push(conn);
    return conn;
  }

  beforeAll(async () => {
    node = await RedisNode.start({ persistence: 'none' });
    direct = await RespConnection.connect(node.port);
  });

  afterEach(async () => {
    for (const c of opened.splice(0)) c.close();
    await proxy?.stop();
  });

  afterAll(async () => {
    direct?.close();
    await node?.stop();
  });

  it('passes commands and replies through, with the target URL rewritten', async () => {
    proxy = await FaultProxy.start({ target: `${node.url}/0` });
    expect(proxy.url).toBe(`redis://127.0.0.1:${proxy.port}/0`);
    const conn = await viaProxy();
    const k = key();
    expect(await conn.send('SET', k, 'v')).toBe('OK');
    expect(await direct.send('GET', k)).toBe('v');
    expect(proxy.stats).toMatchObject({ accepted: 1, open: 1 });
  });

  it('blackholes: swallows requests of open and new connections, then resets the ones that lost bytes', async () => {
    proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port: node.port } });
    const before = await viaProxy();
    expect(await before.send('PING')).toBe('PONG');

    proxy.setMode('blackhole');
    const k = key();
    expect(await before.sendWithin(QUIET_MS, 'SET', k, 'v')).toBe(NO_REPLY);
    const during = await viaProxy(); // accepted, never answered
    expect(await during.sendWithin(QUIET_MS, 'PING')).toBe(NO_REPLY);
    expect(await direct.send('GET', k)).toBeNull(); // the server never saw it
    expect(proxy.stats.droppedToServer).toBeGreaterThan(0);

    proxy.setMode('pass');
    await until(() => before.closed !== null && during.closed !== null);
    const after = await viaProxy();
    expect(await after.send('PING')).toBe('PONG');
  });

  it('blackholes replies only, when asked for one direction', async () => {
    proxy = await FaultProxy.start({
      target: node.url,
      mode: 'blackhole',
      modeOptions: { direction: 'to-client' },
    });
    const conn = await viaProxy();
    const k = key();
    expect(await conn.sendWithin(QUIET_MS, 'SET', k, 'applied')).toBe(NO_REPLY);
    expect(await direct.send('GET', k)).toBe('applied');
  });

  it('resets open connections and every new one', async () => {
    proxy = await FaultProxy.start({ target: node.url });
    const open = await viaProxy();
    expect(await open.send('PING')).toBe('PONG');

    proxy.setMode('reset');
    await until(() => open.closed !== null);
    await expect(open.send('PING')).rejects.toThrow();
    const fresh = await RespConnection.connect(proxy.port).then(
      (c) => {
        opened.push(c);
        return c.send('PING');
      },
      (error: unknown) => error,
    );
    expect(fresh).toBeInstanceOf(Error);

    proxy.setMode('pass');
    expect(await (await viaProxy()).send('PING')).toBe('PONG');
    expect(proxy.stats.reset).toBeGreaterThanOrEqual(2);
  });

  it('delays each chunk both ways and keeps their order under jitter', async () => {
    proxy = await FaultProxy.start({ target: node.url });
    const conn = await viaProxy();
    proxy.setMode('delay', { delayMs: 100 });
    const started = performance.now();
    expect(await conn.send('PING')).toBe('PONG');
    expect(performance.now() - started).toBeGreaterThanOrEqual(195); // 100 there + 100 back

    proxy.setMode('delay', { delayMs: 5, jitterMs: 40 });
    const k = key();
    const replies: number[] = [];
    await Promise.all(
      Array.from({ length: 30 }, () => conn.send('INCR', k).then((r) => replies.push(Number(r)))),
    );
    expect(replies).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
  });

  it('holds both ways, then releases requests and replies in order', async () => {
    proxy = await FaultProxy.start({ target: node.url });
    const conn = await viaProxy();
    expect(await conn.send('PING')).toBe('PONG');
    proxy.setMode('hold');
    const k = key();
    const replies = [conn.send('RPUSH', k, 'a'), conn.send('RPUSH', k, 'b'), conn.send('LRANGE', k, 0, -1)];
    await until(() => proxy.stats.queuedBytes > 0);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await direct.send('EXISTS', k)).toBe(0); // nothing reached the server

    proxy.release();
    expect(await Promise.all(replies)).toEqual([1, 2, ['a', 'b']]);
    expect(proxy.mode).toBe('pass');
  });

  it('holds only replies: the command is applied, its reply waits (F2)', async () => {
    proxy = await FaultProxy.start({ target: node.url });
    const conn = await viaProxy();
    proxy.setMode('hold', { direction: 'to-client' });
    const k = key();
    const reply = conn.send('INCR', k);
    await until(async () => (await direct.send('GET', k)) === '1');
    expect(await Promise.race([reply, new Promise((r) => setTimeout(() => r(NO_REPLY), QUIET_MS))])).toBe(
      NO_REPLY,
    );
    proxy.release();
    expect(await reply).toBe(1);
  });

  it('delivers a held request after its client has gone (F3)', async () => {
    proxy = await FaultProxy.start({ target: node.url, mode: 'hold' });
    const conn = await viaProxy();
    const k = key();
    void conn.send('SET', k, 'late').catch(() => undefined);
    await until(() => proxy.stats.queuedBytes > 0);
    conn.close();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await direct.send('GET', k)).toBeNull();

    proxy.release();
    await until(async () => (await direct.send('GET', k)) === 'late');
    await until(() => proxy.stats.open === 0);
  });

  it('drops responses: the request is applied, the reply lost, the connection cut on heal (F9)', async () => {
    proxy = await FaultProxy.start({ target: node.url });
    const conn = await viaProxy();
    proxy.setMode('drop-responses');
    const k = key();
    expect(await conn.sendWithin(QUIET_MS, 'SET', k, 'applied')).toBe(NO_REPLY);
    expect(await direct.send('GET', k)).toBe('applied');

    proxy.setMode('pass');
    await until(() => conn.closed !== null);
    expect(await (await viaProxy()).send('GET', k)).toBe('applied');
  });

  it('resets the client when the target is down', async () => {
    const gone = await RedisNode.start({ persistence: 'none' });
    proxy = await FaultProxy.start({ target: gone.url });
    await gone.stop();
    const conn = await viaProxy();
    await expect(conn.send('PING')).rejects.toThrow();
  });

  it('works under ioredis, which reconnects after a reset', async () => {
    proxy = await FaultProxy.start({ target: node.url });
    const redis = new Redis(proxy.url, {
      lazyConnect: true,
      maxRetriesPerRequest: 3,
      retryStrategy: () => 20,
    });
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      expect(await redis.ping()).toBe('PONG');
      proxy.setMode('reset');
      await new Promise((resolve) => setTimeout(resolve, 50));
      proxy.setMode('pass');
      expect(await redis.ping()).toBe('PONG');
    } finally {
      redis.disconnect();
    }
  });

  it('gives one proxy per URL, so one node can be cut off while the others answer', async () => {
    const other = await RedisNode.start({ persistence: 'none' });
    const set = await proxyEach([node.url, other.url]);
    try {
      expect(set.urls).toHaveLength(2);
      set.proxies[1]!.setMode('blackhole');
      const [a, b] = await Promise.all(set.proxies.map((p) => RespConnection.connect(p.port)));
      opened.push(a!, b!);
      expect(await a!.send('PING')).toBe('PONG');
      expect(await b!.sendWithin(QUIET_MS, 'PING')).toBe(NO_REPLY);
      set.setMode('hold');
      const held = a!.send('PING');
      set.release();
      expect(await held).toBe('PONG');
    } finally {
      await set.stop();
      await other.stop();
    }
  });
});

describe('fault proxy on the Postgres path', () => {
  it('holds a query in the network and delivers it on release (F3 shape)', async () => {
    const server = await findOrStartPostgres();
    const proxy = await FaultProxy.start({ target: server.url });
    const client = new pg.Client({ connectionString: proxy.url });
    try {
      expect(proxy.url).toMatch(/^postgres(ql)?:\/\/.*127\.0\.0\.1:\d+\//);
      await client.connect();
      expect((await client.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
      proxy.setMode('hold');
      let done = false;
      const pending = client.query<{ n: number }>('select 2 as n').then((r) => {
        done = true;
        return r.rows;
      });
      await new Promise((resolve) => setTimeout(resolve, QUIET_MS));
      expect(done).toBe(false);
      proxy.release();
      expect(await pending).toEqual([{ n: 2 }]);
    } finally {
      await client.end().catch(() => undefined);
      await proxy.stop();
      await server.stop();
    }
  });
});
