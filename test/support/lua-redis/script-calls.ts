/**
 * The argument layouts of the coordinator's scripts, in one table: for each script (packages/coordinator/lua), how
 * to generate its KEYS and ARGV as the coordinator builds them (nodes/node-connection.ts, nodes/cluster/cluster-member.ts,
 * with the key builders of keys/key-layout.ts), plus the edge cases a caller bug or a corrupt node could bring (wrong
 * argument counts, non-integer and overflowing ttls, 19-digit tokens, non-tokens, keys of the wrong type). The
 * differential test (test/integration/lua-redis/differential.test.ts) draws every call from here, and draws the
 * initial keyspace from the same key universe, so a script's argument layout lives in this one place: when a
 * script gains an argument, its entry here changes and nothing else.
 *
 * Each entry also says how its reply may legitimately differ between two correct servers:
 * - `ttls`: which reply numbers are remaining ttls (a real server's clock moves during a test; they are compared
 *   within the elapsed time);
 * - `scanOrdered`: the reply lists keys in SCAN or slot order, which depends on the server's hash seed; those
 *   lists are compared as sorted groups.
 */
import fc from 'fast-check';
import {
  freshMarkKey,
  nodeStateKeys,
  resourceKeys,
  slotKeyTemplate,
  tokenKeyPattern,
  type KeyLayout,
  type ResourceKeys,
} from '../../../packages/coordinator/src/keys/key-layout.js';
import { keySlot, slotTag } from '../../../packages/coordinator/src/keys/slots.js';
import type { ScriptName } from '../../../packages/coordinator/src/scripts/script-results.js';
import { globMatch, type KeyDump, type StoredValue } from './keyspace.js';
import type { ScriptReply } from './lua-redis.js';
import { SCRIPT_LAYOUTS } from './script-layouts.js';

/** The key prefix of every generated key. */
export const PREFIX = 'fx';
/**
 * The node id (CLUSTER MYID) a stamped incarnation names as "this shard": the differential test sets the Cluster
 * master's emulated id to the real master's, and names it here through `useShardId`.
 */
let SHARD_ID = '0'.repeat(40);
export function useShardId(id: string): void {
  SHARD_ID = id;
}
const RESOURCES = ['r1', 'r2', 'r3'] as const;
const LAYOUTS: readonly KeyLayout[] = ['fenced', 'redlock'];
const LEASE_IDS = ['L1', 'L2', 'L3'] as const;
const NONCES = ['n1', 'n2'] as const;
const REPAIR_IDS = ['R1', 'R2'] as const;
const EPOCHS = ['', 'E1', 'E2'] as const;
/**
 * Slots of the per-slot node state the slot scripts use: each resource's own slot (both layouts keep a resource's
 * keys there: `fx:{r1}:token` and `fx:{<tag of r1's slot>}:r1:token`), and two slots that hold no resource.
 */
const SLOTS = [...new Set([0, 16383, ...RESOURCES.map((r) => keySlot(r))])];

export interface ScriptCall {
  readonly script: ScriptName;
  readonly keys: readonly string[];
  readonly args: readonly string[];
}

/** A reply whose remaining ttls are marked `{ ttl }`. */
export type MarkedReply = ScriptReply | { readonly ttl: number } | readonly MarkedReply[];

export interface ScriptDescriptor {
  /**
   * Also run against one master of a Redis Cluster member: the scripts whose work depends on cluster mode (CLUSTER
   * commands, undeclared keys across slots, declared keys sharing one slot).
   */
  readonly cluster?: boolean;
  /** KEYS and ARGV as the coordinator sends them, and edge cases around them. */
  readonly call: fc.Arbitrary<{ readonly keys: readonly string[]; readonly args: readonly string[] }>;
  /** Marks the remaining ttls in a reply (wrapped as `{ ttl }`), compared within the time a test took. */
  readonly ttls?: (reply: ScriptReply) => MarkedReply;
  /** Puts the parts of a reply that follow SCAN or slot order into a canonical order. */
  readonly scanOrdered?: (reply: ScriptReply) => ScriptReply;
  /**
   * Keys a script visits in SCAN order and writes one by one: when the script fails part-way (a Redis script is
   * not rolled back), which of them it had already written depends on the server's SCAN order, so after an error
   * reply these keys are not compared.
   */
  readonly visitedInScanOrder?: (key: string) => boolean;
}

