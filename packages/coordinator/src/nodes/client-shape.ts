/**
 * Recognises an ioredis client passed as a node by what it can do, not by `instanceof` against this package's own
 * copy of ioredis: an application (or a library such as a redlock drop-in) often has its own copy, a second
 * ioredis 5 or an ioredis 4, and `instanceof` fails for every client of another copy.
 *
 * What the coordinator needs from a client: `sendCommand` (scripts go straight to the connection, see
 * src/scripts/scripts.ts), `duplicate` (the waiters' subscriber connection), the events `ready` and `error`, `status`,
 * `options` (address and the keyPrefix check), `connect`, `quit` and `disconnect`, and the command methods `ping`,
 * `config`, `info`, `exists`, `scan` and `subscribe`. ioredis 4.28+ and 5 have all of them with the same
 * behaviour; both are tested (test/integration/redlock/foreign-clients.test.ts).
 *
 * A Redis Cluster client (`isCluster: true`) never reaches this check: it is a Cluster member (DESIGN §3c,
 * nodes/cluster/cluster-client.ts, which checks its own shape).
 */
import type { Redis } from 'ioredis';
import { InvalidRequestError } from '@fenced/shared';

/** The ioredis versions whose clients the coordinator accepts (also the packages' peerDependencies range). */
export const SUPPORTED_IOREDIS_VERSIONS = '^4.28.0 || ^5.0.0';

const REQUIRED_METHODS = [
  'sendCommand',
  'duplicate',
  'on',
  'off',
  'once',
  'connect',
  'quit',
  'disconnect',
  'ping',
  'config',
  'info',
  'exists',
  'scan',
  'subscribe',
] as const;

/** What kind of value was passed (for messages): its type, and its class when it is an object. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value !== 'object') return typeof value;
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== '' && name !== 'Object' ? `object (${name})` : 'object';
}

/**
 * Returns `node` as a standalone ioredis client when it is one (of any copy of ioredis 4.28+ or 5), `undefined`
 * when it is not a client at all, and throws a typed error for a client that cannot be a node: a client missing what the coordinator calls (an ioredis older than 4.28, or another library).
 */
export function asRedisClient(node: unknown, index: number): Redis | undefined {
  if (typeof node !== 'object' || node === null) return undefined;
  const candidate = node as Record<string, unknown>;
  const looksLikeClient =
    typeof candidate['sendCommand'] === 'function' &&
    typeof candidate['options'] === 'object' &&
    candidate['options'] !== null;
  if (!looksLikeClient) return undefined;
  const missing = REQUIRED_METHODS.filter((name) => typeof candidate[name] !== 'function');
  if (typeof candidate['status'] !== 'string') missing.push('status' as never);
  if (missing.length > 0) {
    throw new InvalidRequestError(
      `nodes[${index}] looks like a Redis client but lacks ${missing.join(', ')}: ioredis clients of versions ` +
        `${SUPPORTED_IOREDIS_VERSIONS} are supported, got ${describeValue(node)}`,
    );
  }
  return node as Redis;
}
