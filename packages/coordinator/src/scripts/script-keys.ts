/**
 * Every script's KEYS, in the order its contract block (the head of `lua/<script>.lua`) states them: built here and
 * nowhere else. A node's wrappers (nodes/node-connection.ts), a Cluster member's per-slot calls (nodes/cluster/) and
 * the simulation's script table take a script's keys from here, so a script whose KEYS change changes in two places:
 * its Lua file and its entry below (test/unit/coordinator/scripts/script-keys.test.ts holds the two together).
 *
 * `k` is one scope's node-state keys (keys/key-layout.ts, `nodeStateKeys`: a standalone node's, or one Cluster slot's);
 * `r` a resource's keys (`resourceKeys`).
 */
import { freshMarkKey, leaseKeyOfRecord, type NodeStateKeys, type ResourceKeys } from '../keys/key-layout.js';

type LeaseKeys = Pick<ResourceKeys, 'lease' | 'record'>;
type TokenKeys = Pick<ResourceKeys, 'lease' | 'record' | 'token'>;

export const scriptKeys = {
  /** acquire.lua's shared head; each batched item adds `acquireItem`. */
  acquire: (k: NodeStateKeys): string[] => [k.incarnation, k.floor, k.seal, k.settings],
  acquireItem: (r: TokenKeys): string[] => [r.lease, r.record, r.token],
  /** release.lua's items (it has no shared keys). */
  releaseItem: (r: LeaseKeys): string[] => [r.lease, r.record],
  promise: (k: NodeStateKeys, r: Pick<ResourceKeys, 'record' | 'token'>): string[] => [
    k.incarnation,
    k.floor,
    k.seal,
    k.settings,
    r.record,
    r.token,
  ],
  extend: (k: NodeStateKeys, r: LeaseKeys): string[] => [k.incarnation, k.settings, r.lease, r.record],
  inspect: (k: NodeStateKeys, r: LeaseKeys): string[] => [k.incarnation, r.lease, r.record],
  'repair-marker': (k: NodeStateKeys): string[] => [k.incarnation, k.repair, k.floor, k.seal, k.settings],
  /** repair-read.lua and repair-read-slot.lua (one check: include/source-keys.lua). */
  'repair-read': (k: NodeStateKeys): string[] => [k.incarnation, k.repair, k.floor, k.seal, k.settings],
  'finish-repair': (k: NodeStateKeys): string[] => [k.incarnation, k.repair, k.seal, k.settings, k.floor],
  settings: (k: NodeStateKeys): string[] => [k.incarnation, k.settings],
  'fresh-init': (k: NodeStateKeys, nonce: string): string[] => [
    k.incarnation,
    freshMarkKey(k.fresh, nonce),
    k.settings,
    k.floor,
    k.seal,
  ],
  fold: (k: NodeStateKeys): string[] => [k.incarnation, k.floor, k.fold],
  'fold-slot': (k: NodeStateKeys, registers: readonly string[]): string[] => [
    k.incarnation,
    k.floor,
    ...registers,
  ],
} as const;

/**
 * repair-raise.lua's KEYS and ARGV together (they interleave): the repair marker and the floor, each register with
 * its value, then each live lease as its record (`<leaseId>|<token>`, the key a repair read) and its lease key (the
 * same key in the 'fenced' layout, the resource name in the 'redlock' layout: keys/key-layout.ts) with its value and
 * remaining ttl.
 */
export function repairRaiseCall(
  k: NodeStateKeys,
  prefix: string,
  repairId: string,
  floor: bigint,
  registers: readonly (readonly [string, bigint])[],
  leases: readonly (readonly [string, string, number])[],
): { keys: string[]; args: (string | number)[] } {
  const keys = [k.repair, k.floor];
  const args: (string | number)[] = [repairId, floor.toString(), registers.length];
  for (const [key, value] of registers) {
    keys.push(key);
    args.push(value.toString());
  }
  for (const [record, value, pttlMs] of leases) {
    keys.push(record, leaseKeyOfRecord(prefix, record));
    args.push(value, pttlMs);
  }
  return { keys, args };
}
