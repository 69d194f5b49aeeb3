import { keySlot, slotTag } from './slots.js';

/**
 * Where a resource's keys live (the coordinator's `keyLayout` option; one of the cluster's settings recorded on the
 * nodes, nodes/cluster-settings.ts):
 * - `'fenced'` (the default): every key under the prefix and the resource's hash tag, `<prefix>:{<resource>}:lease`
 *   holding `<leaseId>|<token>`, `…:token`, `…:released`.
 * - `'redlock'`: node-redlock's lease keys. The lease key is the resource name itself (e.g. `{redlock}x`) and holds
 *   exactly the lease id (a redlock lock's `value`), so code that reads or plants redlock's keys keeps working. The
 *   lease's record (`<leaseId>|<token>`, what extend, inspect, repair and fold read), the token register and the
 *   channel sit beside it in the same Redis Cluster slot: `<prefix>:{<slotTag(keySlot(resource))>}:<resource>:…`
 *   (the resource encoded as in `encodeResourceTag`: `%`, `{` and `}` escaped), so one script still touches one slot (DESIGN §3c).
 *
 * Why the layout is recorded on the nodes: two processes with different layouts would keep two token registers for
 * the same resource, and their tokens would then repeat or go backwards (G2); a process whose layout differs from
 * the recorded one refuses to start (nodes/cluster-settings.ts).
 *
 * node-redlock's key in the `'fenced'` layout (`holdRedlockKey`, what the redlock drop-in runs with): the lease key is
 * the resource name itself, holding exactly the lease id as node-redlock's does, while the record, the token register
 * and the channel stay the `'fenced'` layout's own. The layout is the register's, so the nodes' layout check still
 * sees `'fenced'` (`keyLayoutOf`) and every product keeps one register per resource; an acquire is granted only
 * where both the record (what a Coordinator holds) and the resource name (what node-redlock holds) are free or ours.
 * The two share a Redis Cluster slot unless the name holds `{`, `}` or `%` (`redlockKeySlotSplit`).
 */
export type KeyLayout = 'fenced' | 'redlock';

export const KEY_LAYOUTS: readonly KeyLayout[] = ['fenced', 'redlock'];

/** The Redis names of one resource. All share one cluster slot. */
export interface ResourceKeys {
  /**
   * The key whose presence excludes other holders (`'redlock'` layout, or `holdRedlockKey`: the resource name, holding
   * the lease id).
   */
  readonly lease: string;
  /**
   * The key holding `<leaseId>|<token>` with the lease's ttl: the lease key itself in the `'fenced'` layout, a key
   * beside it in the `'redlock'` layout (and with `holdRedlockKey`). A held record excludes other holders too.
   */
  readonly record: string;
  readonly token: string;
  readonly channel: string;
}

/**
 * Encodes a resource name for use inside a hash tag: `%`, `{` and `}` become `%25`, `%7B` and `%7D`.
 *
 * Why: Redis takes the hash tag from the first `{` to the first `}` after it, so a raw `}` in a name would cut
 * the tag short (and `{}` would make it empty). Escaping `%` as well keeps the encoding injective: two different
 * resources never map to the same keys. Names without these characters are stored unchanged, so keys stay
 * readable in `redis-cli`.
 */
