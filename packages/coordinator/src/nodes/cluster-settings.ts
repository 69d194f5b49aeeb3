/**
 * The cluster's settings, recorded on the nodes (DESIGN §3, "the cluster's settings live on the nodes").
 *
 * Which settings, and why these:
 * - `nodeCount`: the quorum is `floor(N/2) + 1` of the nodes a process is configured with. Two processes that count
 *   different N over shared nodes can form majorities that do not intersect, and then two grants can share a token
 *   or go backwards (G2). A process whose node count differs from the recorded one never starts; there is nothing to
 *   adopt.
 * - `maxTtlMs`: the longest lease. No token argument rests on it any more (the sealed repair needs no wait,
 *   nodes/repair.ts), but it is a bound every process must agree on: the nodes themselves refuse an acquire or an
 *   extend above it (acquire.lua, extend.lua), so a process configured higher would hand its callers refusals, and
 *   one configured lower would refuse leases the cluster grants. A process configured otherwise refuses to start,
 *   naming both values, unless `clusterSettings: 'adopt'`.
 *
 * - `keyLayout` (keys/key-layout.ts): where a resource's token register lives. Two processes with different layouts keep
 *   two registers for the same resource, so their tokens could repeat or go backwards (G2). A node initialized before
 *   the layout was recorded holds the `'fenced'` layout (the only one there was), and is recorded so. A process
 *   configured otherwise refuses to start, unless `clusterSettings: 'adopt'` (it then runs with the recorded layout).
 *
 * Not checked: *which* N nodes a process lists. Two processes that list the same count over different members (one
 * node swapped for another) could still form majorities that do not intersect; a node listed by one process only
 * starts empty and is repaired into the cluster, but nothing tells the processes apart. Node lists are the
 * operator's to keep equal (the service reads them from one FENCED_REDIS_URLS).
 *
 * Settings that need not agree, and why: `driftFactor` and `minValidityMs` shape only the validity a process
 * computes for its own leases on its own clock (no token depends on them); `nodeTimeoutMs` bounds only how long a
 * process waits (a late reply is refused by a seal or counted by nobody); `tokenRetentionMs` decides only which
 * idle registers are folded, and folding keeps every answer at least every value promised (fold.lua); `keyPrefix`
 * names the cluster itself (another prefix is another cluster).
 *
 * Recorded at fresh initialization (fresh-init.lua 'init'), copied by a repair from its sources (finish-repair.lua),
 * changed by the operator (`fenced-coordinator settings set`), read by every process at start-up
 * ({@link reconcileSettings}), and **checked by the nodes on every call that records a promise or a lease**
 * (include/node-state.lua): acquire.lua, promise.lua and extend.lua carry the caller's node count and the layout of
 * the keys they touch, and refuse (SETTINGS_MISMATCH) when either differs from the recorded value, as they refuse a
 * ttl above the recorded maxTtlMs. A start-up check alone can miss: a process that starts while the nodes are
 * unreachable reads nothing and would keep its own layout for good (F28: a second token register beside the first,
 * a lower token, a stale commit). On a refusal the process reads the settings again before its next round
 * (NodeSet.refreshSettings): it adopts the recorded value of a setting its caller did not set, and refuses with a
 * ClusterSettingsError one its caller set otherwise (unless `clusterSettings: 'adopt'`). A cluster initialized before settings were recorded gets them from the first process
 * that starts on it (settings.lua 'record': each field only where absent).
 */
import { ErrorCode, FencedError } from '@fenced/shared';

import type { ClusterSettingsMode } from '../options.js';
import { KEY_LAYOUTS, type KeyLayout } from '../keys/key-layout.js';

/** The settings as recorded on one node; a field that is absent or unreadable is undefined. */
export interface RecordedSettings {
  readonly maxTtlMs?: number;
  readonly nodeCount?: number;
  readonly keyLayout?: KeyLayout;
}

/** The fields written on the nodes for a process's settings. */
export function settingsRecord(settings: {
  readonly maxTtlMs: number;
  readonly nodeCount: number;
  readonly keyLayout: KeyLayout;
}): Record<string, string> {
  return {
    maxTtlMs: String(settings.maxTtlMs),
    nodeCount: String(settings.nodeCount),
    keyLayout: settings.keyLayout,
  };
}

/** Parses one node's settings hash; values that are not positive integers read as absent. */
export function parseRecorded(fields: Readonly<Record<string, string>>): RecordedSettings {
  const positive = (text: string | undefined): number | undefined =>
    text !== undefined && /^[1-9][0-9]{0,15}$/.test(text) ? Number(text) : undefined;
  const maxTtlMs = positive(fields.maxTtlMs);
  const nodeCount = positive(fields.nodeCount);
  const keyLayout = KEY_LAYOUTS.find((layout) => layout === fields.keyLayout);
  return {
    ...(maxTtlMs === undefined ? {} : { maxTtlMs }),
    ...(nodeCount === undefined ? {} : { nodeCount }),
    ...(keyLayout === undefined ? {} : { keyLayout }),
  };
}

/**
 * This process's configuration disagrees with the settings recorded on the nodes (or the nodes disagree among
 * themselves): it refuses to start. The message names both values and what to do.
 */
export class ClusterSettingsError extends FencedError {
  override readonly name = 'ClusterSettingsError';
  constructor(
    message: string,
    /** The setting that disagrees. */
    readonly setting: 'maxTtlMs' | 'nodeCount' | 'keyLayout',
  ) {
    super(ErrorCode.INVALID_REQUEST, message);
  }
}

