import { tokenKeyPattern } from '../redlock/keys.js';
import type { NodeConnection } from './node-connection.js';

const DECIMAL = /^[1-9][0-9]{0,18}$/;

/**
 * Reads every token register of one node (SCAN + MGET), for the repair of a node that restarted empty.
 * Values that are not decimal tokens are skipped (the scripts refuse to vote on them anyway).
 */
export async function readTokenRegisters(
  node: NodeConnection,
  prefix: string,
  timeoutMs: number,
): Promise<Map<string, bigint>> {
  const registers = new Map<string, bigint>();
  let cursor = '0';
  do {
    const [next, keys] = await node.call('repair-read', timeoutMs, (c) =>
      c.scan(cursor, 'MATCH', tokenKeyPattern(prefix), 'COUNT', 1000),
    );
    cursor = next;
    if (keys.length === 0) continue;
    const values = await node.call('repair-read', timeoutMs, (c) => c.mget(...keys));
    keys.forEach((key, i) => {
      const value = values[i];
      if (typeof value === 'string' && DECIMAL.test(value)) registers.set(key, BigInt(value));
    });
  } while (cursor !== '0');
  return registers;
}
