/** The Redis names of one resource. All three share the hash tag, so they share a cluster slot. */
export interface ResourceKeys {
  readonly lease: string;
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

export function resourceKeys(prefix: string, resource: string): ResourceKeys {
  const base = `${prefix}:{${encodeResourceTag(resource)}}`;
  return { lease: `${base}:lease`, token: `${base}:token`, channel: `${base}:released` };
}

/** Per-node key whose absence means the node restarted empty and must not vote (DESIGN §3). */
export function incarnationKey(prefix: string): string {
  return `${prefix}:node:incarnation`;
}

/**
 * Per-node floor (DESIGN §3): what an absent token register reads as. Registers of idle resources are folded into
 * it, so memory tracks active resources while every answer stays at least every value the node ever promised.
 */
export function floorKey(prefix: string): string {
  return `${prefix}:node:floor`;
}

/** Per-node lock of a fold pass: one process folds a node's idle registers per interval. */
export function foldLockKey(prefix: string): string {
  return `${prefix}:node:fold`;
}

/** Per-node marker of a repair in progress; the repair only completes if its marker survived. */
export function repairMarkerKey(prefix: string): string {
  return `${prefix}:node:repair`;
}

/**
 * Per-node mark of a fresh-cluster initialization in progress (nodes/fresh-cluster.ts): a node is initialized
 * fresh only while it still holds the mark set before every other node was checked.
 */
export function freshMarkKey(prefix: string): string {
  return `${prefix}:node:fresh`;
}

/** SCAN pattern of every token register under the prefix (glob characters in the prefix escaped). */
export function tokenKeyPattern(prefix: string): string {
  return `${globEscape(prefix)}:{*}:token`;
}

/** SCAN pattern of every resource key (lease or token register) under the prefix; node keys excluded. */
export function resourceKeyPattern(prefix: string): string {
  return `${globEscape(prefix)}:{*`;
}

function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
