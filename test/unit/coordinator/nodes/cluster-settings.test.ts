// The cluster's settings recorded on the nodes (nodes/cluster-settings.ts, DESIGN §3): a process whose node count,
// maxTtlMs or key layout disagrees with the recorded ones must refuse to start (or adopt, where allowed), because
// two processes counting different majorities, or keeping two token registers per resource, can hand out
// repeated or falling tokens (G2). The nodes' own check of every call is tested on real nodes in
// test/integration/coordinator/nodes/key-layout.test.ts and test/fault/settings-disagree.test.ts.
import { describe, expect, it } from 'vitest';
import {
  ClusterSettingsError,
  parseRecorded,
  reconcileSettings,
  settingModes,
  settingsRecord,
} from '../../../../packages/coordinator/src/nodes/cluster-settings.js';

const node = (index: number): string => `node ${index}`;
const configured = { maxTtlMs: 60_000, nodeCount: 3, keyLayout: 'fenced' } as const;

/** The error reconcileSettings throws, for its fields. */
function refusal(run: () => unknown): ClusterSettingsError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ClusterSettingsError);
    return error as ClusterSettingsError;
  }
  throw new Error('expected a ClusterSettingsError');
}

describe('the settings record', () => {
  it('reads back what it writes', () => {
    expect(parseRecorded(settingsRecord(configured))).toEqual(configured);
  });

  it('reads a field that is not a positive integer, or an unknown layout, as absent', () => {
    expect(parseRecorded({ maxTtlMs: '0', nodeCount: '-3', keyLayout: 'other' })).toEqual({});
    expect(parseRecorded({ maxTtlMs: '1e5', nodeCount: '03' })).toEqual({});
    expect(parseRecorded({ maxTtlMs: '12345678901234567' })).toEqual({});
    expect(parseRecorded({ keyLayout: 'redlock' })).toEqual({ keyLayout: 'redlock' });
  });
});

describe('reconcileSettings', () => {
  it('runs with its own settings on nodes that record nothing (unreachable, empty or never recorded)', () => {
    expect(reconcileSettings(configured, [undefined, {}, undefined], 'require-match', node)).toEqual({
      maxTtlMs: 60_000,
      keyLayout: 'fenced',
    });
  });

  it('refuses another node count in every mode: there is nothing to adopt', () => {
    for (const mode of ['require-match', 'adopt'] as const) {
      const error = refusal(() => reconcileSettings(configured, [undefined, { nodeCount: 5 }], mode, node));
      expect(error.setting).toBe('nodeCount');
      expect(error.message).toMatch(/configured with 3 nodes, but node 1 records a cluster of 5 nodes/);
    }
  });

  it("refuses another recorded maxTtlMs under 'require-match', naming both values, and adopts it under 'adopt'", () => {
    const recorded = [{ maxTtlMs: 30_000 }, { maxTtlMs: 30_000 }, undefined];
    const error = refusal(() => reconcileSettings(configured, recorded, 'require-match', node));
    expect(error.setting).toBe('maxTtlMs');
    expect(error.message).toMatch(
      /configured with maxTtlMs 60000, but the cluster's maxTtlMs recorded on the nodes is 30000/,
    );
    expect(reconcileSettings(configured, recorded, 'adopt', node).maxTtlMs).toBe(30_000);
  });

  it('refuses nodes that disagree among themselves, in every mode, naming which node holds which value', () => {
    const ttls = [{ maxTtlMs: 30_000 }, { maxTtlMs: 60_000 }];
    const ttl = refusal(() => reconcileSettings(configured, ttls, 'adopt', node));
    expect(ttl.setting).toBe('maxTtlMs');
    expect(ttl.message).toMatch(/disagree on the cluster's maxTtlMs \(30000 on node 0; 60000 on node 1\)/);
    const layouts = [{ keyLayout: 'fenced' as const }, undefined, { keyLayout: 'redlock' as const }];
    const layout = refusal(() => reconcileSettings(configured, layouts, 'adopt', node));
    expect(layout.setting).toBe('keyLayout');
    expect(layout.message).toMatch(
      /disagree on the cluster's keyLayout \('fenced' on node 0; 'redlock' on node 2\)/,
    );
  });

  it("refuses another recorded key layout under 'require-match', and runs with it under 'adopt'", () => {
    const recorded = [{ keyLayout: 'redlock' as const }, undefined, undefined];
    const error = refusal(() => reconcileSettings(configured, recorded, 'require-match', node));
    expect(error.setting).toBe('keyLayout');
    expect(error.message).toMatch(
      /configured with keyLayout 'fenced', but the cluster's keyLayout recorded on the nodes is 'redlock'/,
    );
    expect(reconcileSettings(configured, recorded, 'adopt', node).keyLayout).toBe('redlock');
  });

  it("takes a process without a layout for the 'fenced' layout", () => {
    const { keyLayout: _omitted, ...withoutLayout } = configured;
    expect(reconcileSettings(withoutLayout, [], 'require-match', node).keyLayout).toBe('fenced');
    const recorded = [{ keyLayout: 'redlock' as const }];
    expect(() => reconcileSettings(withoutLayout, recorded, 'require-match', node)).toThrow(
      ClusterSettingsError,
    );
  });

  it('reconciles each setting in its own mode', () => {
    const recorded = [{ maxTtlMs: 30_000, keyLayout: 'redlock' as const }];
    const modes = { maxTtlMs: 'adopt', keyLayout: 'require-match' } as const;
    expect(refusal(() => reconcileSettings(configured, recorded, modes, node)).setting).toBe('keyLayout');
    const swapped = { maxTtlMs: 'require-match', keyLayout: 'adopt' } as const;
    expect(refusal(() => reconcileSettings(configured, recorded, swapped, node)).setting).toBe('maxTtlMs');
  });
});

describe('settingModes', () => {
  it('adopts a setting the caller did not set, and follows clusterSettings for one it set', () => {
    expect(
      settingModes({ clusterSettings: 'require-match', explicit: { maxTtlMs: false, keyLayout: true } }),
    ).toEqual({ maxTtlMs: 'adopt', keyLayout: 'require-match' });
    expect(
      settingModes({ clusterSettings: 'require-match', explicit: { maxTtlMs: true, keyLayout: false } }),
    ).toEqual({ maxTtlMs: 'require-match', keyLayout: 'adopt' });
    expect(settingModes({ clusterSettings: 'adopt', explicit: { maxTtlMs: true, keyLayout: true } })).toEqual(
      {
        maxTtlMs: 'adopt',
        keyLayout: 'adopt',
      },
    );
  });
});