// --- values ---

/**
 * Tokens: small ones, the 10/11-digit boundary where `greater` switches to two parts, 19-digit ones up to 2^63 - 1,
 * and neighbours that differ only past the 53-bit precision of a double.
 */
export const token = fc.oneof(
  fc.integer({ min: 1, max: 30 }).map(String),
  fc.constantFrom('9999999999', '10000000000', '10000000001', '1234567890', '12345678901'),
  fc.constantFrom(
    '9223372036854775807',
    '9223372036854775806',
    '9007199254740993',
    '9007199254740992',
    '1000000000000000000',
    '999999999999999999',
  ),
  fc.bigInt({ min: 1n, max: (1n << 63n) - 1n }).map(String),
);

/** Values that are not canonical tokens: what a corrupt register or floor may hold. */
const nonToken = fc.constantFrom('0', '01', '-5', 'abc', '', '12345678901234567890', '1.5', ' 7');

const tokenish = fc.oneof({ weight: 6, arbitrary: token }, { weight: 1, arbitrary: nonToken });

/** A lease record `<leaseId>|<token>`, or a bare lease id (the 'redlock' layout's lease key). */
const leaseValue = fc.oneof(
  fc.tuple(fc.constantFrom(...LEASE_IDS), token).map(([id, t]) => `${id}|${t}`),
  fc.constantFrom(...LEASE_IDS),
  fc.constantFrom('L1|', 'other-program-value'),
);

/**
 * Millisecond ttls as callers pass them. Valid ones are long (a real server's clock runs during a case, and a key
 * must not expire between the script and the comparison); the others are refused or act at once on both servers.
 */
const ttlArg = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 30_000, max: 10_000_000 }).map(String) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '0',
      '-1',
      'abc',
      '1.5',
      '9223372036854775807',
      '9000000000000000000',
      '99999999999999999999',
    ),
  },
);

/** Settings as recorded on a node: nodeCount and keyLayout are checked against every caller's (settings-check). */
const settingsFields = fc.array(
  fc.oneof(
    fc.tuple(fc.constant('maxTtlMs'), fc.constantFrom('60000', '5000000', 'abc')),
    fc.tuple(fc.constant('nodeCount'), fc.constantFrom('3', '5')),
    fc.tuple(fc.constant('keyLayout'), fc.constantFrom('fenced', 'redlock')),
    fc.tuple(fc.constant('clusterId'), fc.constant('c1')),
  ),
  { maxLength: 3 },
);

/** The number of nodes a caller counts its quorum over. */
const nodeCount = fc.constantFrom('3', '3', '5');

/** Roles of the keys in the universe: each role gets values of its kind (and sometimes the wrong type). */
type Role = 'incarnation' | 'floor' | 'seal' | 'settings' | 'repair' | 'fold' | 'fresh' | 'lease' | 'token';

function stringValue(role: Role): fc.Arbitrary<string> {
  switch (role) {
    case 'incarnation':
      // Stamped `<id>@<shard id>` on a Cluster slot (include/node-state.lua): by this shard, or by another.
      return fc
        .constantFrom('I1', 'I2', 'this shard', 'another shard')
        .map((v) =>
          v === 'this shard' ? `I1@${SHARD_ID}` : v === 'another shard' ? `I1@${'f'.repeat(40)}` : v,
        );
    case 'floor':
    case 'token':
      return tokenish;
    case 'seal':
      return fc.constantFrom(...EPOCHS);
    case 'repair':
      return fc.constantFrom(...REPAIR_IDS);
    case 'fold':
      return fc.constant('1');
    case 'fresh':
      return fc.constantFrom(...NONCES);
    case 'lease':
      return leaseValue;
    case 'settings':
      return fc.constant('not-a-hash');
  }
}

