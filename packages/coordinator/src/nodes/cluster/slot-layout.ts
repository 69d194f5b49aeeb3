/**
 * A Redis Cluster's slot layout as one member's operations over whole shards need it: CLUSTER SLOTS parsed into
 * ranges, each master's slots cut into script-sized calls (built once per layout), and probe reads shared between
 * coordinators of one process. Pure bookkeeping: nothing here decides a vote.
 */
import type { Redis } from 'ioredis';
import type { ProbeShardReply } from '../../scripts/script-results.js';
import { slotTag } from '../../keys/slots.js';

/**
 * Slots per call of a script over a shard (probe-shard.lua, fresh-init-shard.lua). Redis runs nothing else while a
 * script runs: one fresh-initialization step over a master's 5 461 slots held it for 60–190 ms (INFO commandstats,
 * fsync-always masters), queuing every other client's commands behind it. Calls of 1 024 slots hold it about a
 * fifth as long. A probe sends its calls all at once, so a shard costs one round trip; a fresh initialization (three
 * steps of mark-sized writes on every slot, once in a member's life) sends them one at a time over the whole member,
 * since a master reads the calls sent together in one go and runs them back to back, and every master of every
 * member running its share at once starves whatever else runs on the hosts (measured with node-redlock's own suite,
 * four fresh Clusters at once on 2 cores: the application's own GET/PTTL took up to 100 ms beside it).
 */
export const SHARD_SCRIPT_SLOTS = 1_024;

/** A range of CLUSTER SLOTS: `[start, end]` served by `master`, replicated to `replicas` (host:port each). */
export interface SlotRange {
  readonly start: number;
  readonly end: number;
  readonly master: string;
  readonly replicas: readonly string[];
}

/** `items` in consecutive runs of at most `size`. */
export function chunksOf<T>(items: readonly T[], size: number): T[][] {
  const chunks: T[][] = [];
  for (let from = 0; from < items.length; from += size) chunks.push(items.slice(from, from + size));
  return chunks;
}

/** Probe reads in flight, per master connection and (key head, slots). */
const probeReads = new WeakMap<Redis, Map<string, Promise<ProbeShardReply>>>();

/**
 * The probe-shard.lua read of `key` on `client`, joined when the same read is in flight there: coordinators that
 * share a Cluster client and start together (one per Redlock, say) read each shard once. Joining a read that began
 * a moment before one's own call is as safe as reading a moment earlier: no decision trusts a probe alone — every
 * script re-checks its slot's incarnation key atomically, a fresh initialization marks and checks every slot
 * (nodes/fresh-cluster.ts), and a repair claims the slot first.
 */
export function sharedRead(
  client: Redis,
  key: string,
  read: () => Promise<ProbeShardReply>,
): Promise<ProbeShardReply> {
  let reads = probeReads.get(client);
  if (reads === undefined) {
    reads = new Map();
    probeReads.set(client, reads);
  }
  const inFlight = reads.get(key);
  if (inFlight !== undefined) return inFlight;
  const started = read().finally(() => reads.delete(key));
  reads.set(key, started);
  return started;
}

/** Slot lists by ranges, for slotsOf: a layout changes rarely, and every probe and initialization asks again. */
const slotLists = new Map<string, readonly number[]>();

/** Slots of one call of a script over a shard, and their tags joined as the call sends them. */
export interface ShardChunk {
  readonly slots: readonly number[];
  readonly tags: string;
}

/** By the (cached) slot list they cut: every coordinator of the process probing a shard sends the same calls. */
const shardChunkLists = new WeakMap<readonly number[], readonly ShardChunk[]>();

/** A master's slots in calls of at most SHARD_SCRIPT_SLOTS, built once per layout like `slotsOf`. */
export function shardChunksOf(ranges: readonly SlotRange[]): readonly ShardChunk[] {
  const slots = slotsOf(ranges);
  let chunks = shardChunkLists.get(slots);
  if (chunks === undefined) {
    chunks = chunksOf(slots, SHARD_SCRIPT_SLOTS).map((part) => ({
      slots: part,
      tags: part.map(slotTag).join(','),
    }));
    shardChunkLists.set(slots, chunks);
  }
  return chunks;
}

/** Every slot of `ranges`, in order. */
export function slotsOf(ranges: readonly SlotRange[]): readonly number[] {
  const key = ranges.map(({ start, end }) => `${start}-${end}`).join(',');
  let slots = slotLists.get(key);
  if (slots === undefined) {
    const list: number[] = [];
    for (const { start, end } of ranges) for (let slot = start; slot <= end; slot++) list.push(slot);
    slots = Object.freeze(list);
    if (slotLists.size >= 64) slotLists.clear();
    slotLists.set(key, slots);
  }
  return slots;
}

export function parseClusterSlots(reply: unknown): SlotRange[] {
  if (!Array.isArray(reply)) return [];
  const address = (entry: unknown): string | undefined =>
    Array.isArray(entry) && typeof entry[0] === 'string' && typeof entry[1] === 'number'
      ? `${entry[0]}:${entry[1]}`
      : undefined;
  const ranges: SlotRange[] = [];
  for (const item of reply as unknown[]) {
    if (!Array.isArray(item) || typeof item[0] !== 'number' || typeof item[1] !== 'number') continue;
    const master = address(item[2]);
    if (master === undefined) continue;
    const replicas = (item.slice(3) as unknown[]).map(address).filter((a): a is string => a !== undefined);
    ranges.push({ start: item[0], end: item[1], master, replicas });
  }
  return ranges;
}
