// Restart repair (nodes/repair.ts) on virtual time against in-memory nodes with the scripts' semantics, on fixed
// schedules: the order of its steps (claim, sit out, only then read) and which sources it may copy from. The
// protocol simulation (protocol-simulation.test.ts) shows what goes wrong without them; these tests pin the rules
// themselves, one schedule each.
//
// These tests kill mutants 08 and 09 of test/mutants/ (docs/mutation-testing.md).
import { describe, expect, it } from 'vitest';
import { repairNode, type RepairContext } from '../../../../packages/coordinator/src/nodes/repair.js';
import { resourceKeys } from '../../../../packages/coordinator/src/redlock/keys.js';
import { SIM_REPAIR_TIMING } from '../../../support/protocol-sim/scenario.js';
import { scriptedRig, type ScriptedRig } from '../../../support/protocol-sim/scripted-rig.js';

const KEYS = resourceKeys('fenced', 'repaired');
const MAX_TTL_MS = 1_000;
/** maxTtlMs + driftMs(maxTtlMs, 0.01), written out. */
const SIT_OUT_MS = 1_012;

function repairContext(rig: ScriptedRig): RepairContext {
  let ids = 0;
  return {
    nodes: rig.nodes,
    quorum: rig.context.quorum,
    settings: rig.settings,
    clock: rig.world.clock(),
    callTimeoutMs: 100,
    closing: new AbortController().signal,
    status: () => undefined,
    reportError: () => undefined,
    newId: () => `id-${ids++}`,
  };
}

/** A rig of `nodes` whose messages take 1 ms (or are lost when `lost` says so); `sent` records every request. */
function rigWith(nodes: number, lost?: (message: string) => boolean) {
  const sent: { atMs: number; message: string }[] = [];
  let now = (): number => Number.NaN;
  const rig = scriptedRig({
    nodes,
    delaysMs: [1],
    schedule: (message) => {
      if (message.startsWith('request ')) sent.push({ atMs: now(), message: message.slice(8) });
      return lost?.(message) ? 'lost' : 1;
    },
    options: { maxTtlMs: MAX_TTL_MS },
  });
  now = () => rig.world.time;
  return { rig, sent };
}

describe('restart repair: the order of its steps', () => {
  it('sits out maxTtlMs + drift after claiming the node before it reads any source or raises anything', async () => {
    const { rig, sent } = rigWith(3);
    for (const model of rig.models) model.state.registers.set(KEYS.token, 5n);
    rig.models[0]!.loseState();

    await rig.runAt(10, () => repairNode(repairContext(rig), rig.nodes[0]!, SIM_REPAIR_TIMING));

    const claim = sent.find((s) => /->n0 repair-marker claim/.test(s.message))!;
    const reads = sent.filter((s) => /repair-read/.test(s.message));
    const raises = sent.filter((s) => /repair-raise/.test(s.message));
    expect(reads.length).toBeGreaterThanOrEqual(2);
    expect(raises.length).toBeGreaterThanOrEqual(1);
    // The claim is the observation "this node is empty"; nothing is read before a whole max ttl has passed since.
    for (const step of [...reads, ...raises])
      expect(step.atMs - claim.atMs).toBeGreaterThanOrEqual(SIT_OUT_MS);
    // And it did repair: the node votes again, with the register it had promised.
    expect(rig.models[0]!.state.incarnation).not.toBeNull();
    expect(rig.models[0]!.state.registers.get(KEYS.token)).toBe(5n);
  });
});

describe('restart repair: verified sources only', () => {
  /**
   * F22 in five nodes: node 0 is repaired; node 1 lost its state too; node 4 — the only one that holds the last
   * grant's token 9 besides the two empty nodes — is unreachable. Nodes 2 and 3 hold 5. Three sources are needed.
   */
  function twoEmptyOneUnreachable() {
    const { rig, sent } = rigWith(5, (m) => /^request c->n4 /.test(m));
    for (const model of rig.models) model.state.registers.set(KEYS.token, model.index === 4 ? 9n : 5n);
    rig.models[0]!.loseState();
    rig.models[1]!.loseState();
    return { rig, sent };
  }

  it('refuses to count a source that is itself empty, and leaves the node abstaining', async () => {
    const { rig } = twoEmptyOneUnreachable();

    const error: unknown = await rig
      .runAt(0, () => repairNode(repairContext(rig), rig.nodes[0]!, SIM_REPAIR_TIMING))
      .then(
        () => null,
        (e: unknown) => e,
      );

    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/only 2 of the 3 source nodes needed could be read/);
    expect((error as Error).message).toMatch(/node 1 \(sim-1\): it has no incarnation key/);
    expect(rig.models[0]!.state.incarnation).toBeNull();
    // Nothing below the last grant's token was written as if it were the truth.
    expect(rig.models[0]!.state.registers.get(KEYS.token)).toBeUndefined();
  });

  it('refuses to count a source that is under repair itself', async () => {
    const { rig } = twoEmptyOneUnreachable();
    // Node 1 answers UNDER_REPAIR (a marker is present), not NOT_INITIALIZED.
    rig.models[1]!.state.incarnation = 'incarnation-0';
    rig.models[1]!.state.marker = { id: 'another-repair', expiresAt: Number.MAX_SAFE_INTEGER };

    const error: unknown = await rig
      .runAt(0, () => repairNode(repairContext(rig), rig.nodes[0]!, SIM_REPAIR_TIMING))
      .then(
        () => null,
        (e: unknown) => e,
      );

    expect((error as Error).message).toMatch(/node 1 \(sim-1\): it is under repair itself/);
    expect(rig.models[0]!.state.incarnation).toBeNull();
  });

  it('repairs from the three valid sources once the unreachable one answers again', async () => {
    const { rig } = rigWith(5);
    for (const model of rig.models) model.state.registers.set(KEYS.token, model.index === 4 ? 9n : 5n);
    rig.models[0]!.loseState();
    rig.models[1]!.loseState();

    await rig.runAt(0, () => repairNode(repairContext(rig), rig.nodes[0]!, SIM_REPAIR_TIMING));

    expect(rig.models[0]!.state.incarnation).not.toBeNull();
    expect(rig.models[0]!.state.registers.get(KEYS.token)).toBe(9n);
  });
});