export function encodeResourceTag(resource: string): string {
  return resource.replace(/[%{}]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
}

/** The inverse of {@link encodeResourceTag}. */
export function decodeResourceTag(encoded: string): string {
  return encoded.replace(/%(25|7B|7D)/g, (_m, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

/**
 * A resource's keys in `layout`. With `holdRedlockKey` in the `'fenced'` layout the lease key is the resource name
 * itself (node-redlock's key) and the record, register and channel are the `'fenced'` layout's (see above); in the
 * `'redlock'` layout the lease key is the resource name anyway.
 */
export function resourceKeys(
  prefix: string,
  resource: string,
  layout: KeyLayout = 'fenced',
  holdRedlockKey = false,
): ResourceKeys {
  if (layout === 'redlock') {
    const base = `${prefix}:{${slotTag(keySlot(resource))}}:${encodeResourceTag(resource)}`;
    return { lease: resource, record: `${base}:lease`, token: `${base}:token`, channel: `${base}:released` };
  }
  const base = `${prefix}:{${encodeResourceTag(resource)}}`;
  return {
    lease: holdRedlockKey ? resource : `${base}:lease`,
    record: `${base}:lease`,
    token: `${base}:token`,
    channel: `${base}:released`,
  };
}

/**
 * The layout a resource's keys are in, told by where its record (and so its token register) lives: `'fenced'` when
 * the lease key is the record, or the record ends with its hash tag (`<prefix>:{<resource>}:lease`, also when the
 * lease key is node-redlock's, `holdRedlockKey`); else `'redlock'`, whose record ends with the encoded resource name,
 * never with `}`. include/lease-value.lua's `key_layout` is the same rule; the scripts check it against the layout
 * recorded on the node.
 */
export function keyLayoutOf(keys: { readonly record: string; readonly lease?: string }): KeyLayout {
  return keys.lease === undefined || keys.lease === keys.record || keys.record.endsWith('}:lease')
    ? 'fenced'
    : 'redlock';
}

/**
 * Whether holding node-redlock's key (the resource name) beside a `'fenced'` record would put the two in different
 * Redis Cluster slots: the name holds a hash tag of its own or a character the record's tag escapes (`{`, `}`, `%`).
 * A script touches one slot (DESIGN §3c), so a Coordinator with a Cluster member refuses such a name with an
 * InvalidRequestError (lease/validate-request.ts); standalone nodes have no slots and take it.
 */
export function redlockKeySlotSplit(
  prefix: string,
  resource: string,
  layout: KeyLayout,
  holdRedlockKey: boolean,
): boolean {
  if (layout !== 'fenced' || !holdRedlockKey) return false;
  return keySlot(resource) !== keySlot(resourceKeys(prefix, resource, layout).record);
}

/**
 * The lease key that goes with a lease record found by a SCAN (a repair copies both). The record's shape tells the
 * layout: `<prefix>:{<resource>}:lease` is a `'fenced'` lease key (the record itself); `<prefix>:{<tag>}:<resource>:lease`
 * is a `'redlock'` record, whose lease key is the resource name (encoded names hold no braces, so the two shapes
 * never meet).
 */
export function leaseKeyOfRecord(prefix: string, record: string): string {
  const head = `${prefix}:{`;
  const close = record.indexOf('}:', head.length);
  if (!record.startsWith(head) || close === -1 || !record.endsWith(':lease')) return record;
  const rest = record.slice(close + 2, record.length - ':lease'.length);
  return rest === '' ? record : decodeResourceTag(rest);
}

/**
 * Whether a resource name may be used in a layout: in the `'redlock'` layout (and with `holdRedlockKey`) the lease
 * key is the name itself, so a name inside the coordinator's own namespace (`<prefix>:…`) could be one of its
 * registers or node keys.
 */
export function resourceNameClash(
  prefix: string,
  resource: string,
  layout: KeyLayout,
  holdRedlockKey = false,
): boolean {
  return (layout === 'redlock' || holdRedlockKey) && resource.startsWith(`${prefix}:`);
}

/**
 * The keys of one node's own state (DESIGN §3): everything a vote, a repair or an initialization depends on besides
 * the resource's keys. Every node-state key is built here and nowhere else, so that a node that is a Redis Cluster
 * (DESIGN §3c) can keep this state per slot by giving the builder a slot's hash tag: the scripts take these keys as
 * KEYS and never build one themselves.
 */
export interface NodeStateKeys {
  /** Absent: the node restarted empty and must not vote. */
  readonly incarnation: string;
  /**
   * What an absent token register reads as. Registers of idle resources are folded into it, so memory tracks
   * active resources while every answer stays at least every value the node ever promised.
   */
  readonly floor: string;
  /**
   * The seal epoch: a random id every promise-recording script compares with the one its caller carries; a repair's
   * first read of the node changes it (nodes/repair.ts). Absent reads as the empty epoch.
   */
  readonly seal: string;
  /** The cluster's settings recorded on the node (a hash: maxTtlMs, nodeCount, clusterId; nodes/cluster-settings.ts). */
  readonly settings: string;
  /** A repair in progress; the repair only completes if its marker survived. */
  readonly repair: string;
  /**
   * Stem of the marks of fresh-cluster initializations in progress (nodes/fresh-cluster.ts): each initialization's
   * mark is a key of its own, `<fresh>:<nonce>` ({@link freshMarkKey}).
   */
  readonly fresh: string;
  /** Lock of a fold pass: one process folds a node's idle registers per interval. */
  readonly fold: string;
}

/**
 * The node-state keys of every slot of a Redis Cluster member as text around the slot's tag: key `name` of slot `s` is
 * `head + slotTag(s) + tails[name]`. A script over many slots (fresh-init-shard.lua, probe-shard.lua) is sent the
 * template and the slots' tags, not 16 384 × k whole keys. Cut out of {@link nodeStateKeys}'s own keys, so that
 * builder stays the one place key names are made (a unit test rebuilds every slot's keys from the template).
 */
export interface SlotKeyTemplate {
  readonly head: string;
  readonly tails: { readonly [K in keyof NodeStateKeys]: string };
}

export function slotKeyTemplate(prefix: string): SlotKeyTemplate {
  const tag = `{${slotTag(0)}}`;
  const keys = nodeStateKeys(prefix, 0);
  const cut = (key: string): [string, string] => {
    const at = key.lastIndexOf(tag);
    return [key.slice(0, at + 1), key.slice(at + tag.length - 1)];
  };
  const head = cut(keys.incarnation)[0];
  const tails = Object.fromEntries(
    (Object.keys(keys) as (keyof NodeStateKeys)[]).map((name) => {
      const [h, tail] = cut(keys[name]);
      if (h !== head) throw new Error(`node-state key ${name} does not start like the others: ${keys[name]}`);
      return [name, tail];
    }),
  ) as { [K in keyof NodeStateKeys]: string };
  return { head, tails };
}

/**
 * The node-state keys under `prefix`: one set per standalone node, or, with `slot`, the set of one slot of a Redis
 * Cluster member (DESIGN §3c), `${prefix}:node:{<slotTag(slot)>}:…`, all stored in that slot, so that a script on a
 * resource of that slot reads its node state in the same atomic call.
 */
export function nodeStateKeys(prefix: string, slot?: number): NodeStateKeys {
  const base = slot === undefined ? `${prefix}:node` : `${prefix}:node:{${slotTag(slot)}}`;
  return Object.freeze({
    incarnation: `${base}:incarnation`,
    floor: `${base}:floor`,
    seal: `${base}:seal`,
    settings: `${base}:settings`,
    repair: `${base}:repair`,
    fresh: `${base}:fresh`,
    fold: `${base}:fold`,
  });
}

/** Per-node key whose absence means the node restarted empty and must not vote (DESIGN §3). */
export function incarnationKey(prefix: string): string {
  return nodeStateKeys(prefix).incarnation;
}

/** Per-node floor (see {@link NodeStateKeys.floor}). */
export function floorKey(prefix: string): string {
  return nodeStateKeys(prefix).floor;
}

/** Per-node seal epoch (see {@link NodeStateKeys.seal}). */
export function sealKey(prefix: string): string {
  return nodeStateKeys(prefix).seal;
}

/** Per-node record of the cluster's settings (see {@link NodeStateKeys.settings}). */
export function settingsKey(prefix: string): string {
  return nodeStateKeys(prefix).settings;
}

/** Per-node lock of a fold pass. */
export function foldLockKey(prefix: string): string {
  return nodeStateKeys(prefix).fold;
}

/** Per-node marker of a repair in progress. */
export function repairMarkerKey(prefix: string): string {
  return nodeStateKeys(prefix).repair;
}

/**
 * The mark of the fresh-cluster initialization `nonce` (fresh-init.lua): `stem` is {@link NodeStateKeys.fresh} (a whole
 * key), or its tail in a {@link SlotKeyTemplate}; the nonce comes after the slot's tag, so the mark stays in that slot.
 */
export function freshMarkKey(stem: string, nonce: string): string {
  return `${stem}:${nonce}`;
}

/**
 * SCAN pattern of every token register under the prefix (glob characters in the prefix escaped), in either layout:
 * `<prefix>:{<resource>}:token` and `<prefix>:{<slot tag>}:<resource>:token`.
 */
export function tokenKeyPattern(prefix: string): string {
  return `${globEscape(prefix)}:{*:token`;
}

/** SCAN pattern of every resource key (lease or token register) under the prefix; node keys excluded. */
export function resourceKeyPattern(prefix: string): string {
  return `${globEscape(prefix)}:{*`;
}

/** SCAN pattern of every slot's floor of a Redis Cluster member (`${prefix}:node:{<tag>}:floor`). */
export function slotFloorKeyPattern(prefix: string): string {
  return `${globEscape(prefix)}:node:{*}:floor`;
}

function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
