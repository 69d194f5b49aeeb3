// How a Redis Cluster member is reached (nodes/cluster/cluster-client.ts): seed URLs become a Cluster client the
// coordinator owns, a Cluster client of yours is checked for what a member needs, and every mistake is refused
// when the coordinator is made, naming the entry. No server is needed: nothing here waits for a connection.
import { Cluster } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidRequestError } from '@fenced/shared';
import {
  clusterClientOf,
  isClusterClient,
  isClusterConfig,
} from '../../../../../packages/coordinator/src/nodes/cluster/cluster-client.js';

const made: Cluster[] = [];

afterEach(() => {
  for (const cluster of made.splice(0)) cluster.disconnect();
});

/** A Cluster client of yours that never connects. */
function yourCluster(options: ConstructorParameters<typeof Cluster>[1] = {}): Cluster {
  const cluster = new Cluster([{ host: '127.0.0.1', port: 7001 }, '127.0.0.1:7002'], {
    lazyConnect: true,
    ...options,
  });
  made.push(cluster);
  return cluster;
}

/** clusterClientOf for seed URLs; the client it makes tries to connect at once, so it is closed after the test. */
function fromSeeds(seeds: unknown): ReturnType<typeof clusterClientOf> {
  const result = clusterClientOf(1, { cluster: seeds }, 200);
  result.cluster.on('error', () => undefined);
  made.push(result.cluster);
  return result;
}

describe('recognising a Cluster member', () => {
  it('tells the configuration form, a Cluster client, and anything else apart', () => {
    const cluster = yourCluster();
    expect(isClusterConfig({ cluster: ['redis://127.0.0.1:7000'] })).toBe(true);
    expect(isClusterConfig(cluster)).toBe(false);
    expect(isClusterConfig('redis://127.0.0.1:7000')).toBe(false);
    expect(isClusterClient(cluster)).toBe(true);
    expect(isClusterClient({ cluster: ['redis://127.0.0.1:7000'] })).toBe(false);
    expect(isClusterClient({ isCluster: 'yes' })).toBe(false);
  });
});

describe('clusterClientOf', () => {
  it('makes a Cluster client from seed URLs, owned by the coordinator and named by its seeds', () => {
    const { cluster, seeds, owned } = fromSeeds([
      'rediss://user:p%40ss@10.0.0.2:7001/0',
      'rediss://127.0.0.1:7000',
    ]);
    expect(owned).toBe(true);
    expect(seeds).toEqual(['10.0.0.2:7001', '127.0.0.1:7000']);
    expect(isClusterClient(cluster)).toBe(true);
    // Credentials and TLS of the first seed reach every node's connection; a script is never sent twice.
    expect(cluster.options.redisOptions).toMatchObject({
      username: 'user',
      password: 'p@ss',
      tls: {},
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
    });
    expect(cluster.options.enableOfflineQueue).toBe(false);
  });

  it('refuses seeds that are not a non-empty array of redis URLs of database 0, naming the entry', () => {
    expect(() => fromSeeds([])).toThrow(
      /^nodes\[1\]\.cluster must be a non-empty array of redis:\/\/ or rediss:\/\/ URLs/,
    );
    expect(() => fromSeeds('redis://127.0.0.1:7000')).toThrow(/got string$/);
    expect(() => fromSeeds(['redis://127.0.0.1:7000', 'http://127.0.0.1:7001'])).toThrow(
      /^nodes\[1\]\.cluster\[1\] must be a redis:\/\/ or rediss:\/\/ URL; got 'http:\/\/127\.0\.0\.1:7001'/,
    );
    expect(() => fromSeeds([7000])).toThrow(
      /^nodes\[1\]\.cluster\[0\] must be a redis:\/\/ or rediss:\/\/ URL; got number/,
    );
    expect(() => fromSeeds(['redis://127.0.0.1:7000/2'])).toThrow(
      /^nodes\[1\]\.cluster\[0\] names database 2; a Redis Cluster has only database 0/,
    );
    expect(() => fromSeeds(['not a url'])).toThrow(InvalidRequestError);
  });

  it('takes a Cluster client of yours as it is, named by its startup nodes, and leaves it to you', () => {
    const cluster = yourCluster();
    const member = clusterClientOf(0, cluster, 200);
    expect(member).toEqual({ cluster, seeds: ['127.0.0.1:7001', '127.0.0.1:7002'], owned: false });
  });

  it("refuses a Cluster client of yours with ioredis' keyPrefix, at either level", () => {
    expect(() => clusterClientOf(0, yourCluster({ keyPrefix: 'app:' }), 200)).toThrow(
      /^nodes\[0\] must not use ioredis' keyPrefix; use the keyPrefix option$/,
    );
    expect(() => clusterClientOf(0, yourCluster({ redisOptions: { keyPrefix: 'app:' } }), 200)).toThrow(
      /keyPrefix/,
    );
  });

  it('refuses a Cluster-like object that lacks what a member calls, naming each missing method', () => {
    const cluster = yourCluster();
    const partial = {
      isCluster: true,
      status: cluster.status,
      options: cluster.options,
      sendCommand: () => undefined,
      on: () => undefined,
      off: () => undefined,
      once: () => undefined,
      connect: () => undefined,
    };
    expect(() => clusterClientOf(2, partial, 200)).toThrow(
      /^nodes\[2\] looks like an ioredis Cluster but lacks nodes, quit, disconnect, duplicate: ioredis Cluster clients of versions/,
    );
  });
});
