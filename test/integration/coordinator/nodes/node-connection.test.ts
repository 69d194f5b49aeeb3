// One Redis master as the coordinator sees it (nodes/node-connection.ts), on real redis-server processes: what a
// probe finds (settings, role, incarnation key) and so whether the node may vote; why a node is unreachable, in
// words an operator can act on; every call bounded by its timeout; and a client you passed in left as it was.
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisNode } from '@fenced/test-utils/redis-node';
import { NodeTimeoutError } from '../../../../packages/coordinator/src/errors.js';
import { NodeConnection } from '../../../../packages/coordinator/src/nodes/node-connection.js';
import { eventually, nodeStateKeys, resourceKeys, unique } from '../../../fixtures/coordinator-fixture.js';

let safe: RedisNode;
let everysec: RedisNode;
let direct: Redis;

beforeAll(async () => {
  [safe, everysec] = await Promise.all([
    RedisNode.start(),
    RedisNode.start({ persistence: 'fsync-everysec' }),
  ]);
  direct = new Redis(safe.url);
});

afterAll(async () => {
  direct?.disconnect();
  await Promise.all([safe?.stop(), everysec?.stop()]);
});

/** Node errors a connection reported, as `operation: message`. */
type Reported = string[];

function connect(node: unknown, prefix = `nc-${randomUUID().slice(0, 8)}`) {
  const reported: Reported = [];
  const connection = new NodeConnection(
    0,
    node,
    prefix,
    (_node, operation, error) => reported.push(`${operation}: ${String(error)}`),
    1_000,
  );
  return { connection, reported, prefix };
}

describe('a probe', () => {
  it('finds a safe master, and lets it vote only once it holds its incarnation key', async () => {
    const { connection, prefix } = connect(safe.url);
    try {
      const first = await connection.probe(5_000, { waitForConnection: true });
      expect(first).toMatchObject({
        reachable: true,
        role: 'master',
        configProblems: [],
        initialized: false,
      });
      expect(connection.isVoting(false)).toBe(false);
      await direct.set(nodeStateKeys(prefix).incarnation, 'test-incarnation');
      expect(await connection.probe(1_000)).toMatchObject({ reachable: true, initialized: true });
      expect(connection.isVoting(false)).toBe(true);
      // A node found empty again (restarted without its data) stops voting at the next probe.
      await direct.del(nodeStateKeys(prefix).incarnation);
      await connection.probe(1_000);
      expect(connection.isVoting(false)).toBe(false);
    } finally {
      await connection.close();
    }
  });

  it('names a setting that is not safe, and the node votes only when unsafe nodes are allowed', async () => {
    const { connection, prefix } = connect(everysec.url);
    const raw = new Redis(everysec.url);
    try {
      await raw.set(nodeStateKeys(prefix).incarnation, 'test-incarnation');
      const probe = await connection.probe(5_000, { waitForConnection: true });
      expect(probe.configProblems).toEqual(["appendfsync is 'everysec'; it must be 'always'"]);
      expect(connection.isVoting(false)).toBe(false);
      expect(connection.isVoting(true)).toBe(true);
    } finally {
      raw.disconnect();
      await connection.close();
    }
  });

  it('says "connection refused" for a port nobody listens on, and never throws', async () => {
    const gone = await RedisNode.start();
    const { connection } = connect(gone.url);
    try {
      await connection.probe(5_000, { waitForConnection: true });
      await gone.stop();
      await eventually(
        async () => (await connection.probe(1_000)).error === 'unreachable: connection refused',
        {
          what: 'a probe naming the refused connection',
        },
      );
      expect(connection.lastProbe).toMatchObject({ reachable: false });
      expect(connection.isVoting(true)).toBe(false);
    } finally {
      await connection.close();
    }
  });

  it('says a port that is not Redis is not a Redis server: one that answers in another protocol, one that hangs up', async () => {
    // An HTTP server where a Redis node was configured answers the ready check with an HTTP status line; another
    // server (a proxy with nothing behind it, say) accepts each connection and closes it at once.
    const answers = net.createServer((socket) => {
      socket.on('data', () => socket.write('HTTP/1.1 400 Bad Request\r\n\r\n'));
      socket.on('error', () => undefined);
    });
    const hangsUp = net.createServer((socket) => socket.destroy());
    const servers = [answers, hangsUp];
    const ports = await Promise.all(
      servers.map(
        (server) =>
          new Promise<number>((resolve) =>
            server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)),
          ),
      ),
    );
    const [http, closing] = ports.map((port) => connect(`redis://127.0.0.1:${port}`).connection);
    try {
      for (const [connection, reason] of [
        [http!, 'its reply is not the Redis protocol'],
        [closing!, 'it accepts connections and closes them without a Redis reply'],
      ] as const) {
        await eventually(async () => (await connection.probe(1_000)).error?.includes(reason) === true, {
          what: `a probe saying: ${reason}`,
          timeoutMs: 20_000,
        });
        expect(connection.lastProbe!.error).toMatch(/^unreachable: not a Redis server: /);
      }
    } finally {
      await Promise.all([http!.close(), closing!.close()]);
      for (const server of servers) server.close();
    }
  });
});

