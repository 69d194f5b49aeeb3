import { randomUUID } from 'node:crypto';
import { incarnationKey, repairMarkerKey, tokenKeyPattern } from '../redlock/keys.js';
import type { NodeConnection } from './node-connection.js';
import type { NodeSet } from './node-set.js';

const DECIMAL = /^[1-9][0-9]{0,18}$/;

/**
 * Repairs a node that restarted empty (DESIGN §3): copies, for every token register found on at least
 * `N − quorum + 1` initialized nodes, the highest value into it, sits out `maxTtlMs`, then lets it vote.
 */
export async function runRepair(set: NodeSet, node: NodeConnection): Promise<void> {
  const { settings } = set;
  const prefix = settings.keyPrefix;
  const marker = repairMarkerKey(prefix);
  const repairId = randomUUID();
  const timeout = set.probeTimeoutMs;
  node.repairStatus = 'restarted empty: repair starting';
  try {
    // Any N − quorum + 1 nodes meet every majority that promised a token (together with the empty node they
    // cover all N), so their maximum is at least every token granted before the repair read them.
    const required = set.nodes.length - set.quorum + 1;
    const sources = set.nodes.filter((n) => n !== node && set.isVoting(n.index));
    if (sources.length < required) {
      throw new Error(`needs ${required} voting nodes to copy token registers from, has ${sources.length}`);
    }
    const claimed = await node.call('repair', timeout, (c) =>
      c.set(marker, repairId, 'PX', settings.maxTtlMs + 60_000, 'NX'),
    );
    if (claimed !== 'OK') throw new Error('another process is repairing this node');
    // Initialized meanwhile (by another coordinator, or our view was stale): nothing to repair.
    if ((await node.call('repair', timeout, (c) => c.exists(incarnationKey(prefix)))) === 1) {
      await node.call('repair', timeout, (c) => c.del(marker)).catch(() => undefined);
      node.initialized = true;
      return;
    }
    const maxima = new Map<string, bigint>();
    let answered = 0;
    await Promise.all(
      sources.map(async (source) => {
        try {
          const registers = await readTokenRegisters(source, prefix, timeout);
          for (const [key, value] of registers) {
            const known = maxima.get(key);
            if (known === undefined || value > known) maxima.set(key, value);
          }
          answered++;
        } catch (error) {
          set.reportError(source.index, 'repair-read', error);
        }
      }),
    );
    if (answered < required)
      throw new Error(`only ${answered} of the ${required} nodes needed could be read`);
    node.repairStatus = `restarted empty: copying ${maxima.size} token registers`;
    const entries = [...maxima];
    for (let i = 0; i < entries.length; i += 100) {
      await Promise.all(
        entries.slice(i, i + 100).map(async ([key, value]) => {
          const reply = await node.script(
            'repair-token',
            timeout,
            [key, marker],
            [value.toString(), repairId],
          );
          if (reply.kind !== 'raised') throw new Error(`copying ${key} failed: ${reply.kind}`);
        }),
      );
    }
    // Leases granted with this node's vote before it lost them may still be live elsewhere: sit out the
    // longest ttl so they have all expired before this node votes again (Redlock's delayed restart).
    const until = new Date(Date.now() + settings.maxTtlMs);
    node.repairStatus = `restarted empty: token registers repaired; sits out until ${until.toISOString()} (maxTtlMs) before voting`;
    await set.clock.sleep(settings.maxTtlMs, set.closing);
    const finished = await node.script(
      'finish-repair',
      timeout,
      [marker, incarnationKey(prefix)],
      [repairId, randomUUID()],
    );
    if (finished.kind !== 'finished') throw new Error('the node restarted again during the repair');
    node.initialized = true;
  } finally {
    node.repairStatus = undefined;
  }
}

/**
 * Reads every token register of one node (SCAN + MGET). Values that are not decimal tokens are skipped (the
 * scripts refuse to vote on them anyway).
 */
async function readTokenRegisters(
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