function valueFor(role: Role): fc.Arbitrary<StoredValue> {
  const string = stringValue(role).map((value): StoredValue => ({ type: 'string', value }));
  const hash = (fields: fc.Arbitrary<[string, string][]>): fc.Arbitrary<StoredValue> =>
    fields
      .filter((pairs) => pairs.length > 0)
      .map((pairs): StoredValue => ({ type: 'hash', value: new Map(pairs) }));
  if (role === 'settings') {
    return fc.oneof({ weight: 8, arbitrary: hash(settingsFields) }, { weight: 1, arbitrary: string });
  }
  // A key of the wrong type: every command on it but SET, DEL, EXISTS, PTTL and PEXPIRE answers WRONGTYPE.
  const wrongType = hash(fc.constant([['f', 'v']]));
  return fc.oneof({ weight: 15, arbitrary: string }, { weight: 1, arbitrary: wrongType });
}

/** Every key the generated calls use, with its role. */
function universe(): [string, Role][] {
  const keys: [string, Role][] = [];
  const state = (k: ReturnType<typeof nodeStateKeys>): void => {
    keys.push(
      [k.incarnation, 'incarnation'],
      [k.floor, 'floor'],
      [k.seal, 'seal'],
      [k.settings, 'settings'],
      [k.repair, 'repair'],
      [k.fold, 'fold'],
    );
    for (const nonce of NONCES) keys.push([freshMarkKey(k.fresh, nonce), 'fresh']);
  };
  state(nodeStateKeys(PREFIX));
  for (const slot of SLOTS) state(nodeStateKeys(PREFIX, slot));
  for (const resource of RESOURCES) {
    for (const layout of LAYOUTS) {
      const k = resourceKeys(PREFIX, resource, layout);
      keys.push([k.lease, 'lease'], [k.token, 'token']);
      if (k.record !== k.lease) keys.push([k.record, 'lease']);
    }
  }
  return [...new Map(keys)];
}

const UNIVERSE = universe();

/** A ttl for a key of the initial state: none, or long enough to outlive a case on a real server. */
const stateTtl = fc.option(fc.integer({ min: 60_000, max: 100_000_000 }), { nil: undefined, freq: 2 });

/**
 * An initial keyspace: some keys of the universe, each with a value of its role and an optional ttl. An incarnation
 * key is usually there (most calls are then decided by what follows it), a seal or repair marker usually not.
 */
export const initialState: fc.Arbitrary<KeyDump[]> = fc
  .tuple(
    ...UNIVERSE.map(([key, role]) =>
      fc.option(
        fc.record({ value: valueFor(role), pttlMs: stateTtl }).map((v): KeyDump => ({ key, ...v })),
        { nil: undefined, freq: role === 'incarnation' ? 6 : 2 },
      ),
    ),
  )
  .map((entries) => entries.filter((e): e is KeyDump => e !== undefined));

// --- calls ---

const resource = fc.tuple(fc.constantFrom(...RESOURCES), fc.constantFrom(...LAYOUTS));
/**
 * A resource as the lease scripts see it: its name, layout and whether the lease key is node-redlock's (the resource
 * name) beside a 'fenced' record (`holdRedlockKey`, keys/key-layout.ts). That key is the 'redlock' layout's lease key,
 * already in the universe.
 */
const leaseResource = fc.tuple(fc.constantFrom(...RESOURCES), fc.constantFrom(...LAYOUTS), fc.boolean());
function leaseKeys([name, layout, holdRedlockKey]: readonly [string, KeyLayout, boolean]): ResourceKeys {
  return resourceKeys(PREFIX, name, layout, holdRedlockKey);
}
const leaseId = fc.constantFrom(...LEASE_IDS);
/** The caller's seal epoch: usually the one an unsealed node has (''), sometimes another. */
const epoch = fc.constantFrom('', '', '', ...EPOCHS);
const state = nodeStateKeys(PREFIX);

