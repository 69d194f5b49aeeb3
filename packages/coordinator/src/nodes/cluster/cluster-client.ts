/**
 * How a Redis Cluster member is reached (DESIGN §3c): the ioredis Cluster client the coordinator makes from seed URLs,
 * or one of yours, recognised by what it can do. Commands routed by slot, MOVED/ASK/TRYAGAIN followed (the script did
 * not run), a script never sent again after its connection closed (it may have run: DESIGN §3, "never resend").
 */
import ioredis, { type Cluster } from 'ioredis';
import { InvalidRequestError } from '@fenced/shared';
import { ownedClientOptions } from '../node-connection.js';
import { describeValue } from '../client-shape.js';
import { clientAddress, urlAddress } from '../node-address.js';

const IORedis = ioredis.default;

export type { ClusterMemberConfig } from '../../options.js';

/** Whether `node` is the configuration form `{ cluster: [...] }`. */
export function isClusterConfig(node: unknown): node is { cluster: unknown } {
  return typeof node === 'object' && node !== null && 'cluster' in node && !('sendCommand' in node);
}

/** Whether `node` is an ioredis Cluster client (of any copy of ioredis 4.28+ or 5). */
export function isClusterClient(node: unknown): boolean {
  return typeof node === 'object' && node !== null && (node as { isCluster?: unknown }).isCluster === true;
}

/** Options of the Cluster clients the coordinator creates from seed URLs. */
function ownedClusterOptions(connectTimeoutMs: number, seed: URL) {
  const perNode = ownedClientOptions(connectTimeoutMs);
  return {
    enableAutoPipelining: false,
    enableOfflineQueue: false,
    // Never send a script again after its connection closed: it may have run (DESIGN §3, "never resend").
    retryDelayOnFailover: 0,
    // MOVED, ASK, TRYAGAIN and CLUSTERDOWN replies mean the script did not run: following them is safe.
    retryDelayOnTryAgain: 50,
    retryDelayOnClusterDown: 100,
    maxRedirections: 16,
    slotsRefreshTimeout: connectTimeoutMs,
    clusterRetryStrategy: (attempt: number) => Math.min(50 * attempt, 1_000),
    lazyConnect: false,
    redisOptions: {
      connectTimeout: perNode.connectTimeout,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      ...(seed.username === '' ? {} : { username: decodeURIComponent(seed.username) }),
      ...(seed.password === '' ? {} : { password: decodeURIComponent(seed.password) }),
      ...(seed.protocol === 'rediss:' ? { tls: {} } : {}),
    },
  };
}

function parseSeeds(index: number, config: { cluster: unknown }): URL[] {
  const seeds = config.cluster;
  const allowed =
    'a non-empty array of redis:// or rediss:// URLs of the cluster\'s masters, e.g. { cluster: ["redis://10.0.0.1:7000"] }';
  if (!Array.isArray(seeds) || seeds.length === 0) {
    throw new InvalidRequestError(`nodes[${index}].cluster must be ${allowed}; got ${describeValue(seeds)}`);
  }
  return seeds.map((seed: unknown, i) => {
    let url: URL | undefined;
    try {
      url = typeof seed === 'string' ? new URL(seed) : undefined;
    } catch {
      url = undefined;
    }
    if (url === undefined || (url.protocol !== 'redis:' && url.protocol !== 'rediss:')) {
      throw new InvalidRequestError(
        `nodes[${index}].cluster[${i}] must be a redis:// or rediss:// URL; got ${typeof seed === 'string' ? `'${seed}'` : describeValue(seed)} (${typeof seed})`,
      );
    }
    if (url.pathname.length > 1 && url.pathname !== '/0') {
      throw new InvalidRequestError(
        `nodes[${index}].cluster[${i}] names database ${url.pathname.slice(1)}; a Redis Cluster has only database 0`,
      );
    }
    return url;
  });
}

/**
 * The Cluster client of member `index`: made from `{ cluster: [seed URLs] }` (owned: closed with the coordinator), or
 * yours, checked for what the member needs. `seeds` are the addresses the member is named by.
 * @throws InvalidRequestError naming the entry, what is wrong and what is allowed
 */
export function clusterClientOf(
  index: number,
  node: unknown,
  connectTimeoutMs: number,
): { cluster: Cluster; seeds: string[]; owned: boolean } {
  if (isClusterConfig(node)) {
    const seeds = parseSeeds(index, node);
    const cluster = new IORedis.Cluster(
      seeds.map((url) => urlAddress(url)),
      ownedClusterOptions(connectTimeoutMs, seeds[0]!),
    );
    return { cluster, seeds: seeds.map((url) => urlAddress(url).address), owned: true };
  }
  const candidate = node as Record<string, unknown>;
  const missing = [
    'sendCommand',
    'nodes',
    'on',
    'off',
    'once',
    'connect',
    'quit',
    'disconnect',
    'duplicate',
  ].filter((name) => typeof candidate[name] !== 'function');
  if (missing.length > 0 || typeof candidate['status'] !== 'string') {
    throw new InvalidRequestError(
      `nodes[${index}] looks like an ioredis Cluster but lacks ${missing.join(', ') || 'status'}: ioredis Cluster clients of versions ^4.28.0 || ^5.0.0 are supported, got ${describeValue(node)}`,
    );
  }
  const cluster = node as Cluster;
  if (cluster.options.keyPrefix || cluster.options.redisOptions?.keyPrefix) {
    throw new InvalidRequestError(
      `nodes[${index}] must not use ioredis' keyPrefix; use the keyPrefix option`,
    );
  }
  const startup = (cluster as unknown as { startupNodes?: unknown[] }).startupNodes ?? [];
  const seeds = startup.map((n) =>
    typeof n === 'object' && n !== null ? clientAddress(n as { host?: string; port?: number }) : String(n),
  );
  return { cluster, seeds, owned: false };
}
