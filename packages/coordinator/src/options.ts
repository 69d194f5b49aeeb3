import type { Cluster, Redis } from 'ioredis';
import {
  assertBoolean,
  assertInteger,
  assertMatches,
  assertNumber,
  InvalidRequestError,
  mergeOptions,
  type NumberRange,
} from '@fenced/shared';
import { MAX_TIMER_MS } from './quorum/timer-limit.js';
import { KEY_LAYOUTS, type KeyLayout } from './keys/key-layout.js';
import { driftMs } from './quorum/validity.js';
import type { SigningKey } from './signing/lease-signer.js';

/**
 * What a process does when its maxTtlMs differs from the cluster's recorded one (nodes/cluster-settings.ts): refuse
 * to start, or run with the recorded value.
 */
export type ClusterSettingsMode = 'require-match' | 'adopt';

/**
 * The plain configuration form of a Redis Cluster member in `nodes` (DESIGN §3c; docs/cluster.md): seed URLs of (some
 * of) its masters. The coordinator creates the ioredis `Cluster` client and closes it.
 */
export interface ClusterMemberConfig {
  readonly cluster: readonly string[];
}

/** Options of {@link Coordinator}. Times are milliseconds. */
export interface CoordinatorOptions {
  /**
   * The independent Redis masters: ioredis clients or `redis://` URLs, at least one, no duplicates.
   * Quorum is `floor(N/2) + 1`. Clients passed in stay yours (never closed here) and must not use ioredis'
   * own `keyPrefix`; clients made from URLs are created and closed by the coordinator. A client is recognised by
   * what it can do: ioredis 4.28+ or 5, from any copy of the module (cast it if its type is another copy's).
   *
   * A member may also be a whole Redis Cluster (DESIGN §3c; docs/cluster.md): `{ cluster: ['redis://host:7000', …] }`
   * (seed URLs of its masters; the coordinator creates and closes the client) or an ioredis `Cluster` you made (stays
   * yours; give it `retryDelayOnFailover: 0` so that a script is never sent twice). Standalone and cluster members
   * may be mixed; the quorum counts members.
   */
  nodes: Array<string | Redis | Cluster | ClusterMemberConfig>;
  /**
   * Namespace of every key: `${keyPrefix}:{<resource>}:lease`, `…:token`, `…:released`, `${keyPrefix}:node:*`.
   * @defaultValue `'fenced'`
   */
  keyPrefix?: string;
  /**
   * Where each resource's keys live (keys/key-layout.ts). `'fenced'`: `${keyPrefix}:{<resource>}:lease` holding
   * `<leaseId>|<token>`. `'redlock'`: node-redlock's lease keys: the lease key is the resource name itself holding
   * exactly the lease id (what a redlock lock's `value` is), with the token register and the lease's record beside it
   * in the same cluster slot under `${keyPrefix}:{<slot tag>}:<resource>:…`; resource names starting with
   * `${keyPrefix}:` are then refused. One of the cluster's settings recorded on the nodes: a process whose layout
   * differs from the recorded one refuses to start (with `clusterSettings: 'adopt'` it runs with the recorded one).
   * A node initialized before the layout was recorded uses `'fenced'`.
   * @defaultValue `'fenced'`
   */
  keyLayout?: KeyLayout;
  /**
   * Also hold node-redlock's key for each resource while the cluster's layout is `'fenced'`: the resource name itself,
   * holding the lease id (`SET <resource> <leaseId> NX PX`, deleted and extended only while it holds it), in the same
   * script as the lease's `'fenced'` record and token register. An acquire is then granted only where both are free,
   * so node-redlock workers and this process exclude each other on nodes of either layout (the `'redlock'` layout's
   * lease key is that key already), while the token register stays the cluster's one (keys/key-layout.ts). Not one of
   * the recorded settings: it adds an exclusion, not a register. Resource names starting with `${keyPrefix}:` are
   * then refused, and so, when a node is a Redis Cluster, are names whose own hash tag or `{`, `}`, `%` put that key
   * in another slot than the record. The redlock drop-in (`@fenced/redlock`) runs with it on.
   * @defaultValue `false`
   */
  holdRedlockKey?: boolean;
  /**
   * Clock drift allowance, as a fraction of the ttl, subtracted from every validity (DESIGN §2.3). Larger is
   * safer against fast server clocks but shortens every lease.
   * @defaultValue `0.01`
   */
  driftFactor?: number;
  /**
   * Upper bound of one call to one node. A slower node counts as a vote against, so a hung node never stalls an
   * acquire; too small a bound turns ordinary latency spikes into failed votes — with fsync-always AOF, nodes that
   * take the same writes reach their AOF rewrite together and stall for hundreds of milliseconds at once. A
   * decision never waits for it once a majority has answered, and an acquire never waits longer than its ttl
   * leaves usable, so a generous bound only costs time when a majority is slow or gone.
   * @defaultValue `1000`
   */
  nodeTimeoutMs?: number;
  /**
   * Base delay before retrying an acquire when no pub/sub wake-up and no holder ttl is known. Waiters are woken
   * by the release message first, so this is only the fallback.
   * @defaultValue `100`
   */
  retryDelayMs?: number;
  /**
   * Random extra delay (0 ..= this) added to every retry so competing waiters do not retry in lockstep.
   * @defaultValue `50`
   */
  retryJitterMs?: number;
  /**
   * A fresh lease whose validity is at most this is released and the attempt counts as failed: no caller gets
   * a lease too short to use.
   * @defaultValue `10`
   */
  minValidityMs?: number;
  /**
   * Largest ttl accepted. It is one of the cluster's settings recorded on the nodes (nodes/cluster-settings.ts): a
   * fresh cluster records it, the nodes refuse an acquire or extend above the recorded value, and `ready()` refuses
   * to start when this differs from the recorded value (see `clusterSettings`; change the cluster's with
   * `fenced-coordinator settings set max-ttl`). No token guarantee depends on it: a node that restarted empty is
   * repaired without any wait (the sealed repair), and no guard promise on the lease's length (G1–G5): a longer
   * maximum only lets a holder that dies keep its resources unavailable for longer. Up to `Number.MAX_SAFE_INTEGER`.
   * @defaultValue `3_600_000` (one hour)
   */
  maxTtlMs?: number;
  /**
   * What the coordinator does when a `maxTtlMs` or `keyLayout` you set differs from the cluster's recorded on the
   * nodes: `'require-match'` refuses with a ClusterSettingsError naming both values; `'adopt'` runs with the recorded
   * value instead (and `tokenRetentionMs` at least that). A setting you did not set always adopts the recorded one, so
   * every product on its defaults works over the same nodes. Checked at `ready()` and again whenever a node refuses a
   * call for its settings (the nodes check them on every call that records a promise or a lease). A node count that
   * differs from the recorded one is refused either way: processes that count different nodes break the token
   * guarantees.
   * @defaultValue `'require-match'`
   */
  clusterSettings?: ClusterSettingsMode;
  /**
   * How long a resource's token register stays on a node after its last use (no live lease, not read or written)
   * before it is folded into the node's floor (DESIGN §3). Folding keeps tokens unique and increasing — an absent
   * register reads as the floor, which is at least every value folded into it — and bounds each node's memory by
   * the resources used within this period. Shorter frees memory sooner; a resource locked again after it was
   * folded may need a second token round when its guess is below the floor. At least `maxTtlMs` (or a timer's
   * range, about 24.8 days, when `maxTtlMs` is longer: a register with a live lease is never folded anyway).
   * @defaultValue `2 × maxTtlMs`
   */
  tokenRetentionMs?: number;
  /**
   * Let nodes that fail the start-up checks (appendonly yes, appendfsync always, maxmemory-policy noeviction,
   * role master) vote anyway. Development only: such nodes can lose or evict token registers, which breaks G2.
   * @defaultValue `false`
   */
  unsafeAllowUnsafeNodes?: boolean;
  /**
   * Sign every lease (DESIGN §4b): `lease.proof` then carries an Ed25519 signature over the key id, resource,
   * token and lease id digest, and a guarded store with the matching `verifyKeys` refuses any token it did not
   * sign. The private key stays in this process; stores hold only public keys. Costs one signature per grant.
   * @defaultValue `undefined` (leases carry no proof)
   */
  signingKey?: SigningKey;
}