/** Usually `valid`; sometimes one argument more or fewer (a caller bug, which the scripts refuse). */
function withMiscount(call: fc.Arbitrary<{ keys: string[]; args: string[] }>) {
  return fc.oneof(
    { weight: 12, arbitrary: call },
    {
      weight: 1,
      arbitrary: call.map(({ keys, args }) => ({ keys, args: [...args, 'extra'] })),
    },
    {
      weight: 1,
      arbitrary: call.map(({ keys, args }) => ({ keys, args: args.slice(0, -1) })),
    },
  );
}

const acquireItem = fc.record({ resource: leaseResource, leaseId, ttl: ttlArg, proposal: tokenish, epoch });

const pairs = (fields: [string, string][]): string[] => fields.flat();

/**
 * An error raised inside a loop over SCAN's keys comes from whichever bad key the server's order reached first, so
 * its line (`on @user_script:<line>.`) is not compared.
 */
function errorLineUnordered(reply: ScriptReply): ScriptReply {
  if (typeof reply === 'object' && reply !== null && !Array.isArray(reply) && 'error' in reply) {
    return { error: reply.error.replace(/on @user_script:\d+\.$/, 'on @user_script:<line>.') };
  }
  return reply;
}

/** The scripts' reply of a repair read: {1, incarnation, next, floor, settings, registers, leases}. */
function repairReadOrdered(reply: ScriptReply): ScriptReply {
  if (!Array.isArray(reply) || reply[0] !== 1 || reply.length !== 7) return errorLineUnordered(reply);
  const items = reply as readonly ScriptReply[];
  return [...items.slice(0, 5), sortGroups(items[5]!, 2), sortGroups(items[6]!, 3)];
}

function repairReadTtls(reply: ScriptReply): MarkedReply {
  if (!Array.isArray(reply) || reply[0] !== 1 || reply.length !== 7) return reply;
  const items = reply as readonly ScriptReply[];
  const leases = items[6] as readonly ScriptReply[];
  return [
    ...items.slice(0, 6),
    leases.map((v, i) => (i % 3 === 2 && typeof v === 'number' ? { ttl: v } : v)),
  ];
}

/** A flat list of groups of `size` (key first), sorted by key. */
function sortGroups(list: ScriptReply, size: number): ScriptReply {
  if (!Array.isArray(list)) return list;
  const items = list as readonly ScriptReply[];
  const groups: ScriptReply[][] = [];
  for (let i = 0; i < items.length; i += size) groups.push(items.slice(i, i + size));
  const keyOf = (group: ScriptReply[]): string => JSON.stringify(group[0]);
  return groups.sort((a, b) => keyOf(a).localeCompare(keyOf(b))).flat();
}

const slot = fc.constantFrom(...SLOTS);
const template = slotKeyTemplate(PREFIX);
const slotTags = fc
  .uniqueArray(slot, { minLength: 1, maxLength: 3 })
  .map((slots) => slots.map(slotTag).join(','));