/**
 * Compares this process's configuration with what the nodes recorded (`recorded[i]` for node i; undefined for a
 * node that is unreachable, empty or has no record) and returns the maxTtlMs and key layout to run with.
 * @throws ClusterSettingsError when the node count differs, the nodes disagree on maxTtlMs or the key layout, or
 *   either differs from this process's and `mode` is `'require-match'`
 */
export function reconcileSettings(
  configured: { readonly maxTtlMs: number; readonly nodeCount: number; readonly keyLayout?: KeyLayout },
  recorded: readonly (RecordedSettings | undefined)[],
  mode:
    ClusterSettingsMode | { readonly maxTtlMs: ClusterSettingsMode; readonly keyLayout: ClusterSettingsMode },
  describeNode: (index: number) => string,
): { readonly maxTtlMs: number; readonly keyLayout: KeyLayout } {
  const modes = typeof mode === 'string' ? { maxTtlMs: mode, keyLayout: mode } : mode;
  const keyLayout = reconcileLayout(
    configured.keyLayout ?? 'fenced',
    recorded,
    modes.keyLayout,
    describeNode,
  );
  return { ...reconcileMaxTtl(configured, recorded, modes.maxTtlMs, describeNode), keyLayout };
}

/**
 * The mode each setting is reconciled in: a setting the caller did not set adopts the recorded value (DESIGN §3,
 * "defaults must agree"); one it set follows `clusterSettings`.
 */
export function settingModes(settings: {
  readonly clusterSettings: ClusterSettingsMode;
  readonly explicit: { readonly maxTtlMs: boolean; readonly keyLayout: boolean };
}): { readonly maxTtlMs: ClusterSettingsMode; readonly keyLayout: ClusterSettingsMode } {
  return {
    maxTtlMs: settings.explicit.maxTtlMs ? settings.clusterSettings : 'adopt',
    keyLayout: settings.explicit.keyLayout ? settings.clusterSettings : 'adopt',
  };
}

function reconcileLayout(
  configured: KeyLayout,
  recorded: readonly (RecordedSettings | undefined)[],
  mode: ClusterSettingsMode,
  describeNode: (index: number) => string,
): KeyLayout {
  const values = new Map<KeyLayout, number[]>();
  recorded.forEach((record, index) => {
    if (record?.keyLayout === undefined) return;
    values.set(record.keyLayout, [...(values.get(record.keyLayout) ?? []), index]);
  });
  if (values.size === 0) return configured;
  if (values.size > 1) {
    const detail = [...values]
      .map(([value, nodes]) => `'${value}' on ${nodes.map(describeNode).join(', ')}`)
      .join('; ');
    throw new ClusterSettingsError(
      `the nodes disagree on the cluster's keyLayout (${detail}): their token registers for one resource would ` +
        `differ, so tokens could repeat or go backwards. The layout is set when a cluster is initialized and cannot ` +
        `be changed in place`,
      'keyLayout',
    );
  }
  const [layout] = [...values.keys()] as [KeyLayout];
  if (layout === configured || mode === 'adopt') return layout;
  throw new ClusterSettingsError(
    `this process is configured with keyLayout '${configured}', but the cluster's keyLayout recorded on the nodes ` +
      `is '${layout}': two layouts keep two token registers per resource, so tokens could repeat or go backwards. ` +
      `Configure keyLayout '${layout}', or start with clusterSettings 'adopt' to run with the recorded layout`,
    'keyLayout',
  );
}

function reconcileMaxTtl(
  configured: { readonly maxTtlMs: number; readonly nodeCount: number },
  recorded: readonly (RecordedSettings | undefined)[],
  mode: ClusterSettingsMode,
  describeNode: (index: number) => string,
): { readonly maxTtlMs: number } {
  for (const [index, record] of recorded.entries()) {
    if (record?.nodeCount !== undefined && record.nodeCount !== configured.nodeCount) {
      throw new ClusterSettingsError(
        `this process is configured with ${configured.nodeCount} nodes, but ${describeNode(index)} records a ` +
          `cluster of ${record.nodeCount} nodes: processes that count different nodes form majorities that do ` +
          `not intersect, so fencing tokens could repeat or go backwards. Configure every process with the same ` +
          `${record.nodeCount} nodes (FENCED_REDIS_URLS / nodes)`,
        'nodeCount',
      );
    }
  }
  const values = new Map<number, number[]>();
  recorded.forEach((record, index) => {
    if (record?.maxTtlMs === undefined) return;
    values.set(record.maxTtlMs, [...(values.get(record.maxTtlMs) ?? []), index]);
  });
  if (values.size === 0) return { maxTtlMs: configured.maxTtlMs };
  if (values.size > 1) {
    const detail = [...values]
      .map(([value, nodes]) => `${value} on ${nodes.map(describeNode).join(', ')}`)
      .join('; ');
    throw new ClusterSettingsError(
      `the nodes disagree on the cluster's maxTtlMs (${detail}): a settings change reached only some of them. ` +
        `Run \`fenced-coordinator settings set max-ttl <ms>\` again with every node reachable`,
      'maxTtlMs',
    );
  }
  const [recordedMax] = [...values.keys()] as [number];
  if (recordedMax === configured.maxTtlMs || mode === 'adopt') return { maxTtlMs: recordedMax };
  throw new ClusterSettingsError(
    `this process is configured with maxTtlMs ${configured.maxTtlMs}, but the cluster's maxTtlMs recorded on ` +
      `the nodes is ${recordedMax}. Configure ${recordedMax} (FENCED_MAX_TTL_MS / maxTtlMs), change the ` +
      `cluster's with \`fenced-coordinator settings set max-ttl ${configured.maxTtlMs}\`, or start with ` +
      `clusterSettings 'adopt' (FENCED_CLUSTER_SETTINGS=adopt) to run with the recorded value`,
    'maxTtlMs',
  );
}
