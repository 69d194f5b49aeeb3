/**
 * Where a quorum member is: the one parser of node addresses (URLs, `FENCED_REDIS_URLS` entries, ioredis clients'
 * options) and the one place the default port is written.
 *
 * The text form of one quorum member, as `FENCED_REDIS_URLS` (the service, the operator commands) lists them,
 * comma-separated: a standalone master is a `redis://` or `rediss://` URL; a Redis Cluster member is `cluster:`
 * followed by seed URLs of its masters joined by `+`, e.g. `cluster:redis://10.0.0.1:7000+redis://10.0.0.2:7000`
 * (DESIGN §3c). One seed is enough; more survive a seed being down.
 */
import { InvalidRequestError } from '@fenced/shared';
import type { ClusterMemberConfig } from '../options.js';

/** The port of a Redis URL or client that names none. */
export const DEFAULT_REDIS_PORT = 6379;

/** `host:port` of a `redis://` or `rediss://` URL, the port defaulting to 6379. */
export function urlAddress(url: URL): { host: string; port: number; address: string } {
  const port = url.port === '' ? DEFAULT_REDIS_PORT : Number(url.port);
  return { host: url.hostname, port, address: `${url.hostname}:${port}` };
}

/** `host:port` (or the socket path) an ioredis client's options name, as ioredis defaults them. */
export function clientAddress(options: { host?: string; port?: number; path?: string | null }): string {
  return options.path ?? `${options.host ?? 'localhost'}:${options.port ?? DEFAULT_REDIS_PORT}`;
}

/** What starts a Cluster member's entry. */
export const CLUSTER_ENTRY_PREFIX = 'cluster:';

/** What one entry may be, for messages. */
export const NODE_ENTRY_FORMS =
  'a redis:// or rediss:// URL with a host, or cluster:<url>+<url>+... (seed URLs of a Redis Cluster member)';

/** The port of a `redis://` or `rediss://` URL as written (after any `user:password@`), or undefined. */
const WRITTEN_PORT = /^rediss?:\/\/(?:[^@/]*@)?(?:\[[^\]]*\]|[^:/?#]*):([^/?#]*)/i;

/**
 * Why `text` is not a redis:// or rediss:// URL with a host, or `undefined` when it is one. Names the wrong part
 * without echoing the URL (it may carry a password); a port is quoted (it holds no secret).
 */
export function redisUrlProblem(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    const port = WRITTEN_PORT.exec(text)?.[1];
    if (port !== undefined && (!/^[0-9]{1,5}$/.test(port) || Number(port) > 65_535)) {
      return `has the port '${port.slice(0, 16)}': a port is a whole number from 0 to 65535`;
    }
    return 'is not a redis:// or rediss:// URL';
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    return `has the scheme '${url.protocol.slice(0, 16)}//', not redis:// or rediss://`;
  }
  return url.hostname === '' ? 'has no host' : undefined;
}

function isRedisUrl(text: string): boolean {
  return redisUrlProblem(text) === undefined;
}

/**
 * Why `text` is not a member entry, or `undefined` when it is one. Never echoes the text (a URL may carry a
 * password): it names the part by position.
 */
export function nodeEntryProblem(text: string): string | undefined {
  if (!text.startsWith(CLUSTER_ENTRY_PREFIX)) {
    const problem = redisUrlProblem(text);
    if (problem === undefined) return undefined;
    // A wrong port is said as such; anything else is told the forms an entry may take.
    return problem.startsWith('has the port') ? problem : `is not ${NODE_ENTRY_FORMS}`;
  }
  const seeds = text.slice(CLUSTER_ENTRY_PREFIX.length).split('+');
  if (seeds.length === 1 && seeds[0] === '')
    return 'is cluster: with no seed URL (cluster:redis://host:port+...)';
  const bad = seeds.findIndex((seed) => !isRedisUrl(seed));
  if (bad === -1) return undefined;
  const problem = redisUrlProblem(seeds[bad]!);
  return problem?.startsWith('has the port')
    ? `is a cluster member whose seed ${bad} ${problem}`
    : `is a cluster member whose seed ${bad} is not a redis:// or rediss:// URL with a host (seeds are joined by +)`;
}

/**
 * One entry as the `nodes` option takes it: the URL itself, or `{ cluster: [seeds] }`.
 * @throws InvalidRequestError when the entry is neither form
 */
export function parseNodeEntry(text: string, index = 0): string | ClusterMemberConfig {
  const problem = nodeEntryProblem(text);
  if (problem !== undefined) throw new InvalidRequestError(`node entry ${index} ${problem}`);
  return text.startsWith(CLUSTER_ENTRY_PREFIX)
    ? { cluster: text.slice(CLUSTER_ENTRY_PREFIX.length).split('+') }
    : text;
}

/** host:port of a standalone entry, or `cluster(host:port,...)` of a Cluster member (as `nodeStatus()` names it). */
export function nodeEntryAddress(text: string): string {
  const address = (url: string): string => urlAddress(new URL(url)).address;
  return text.startsWith(CLUSTER_ENTRY_PREFIX)
    ? `cluster(${text.slice(CLUSTER_ENTRY_PREFIX.length).split('+').map(address).join(',')})`
    : address(text);
}