/** The descriptor table: one entry per script of packages/coordinator/lua. */
export const SCRIPT_CALLS: { readonly [S in ScriptName]: ScriptDescriptor } = {
  acquire: {
    call: withMiscount(
      fc.tuple(fc.array(acquireItem, { minLength: 1, maxLength: 3 }), nodeCount).map(([items, nodes]) =>
        SCRIPT_LAYOUTS.acquire(
          state,
          items.map((item) => ({ ...item, keys: leaseKeys(item.resource) })),
          nodes,
        ),
      ),
    ),
    // {2, pttl, cur}: HELD carries the holder's remaining ttl.
    ttls: (reply): MarkedReply =>
      Array.isArray(reply)
        ? (reply as readonly ScriptReply[]).map((item): MarkedReply =>
            Array.isArray(item) && item[0] === 2 && typeof item[1] === 'number' && item[1] > 0
              ? [2, { ttl: item[1] }, ...(item as readonly ScriptReply[]).slice(2)]
              : item,
          )
        : reply,
  },
  promise: {
    call: withMiscount(
      fc
        .record({ resource: leaseResource, leaseId, proposal: tokenish, epoch, nodes: nodeCount })
        .map((c) =>
          SCRIPT_LAYOUTS.promise(
            state,
            leaseKeys(c.resource),
            c.leaseId,
            c.proposal,
            c.epoch,
            c.resource[1],
            c.nodes,
          ),
        ),
    ),
  },
  extend: {
    call: fc
      .record({ resource: leaseResource, leaseId, ttl: ttlArg, nodes: nodeCount })
      .map((c) => SCRIPT_LAYOUTS.extend(state, leaseKeys(c.resource), c.leaseId, c.ttl, c.nodes)),
  },
  release: {
    call: withMiscount(
      fc.array(fc.record({ resource: leaseResource, leaseId }), { minLength: 1, maxLength: 3 }).map((items) =>
        SCRIPT_LAYOUTS.release(
          items.map((item) => ({
            keys: leaseKeys(item.resource),
            leaseId: item.leaseId,
          })),
        ),
      ),
    ),
  },
  inspect: {
    call: leaseResource.map((r) => SCRIPT_LAYOUTS.inspect(state, leaseKeys(r))),
  },
  'repair-marker': {
    call: fc
      .record({
        operation: fc.constantFrom('claim', 'renew', 'renew', 'other'),
        id: fc.constantFrom(...REPAIR_IDS),
        ttl: ttlArg,
      })
      .map((c) => SCRIPT_LAYOUTS.repairMarker(state, c.operation, c.id, c.ttl)),
  },
  'repair-read': {
    call: fc
      .record({
        // A cursor past 2^32 starts a full iteration on both (Redis masks it with its table size).
        cursor: fc.constantFrom('0', '4294967296'),
        incarnation: fc.constantFrom('', 'I1', 'I2'),
        seal: fc.constantFrom('', 'E3'),
      })
      // COUNT above the keyspace's size: one call reads everything on both servers.
      .map((c) => SCRIPT_LAYOUTS.repairRead(state, PREFIX, c.cursor, '1000', c.incarnation, c.seal)),
    scanOrdered: repairReadOrdered,
    ttls: repairReadTtls,
  },
  'repair-read-slot': {
    call: fc.record({ slot, seal: fc.constantFrom('E3', 'E4') }).map((c) => {
      const k = nodeStateKeys(PREFIX, c.slot);
      return {
        keys: [k.incarnation, k.repair, k.floor, k.seal, k.settings],
        args: [String(c.slot), `${PREFIX}:{`, c.seal],
      };
    }),
    scanOrdered: repairReadOrdered,
    ttls: repairReadTtls,
    cluster: true,
  },
  'repair-raise': {
    call: fc
      .record({
        id: fc.constantFrom(...REPAIR_IDS),
        floor: fc.oneof(fc.constant('0'), token),
        registers: fc.uniqueArray(fc.tuple(resource, token), {
          maxLength: 3,
          selector: ([[r, layout]]) => `${r}/${layout}`,
        }),
        leases: fc.uniqueArray(
          fc.tuple(resource, leaseId, token, fc.integer({ min: 30_000, max: 1_000_000 })),
          {
            maxLength: 2,
            selector: ([[r, layout]]) => `${r}/${layout}`,
          },
        ),
        miscount: fc.constantFrom(0, 0, 0, 0, 0, 0, 1),
      })
      .map((c) =>
        SCRIPT_LAYOUTS.repairRaise(
          state,
          PREFIX,
          c.id,
          c.floor,
          c.registers.map(([[r, layout], value]) => [resourceKeys(PREFIX, r, layout).token, value] as const),
          c.leases.map(
            ([[r, layout], id, t, pttl]) =>
              [resourceKeys(PREFIX, r, layout).record, `${id}|${t}`, String(pttl)] as const,
          ),
          String(c.registers.length + c.miscount),
        ),
      ),
  },
  'finish-repair': {
    call: fc
      .record({
        id: fc.constantFrom(...REPAIR_IDS),
        incarnation: fc.constantFrom('I3', 'I4', 'I3@'),
        seal: fc.constantFrom('E5', 'E6'),
        settings: settingsFields,
        odd: fc.constantFrom(false, false, false, true),
      })
      .map((c) =>
        SCRIPT_LAYOUTS.finishRepair(
          state,
          c.id,
          c.incarnation,
          c.seal,
          c.settings,
          c.odd ? ['dangling'] : [],
        ),
      ),
  },
  fold: {
    call: fc
      .record({
        cursor: fc.constantFrom('0', '4294967296'),
        minIdle: fc.constantFrom('0', '100000'),
        interval: fc.oneof(fc.integer({ min: 30_000, max: 600_000 }).map(String), fc.constantFrom('0', 'x')),
      })
      .map((c) => SCRIPT_LAYOUTS.fold(state, PREFIX, c.cursor, '1000', c.minIdle, c.interval)),
    scanOrdered: errorLineUnordered,
    visitedInScanOrder: (key) => globMatch(tokenKeyPattern(PREFIX), key),
  },
  'fold-slot': {
    // The registers of one resource (both layouts keep them in the resource's slot) and that slot's state keys, as
    // the Cluster fold groups them; sometimes a register of another resource's slot (CROSSSLOT on a Cluster member).
    call: fc
      .record({
        resource: fc.constantFrom(...RESOURCES),
        layouts: fc.uniqueArray(fc.constantFrom(...LAYOUTS), { minLength: 1, maxLength: 2 }),
        stranger: fc.option(resource, { nil: undefined, freq: 6 }),
        minIdle: fc.constantFrom('0', '100000'),
      })
      .map((c) => {
        const k = nodeStateKeys(PREFIX, keySlot(c.resource));
        const registers = c.layouts.map((layout) => resourceKeys(PREFIX, c.resource, layout).token);
        if (c.stranger !== undefined) registers.push(resourceKeys(PREFIX, ...c.stranger).token);
        return { keys: [k.incarnation, k.floor, ...registers], args: [c.minIdle] };
      }),
    cluster: true,
  },
  'fresh-init': {
    call: fc
      .record({
        step: fc.constantFrom('mark', 'check', 'init'),
        nonce: fc.constantFrom(...NONCES),
        ttl: ttlArg,
        incarnation: fc.constantFrom('I5', 'I6', 'I5@'),
        settings: settingsFields,
      })
      .map((c) => ({
        keys: [
          state.incarnation,
          freshMarkKey(state.fresh, c.nonce),
          state.settings,
          state.floor,
          state.seal,
        ],
        args: [
          c.step,
          c.nonce,
          c.step === 'mark' ? c.ttl : c.step === 'init' ? c.incarnation : '',
          ...(c.step === 'init' ? pairs(c.settings) : []),
        ],
      })),
  },
  'fresh-init-shard': {
    call: fc
      .record({
        step: fc.constantFrom('mark', 'check', 'init'),
        nonce: fc.constantFrom(...NONCES),
        ttl: ttlArg,
        incarnation: fc.constantFrom('I5', 'I6', 'I5@'),
        settings: settingsFields,
        tags: slotTags,
      })
      .map((c) => {
        const fields = c.step === 'init' ? pairs(c.settings) : [];
        return {
          keys: [],
          args: [
            c.step,
            c.nonce,
            c.step === 'mark' ? c.ttl : c.step === 'init' ? c.incarnation : '',
            template.head,
            template.tails.incarnation,
            freshMarkKey(template.tails.fresh, c.nonce),
            template.tails.settings,
            template.tails.floor,
            template.tails.seal,
            String(fields.length),
            ...fields,
            c.tags,
          ],
        };
      }),
    cluster: true,
  },
  'probe-shard': {
    call: slotTags.map((tags) => ({
      keys: [],
      args: [
        template.head,
        template.tails.incarnation,
        template.tails.seal,
        tags,
        template.tails.floor,
        template.tails.settings,
      ],
    })),
    cluster: true,
  },
  settings: {
    call: fc
      .record({
        operation: fc.constantFrom('get', 'record', 'set', 'bogus'),
        fields: settingsFields,
        odd: fc.constantFrom(false, false, false, true),
      })
      .map((c) => ({
        keys: [state.incarnation, state.settings],
        args: [c.operation, ...pairs(c.fields), ...(c.odd ? ['dangling'] : [])],
      })),
  },
};