describe('a call', () => {
  it('is bounded by its timeout on a node that hangs, and reported as a node error', async () => {
    const hung = await RedisNode.start();
    const { connection, reported } = connect(hung.url);
    try {
      await connection.waitUntilConnected(5_000);
      hung.pause();
      const call = connection.call('ping', 200, (client) => client.ping());
      await expect(call).rejects.toBeInstanceOf(NodeTimeoutError);
      await expect(call).rejects.toThrow(/node 0 ping/);
      expect(reported).toEqual(['ping: NodeTimeoutError: node 0 ping got no reply within 200 ms']);
    } finally {
      hung.resume();
      await connection.close();
      await hung.stop();
    }
  });

  it('finds resource keys of its prefix only (the test before a fresh initialization)', async () => {
    const { connection, prefix } = connect(safe.url);
    try {
      await connection.waitUntilConnected(5_000);
      await direct.set(resourceKeys(`${prefix}-other`, unique('r')).lease, 'x');
      expect(await connection.hasResourceKeys(1_000)).toBe(false);
      await direct.set(resourceKeys(prefix, unique('r')).token, '7');
      expect(await connection.hasResourceKeys(1_000)).toBe(true);
    } finally {
      await connection.close();
    }
  });
});

describe('the client', () => {
  it('is refused, naming the node, when it cannot be one', () => {
    expect(() => connect('http://127.0.0.1:6379')).toThrow(/^nodes\[0\] has the scheme 'http:\/\/'/);
    expect(() => connect(42)).toThrow(
      /^nodes\[0\] must be a redis:\/\/ or rediss:\/\/ URL or an ioredis client/,
    );
    const prefixed = new Redis(safe.url, { keyPrefix: 'app:', lazyConnect: true });
    try {
      expect(() => connect(prefixed)).toThrow(/^nodes\[0\] must not use ioredis' keyPrefix/);
    } finally {
      prefixed.disconnect();
    }
  });

  it('of yours is left connected, with none of the listeners the connection added, after close', async () => {
    const yours = new Redis(safe.url);
    try {
      await yours.ping();
      const before = ['ready', 'error', 'connect', 'close'].map((e) => yours.listenerCount(e));
      const limit = yours.getMaxListeners();
      const { connection } = connect(yours);
      expect(connection.owned).toBe(false);
      expect(yours.listenerCount('ready')).toBeGreaterThan(before[0]!);
      await connection.close();
      expect(['ready', 'error', 'connect', 'close'].map((e) => yours.listenerCount(e))).toEqual(before);
      expect(yours.getMaxListeners()).toBe(limit);
      expect(await yours.ping()).toBe('PONG');
    } finally {
      yours.disconnect();
    }
  });

  it('made from a URL is closed with the connection', async () => {
    const { connection } = connect(safe.url);
    await connection.waitUntilConnected(5_000);
    expect(connection.owned).toBe(true);
    await connection.close();
    await eventually(() => connection.client.status === 'end', { what: 'the client it made closed' });
  });
});
