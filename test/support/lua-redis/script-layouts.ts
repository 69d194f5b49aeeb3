/**
 * KEYS and ARGV of the standalone node's scripts, as the coordinator builds them (nodes/node-connection.ts: KEYS from
 * packages/coordinator/src/scripts/script-keys.ts, the one place that knows them), from concrete values. The one place
 * in the tests that knows each script's argument order: the differential test's generators (script-calls.ts) map their drawn values through these, and the
 * protocol simulation's nodes (protocol-sim/sim-redis-node.ts) call the scripts with them. When a script gains an
 * argument, its layout here changes and both follow.
 */
import { repairRaiseCall, scriptKeys } from '../../../packages/coordinator/src/scripts/script-keys.js';
import {
  resourceKeyPattern,
  tokenKeyPattern,
  type KeyLayout,
  type NodeStateKeys,
} from '../../../packages/coordinator/src/keys/key-layout.js';

export interface Layout {
  readonly keys: string[];
  readonly args: string[];
}

/** The resource keys a call names (a subset of keys/key-layout.ts's ResourceKeys). */
export interface CallKeys {
  readonly lease: string;
  readonly record: string;
  readonly token: string;
  readonly channel: string;
}

const pairs = (fields: readonly (readonly [string, string])[]): string[] =>
  fields.flatMap(([k, v]) => [k, v]);

export const SCRIPT_LAYOUTS = {
  /** acquire.lua, one batch: the node's state keys, then lease, record, token and 4 arguments per item, nodeCount last. */
  acquire(
    state: NodeStateKeys,
    items: readonly {
      readonly keys: Pick<CallKeys, 'lease' | 'record' | 'token'>;
      readonly leaseId: string;
      readonly ttl: string;
      readonly proposal: string;
      readonly epoch: string;
    }[],
    nodeCount: string,
  ): Layout {
    const keys = scriptKeys.acquire(state);
    const args: string[] = [];
    for (const item of items) {
      keys.push(...scriptKeys.acquireItem(item.keys));
      args.push(item.leaseId, item.ttl, item.proposal, item.epoch);
    }
    args.push(nodeCount);
    return { keys, args };
  },

  promise(
    state: NodeStateKeys,
    keys: Pick<CallKeys, 'record' | 'token'>,
    leaseId: string,
    proposal: string,
    epoch: string,
    layout: KeyLayout,
    nodeCount: string,
  ): Layout {
    return {
      keys: scriptKeys.promise(state, keys),
      args: [leaseId, proposal, epoch, layout, nodeCount],
    };
  },

  extend(
    state: NodeStateKeys,
    keys: Pick<CallKeys, 'lease' | 'record'>,
    leaseId: string,
    ttl: string,
    nodeCount: string,
  ): Layout {
    return {
      keys: scriptKeys.extend(state, keys),
      args: [leaseId, ttl, nodeCount],
    };
  },

  /** release.lua, one batch: lease and record keys, lease id and channel per item. */
  release(
    items: readonly {
      readonly keys: Pick<CallKeys, 'lease' | 'record' | 'channel'>;
      readonly leaseId: string;
    }[],
  ): Layout {
    const keys: string[] = [];
    const args: string[] = [];
    for (const item of items) {
      keys.push(...scriptKeys.releaseItem(item.keys));
      args.push(item.leaseId, item.keys.channel);
    }
    return { keys, args };
  },

  inspect(state: NodeStateKeys, keys: Pick<CallKeys, 'lease' | 'record'>): Layout {
    return { keys: scriptKeys.inspect(state, keys), args: [] };
  },

  repairMarker(state: NodeStateKeys, operation: string, repairId: string, ttl: string): Layout {
    return {
      keys: scriptKeys['repair-marker'](state),
      args: [operation, repairId, ttl],
    };
  },

  repairRead(
    state: NodeStateKeys,
    prefix: string,
    cursor: string,
    count: string,
    incarnation: string,
    seal: string,
  ): Layout {
    return {
      keys: scriptKeys['repair-read'](state),
      args: [cursor, count, resourceKeyPattern(prefix), incarnation, seal],
    };
  },

  /**
   * repair-raise.lua: marker and floor, one token key per register, then record and lease key per lease (the same
   * key in the 'fenced' layout); the register count is the third argument. `registerCount` may be given wrong (a
   * caller bug the script refuses).
   */
  repairRaise(
    state: NodeStateKeys,
    prefix: string,
    repairId: string,
    floor: string,
    registers: readonly (readonly [string, string])[],
    leases: readonly (readonly [string, string, string])[],
    registerCount = String(registers.length),
  ): Layout {
    // KEYS from the coordinator's own builder; ARGV as strings, with a register count that may be given wrong.
    const { keys } = repairRaiseCall(
      state,
      prefix,
      repairId,
      0n,
      registers.map(([key]) => [key, 0n] as const),
      leases.map(([record]) => [record, '', 0] as const),
    );
    const args = [repairId, floor, registerCount];
    for (const [, value] of registers) args.push(value);
    for (const [, value, pttl] of leases) args.push(value, pttl);
    return { keys, args };
  },

  finishRepair(
    state: NodeStateKeys,
    repairId: string,
    incarnation: string,
    seal: string,
    settings: readonly (readonly [string, string])[],
    extra: readonly string[] = [],
  ): Layout {
    return {
      keys: scriptKeys['finish-repair'](state),
      args: [repairId, incarnation, seal, ...pairs(settings), ...extra],
    };
  },

  fold(
    state: NodeStateKeys,
    prefix: string,
    cursor: string,
    count: string,
    minIdle: string,
    interval: string,
  ): Layout {
    return {
      keys: scriptKeys.fold(state),
      args: [cursor, count, tokenKeyPattern(prefix), minIdle, interval],
    };
  },
} as const;
