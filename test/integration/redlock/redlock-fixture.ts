import type { Redis } from 'ioredis';
import { keysOf } from '../../fixtures/keys.js';

/**
 * What the ported node-redlock tests read. @fenced/redlock keeps redlock's own lease keys (the coordinator's
 * `keyLayout: 'redlock'`): the lock value is stored under the resource name itself, exactly as redlock does, so
 * these are redlock's `redis.get(resource)` and `redis.pttl(resource)`. The fencing token sits in the lease's record
 * beside it (`<lease id>|<token>`, in the same cluster slot).
 */

/** The lock value a node holds for the resource, or null: redlock's `redis.get(resource)`. */
export function lockValue(redis: Redis, resource: string): Promise<string | null> {
  return redis.get(resource);
}

/** redlock's `redis.pttl(resource)`. */
export function lockTtl(redis: Redis, resource: string): Promise<number> {
  return redis.pttl(resource);
}

/** The token a node stores with the lease (in its record), or null. */
export async function storedToken(redis: Redis, resource: string, prefix?: string): Promise<bigint | null> {
  const value = await redis.get(keysOf(resource, prefix, 'redlock').record);
  return value === null ? null : BigInt(value.split('|')[1]!);
}
