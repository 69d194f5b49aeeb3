import type { Redis } from 'ioredis';
import { keysOf } from '../../fixtures/keys.js';

/**
 * Adaptation shared by the ported node-redlock tests: redlock v5 stores the lock value under the resource name
 * itself; fenced stores `<lease id>|<token>` under `fenced:{<resource>}:lease` (next to the resource's token
 * register). These read what redlock's tests read with `redis.get(resource)` and `redis.pttl(resource)`.
 */
export const leaseKey = (resource: string, prefix?: string): string => keysOf(resource, prefix).lease;

/** The lock value (lease id) a node holds for the resource, or null: redlock's `redis.get(resource)`. */
export async function lockValue(redis: Redis, resource: string, prefix?: string): Promise<string | null> {
  const value = await redis.get(leaseKey(resource, prefix));
  return value === null ? null : value.split('|')[0]!;
}

/** The token a node stores with the lease. */
export async function storedToken(redis: Redis, resource: string, prefix?: string): Promise<bigint | null> {
  const value = await redis.get(leaseKey(resource, prefix));
  return value === null ? null : BigInt(value.split('|')[1]!);
}

export function lockTtl(redis: Redis, resource: string, prefix?: string): Promise<number> {
  return redis.pttl(leaseKey(resource, prefix));
}