/**
 * The resolved options (every option but `nodes`, defaults filled in); the signing key is not among them (it stays
 * inside the coordinator's signer). `explicit` tells which of the cluster's settings the caller set: one it did not
 * set adopts the value recorded on the nodes (defaults agree between products, DESIGN §3); one it set and that
 * differs is refused unless `clusterSettings` is `'adopt'`.
 */
export type CoordinatorSettings = Required<Omit<CoordinatorOptions, 'nodes' | 'signingKey'>> & {
  readonly explicit: { readonly maxTtlMs: boolean; readonly keyLayout: boolean };
};

/** Defaults of every {@link CoordinatorOptions} option but `nodes` (none) and `tokenRetentionMs` (twice `maxTtlMs`). */
export const DEFAULT_COORDINATOR_OPTIONS = Object.freeze({
  keyPrefix: 'fenced',
  keyLayout: 'fenced',
  holdRedlockKey: false,
  driftFactor: 0.01,
  nodeTimeoutMs: 1_000,
  retryDelayMs: 100,
  retryJitterMs: 50,
  minValidityMs: 10,
  maxTtlMs: 3_600_000,
  clusterSettings: 'require-match',
  unsafeAllowUnsafeNodes: false,
} satisfies Omit<CoordinatorSettings, 'tokenRetentionMs' | 'explicit'>);

/** Largest `waitMs`, `tokenRetentionMs` and delay accepted: what a Node.js timer can hold (about 24.8 days). */
export { MAX_TIMER_MS };

// No braces (they would change the hash tag), no whitespace or control characters.
const KEY_PREFIX = /^[^\s{}\u0000-\u001f\u007f-\u009f]{1,64}$/u; // eslint-disable-line no-control-regex

/**
 * Merges options over {@link DEFAULT_COORDINATOR_OPTIONS}, validates them and returns a frozen copy.
 * @throws InvalidRequestError naming the option, what is allowed and the value given.
 */
export function resolveOptions(options: CoordinatorOptions): Readonly<CoordinatorSettings> {
  const merged = mergeOptions('coordinator', DEFAULT_COORDINATOR_OPTIONS, options, [
    'nodes',
    'signingKey',
    'tokenRetentionMs',
  ]);
  // Above a timer's range too (redlock users lock for years): the coordinator's own timers re-arm in steps.
  const maxTtlMs = integer('maxTtlMs', merged.maxTtlMs, { min: 1, max: Number.MAX_SAFE_INTEGER });
  const settings: CoordinatorSettings = {
    keyPrefix: assertMatches(
      'keyPrefix',
      merged.keyPrefix,
      KEY_PREFIX,
      '1 to 64 characters without braces, whitespace or control characters',
    ),
    keyLayout: keyLayoutOf(merged.keyLayout),
    holdRedlockKey: assertBoolean('holdRedlockKey', merged.holdRedlockKey),
    driftFactor: assertNumber('driftFactor', merged.driftFactor, { min: 0, max: 0.5 }),
    nodeTimeoutMs: integer('nodeTimeoutMs', merged.nodeTimeoutMs, { min: 1, max: 60_000 }),
    retryDelayMs: integer('retryDelayMs', merged.retryDelayMs, { min: 0, max: MAX_TIMER_MS }),
    retryJitterMs: integer('retryJitterMs', merged.retryJitterMs, { min: 0, max: MAX_TIMER_MS }),
    minValidityMs: integer('minValidityMs', merged.minValidityMs, { min: 0, max: MAX_TIMER_MS }),
    maxTtlMs,
    tokenRetentionMs: integer(
      'tokenRetentionMs',
      merged.tokenRetentionMs ?? Math.min(2 * maxTtlMs, MAX_TIMER_MS),
      { min: Math.min(maxTtlMs, MAX_TIMER_MS), max: MAX_TIMER_MS },
    ),
    clusterSettings: clusterSettingsMode(merged.clusterSettings),
    unsafeAllowUnsafeNodes: assertBoolean('unsafeAllowUnsafeNodes', merged.unsafeAllowUnsafeNodes),
    explicit: Object.freeze({
      maxTtlMs: options.maxTtlMs !== undefined,
      keyLayout: options.keyLayout !== undefined,
    }),
  };
  if (settings.maxTtlMs < smallestUsableTtlMs(settings)) {
    throw new InvalidRequestError(
      `maxTtlMs must be at least ${smallestUsableTtlMs(settings)}: a smaller ttl leaves no validity above minValidityMs after drift, got ${settings.maxTtlMs}`,
    );
  }
  return Object.freeze(settings);
}

function keyLayoutOf(value: unknown): KeyLayout {
  if (KEY_LAYOUTS.includes(value as KeyLayout)) return value as KeyLayout;
  throw new InvalidRequestError(
    `keyLayout must be 'fenced' or 'redlock', got ${JSON.stringify(value) ?? String(value)} (${typeof value})`,
  );
}

function clusterSettingsMode(value: unknown): ClusterSettingsMode {
  if (value === 'require-match' || value === 'adopt') return value;
  throw new InvalidRequestError(
    `clusterSettings must be 'require-match' or 'adopt', got ${JSON.stringify(value) ?? String(value)} (${typeof value})`,
  );
}

/**
 * The smallest ttl that can ever yield a lease: even with zero elapsed time, `ttl - drift` must exceed
 * `minValidityMs`. A smaller ttl is refused up front instead of failing every attempt.
 */
export function smallestUsableTtlMs(
  settings: Pick<CoordinatorSettings, 'driftFactor' | 'minValidityMs'>,
): number {
  // ttl - round(ttl × f) - 2 is non-decreasing in ttl for f <= 0.5: start below the boundary and step up.
  let ttl = Math.max(1, Math.floor((settings.minValidityMs + 2) / (1 - settings.driftFactor)));
  while (ttl - driftMs(ttl, settings.driftFactor) <= settings.minValidityMs) ttl++;
  return ttl;
}

/**
 * @returns `value` when it is an integer within the range.
 * @throws InvalidRequestError `<name> must be an integer from <min> to <max>, got <value (type)>`.
 */
export function integer(name: string, value: unknown, range: NumberRange): number {
  return assertInteger(name, value, range);
}
