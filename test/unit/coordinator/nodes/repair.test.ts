// Restart repair (nodes/repair.ts) on virtual time against in-memory nodes with the scripts' semantics, on fixed
// schedules: the sealed read (claim, then seal and read N − quorum + 1 sources at once, no wait), the leases it
// copies, and which sources it may copy from. The protocol simulation (protocol-simulation.test.ts) shows what goes
// wrong without them; these tests pin the rules themselves, one schedule each. The last block drives the one repair
// driver (`repairScope`) through a scope of its own, as the Cluster member's slot repair does: the steps, their
// order and the cuts hold whatever scope supplies the calls.
//
// These tests kill mutants 09 and the seal rows of test/mutants/ (docs/mutation-testing.md).
import { describe, expect, it } from 'vitest';
import {
  repairNode,
  repairScope,
  RepairRestart,
  TooFewSources,
  type RepairContext,
  type RepairNode,
  type RepairScope,
  type RepairSource,
  type RepairTiming,
} from '../../../../packages/coordinator/src/nodes/repair.js';
import type { RepairReadReply } from '../../../../packages/coordinator/src/scripts/script-results.js';
import { resourceKeys } from '../../../../packages/coordinator/src/keys/key-layout.js';
import { SIM_REPAIR_TIMING } from '../../../fixtures/protocol-sim/scenario.js';
import { scriptedRig, type ScriptedRig } from '../../../fixtures/protocol-sim/scripted-rig.js';

const KEYS = resourceKeys('fenced', 'repaired');
const MAX_TTL_MS = 1_000;

function repairContext(rig: ScriptedRig): RepairContext {
  let ids = 0;
  return {
    nodes: rig.nodes,
    quorum: rig.context.quorum,
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

describe('restart repair: the sealed read', () => {
  it('seals and reads N − quorum + 1 sources right after the claim, with no wait, and votes again', async () => {
    const { rig, sent } = rigWith(5);
    for (const model of rig.models) model.setRegister(KEYS.token, 5n);
    rig.models[0]!.loseState();

    const { settledMs } = await rig.runAt(10, () =>
      repairNode(repairContext(rig), rig.nodes[0]!, SIM_REPAIR_TIMING),
    );

    const claim = sent.find((s) => /->n0 repair-marker claim/.test(s.message))!;
    const seals = sent.filter((s) => /repair-read \(seal\)/.test(s.message));
    // Exactly 3 of the 4 other nodes are sealed (5 − 3 + 1), each by the first batch of its read.
    expect(seals.map((s) => s.message.match(/->n(\d)/)![1]).sort()).toEqual(['1', '2', '3']);
    expect(new Set(rig.models.slice(1, 4).map((m) => m.seal())).size).toBe(3);
    expect(rig.models[4]!.seal()).toBe('');
    // No wait: the seals go out one message after the claim's reply, and the repair ends a few messages later.
    for (const seal of seals) expect(seal.atMs - claim.atMs).toBe(2);
    expect(settledMs - 10).toBeLessThan(MAX_TTL_MS);
    expect(rig.models[0]!.incarnation()).not.toBeNull();
    expect(rig.models[0]!.register(KEYS.token)).toBe(5n);
    // The repaired node has a seal epoch of its own: a call sent to it before it lost its state is refused.
    expect(rig.models[0]!.seal()).not.toBe('');
  });

  it('refuses a promise still in flight to a sealed source: the round carried the old epoch', async () => {
    const { rig } = rigWith(3);
    rig.models[0]!.loseState();
    await rig.runAt(0, () => repairNode(repairContext(rig), rig.nodes[0]!, SIM_REPAIR_TIMING));
    // The caller `c` saw the epoch '' before the repair; its call now lands on a sealed node.
    const late = rig.models[1]!.promise(KEYS, 'late-lease', 99n, '', 3);
    expect(late).toEqual({ kind: 'sealed', epoch: rig.models[1]!.seal() });
    expect(rig.models[1]!.register(KEYS.token)).toBeUndefined();
    const acquire = rig.models[2]!.acquire(KEYS, 'late-lease', 500, 99n, '', 3);
    expect(acquire.kind).toBe('sealed');
    expect(rig.models[2]!.lease(KEYS)).toBeUndefined();
  });

  it('copies live leases with their remaining ttl, and the settings, from the sources', async () => {
    const { rig } = rigWith(3);
    for (const model of rig.models.slice(1)) {
      model.setLease(KEYS, 'holder', 7n, 800);
      model.setRegister(KEYS.token, 7n);
      model.setSettings({ maxTtlMs: '1000', nodeCount: '3' });
    }
    rig.models[0]!.loseState();

    await rig.runAt(100, () => repairNode(repairContext(rig), rig.nodes[0]!, SIM_REPAIR_TIMING));

    const copied = rig.models[0]!.lease(KEYS)!;
    expect(copied.holder).toBe('holder');
    expect(copied.token).toBe(7n);
    // Read at 102 ms with 698 ms left, raised a few ms later: the copy ends no earlier than the sources' key.
    expect(copied.expiresAt).toBeGreaterThanOrEqual(800);
    expect(rig.models[0]!.settings()).toEqual({ maxTtlMs: '1000', nodeCount: '3' });
  });
});

describe('restart repair: the copy streams while the sources are read', () => {
  it('answers the final floor for a register copied before a later batch raised the floor', async () => {
    // Node 0 lost its state. Node 1 holds 9 for `repaired` (the last grant's token, also on node 0 before it lost
    // it), node 2 an older 5. Node 1's register is folded into its floor between two batches of its read, so the
    // scan misses it and only the floor of its last batch carries 9 — after node 2's 5 was already raised on node 0.
    const other = resourceKeys('fenced', 'aaa').token; // scanned before KEYS.token
    let folded = false;
    const { rig } = rigWith(3, (message) => {
      if (!folded && /^request c->n1 repair-read$/.test(message)) {
        folded = true; // fold.lua on node 1: floor = max(floor, register), the registers deleted
        expect(rig.models[1]!.foldAll()).toBe(2);
      }
      return false;
    });
    rig.models[1]!.setRegister(other, 3n);
    rig.models[1]!.setRegister(KEYS.token, 9n);
    rig.models[2]!.setRegister(KEYS.token, 5n);
    rig.models[0]!.loseState();

    await rig.runAt(0, () => repairNode(repairContext(rig), rig.nodes[0]!, SIM_REPAIR_TIMING));

    expect(folded).toBe(true);
    const repaired = rig.models[0]!;
    expect(repaired.incarnation()).not.toBeNull();
    expect(repaired.floor()).toBe(9n);
    // A register copied before the floor rose may stay below it (5): the node never answers below its floor.
    const register = repaired.register(KEYS.token);
    expect(register === undefined || register <= 9n).toBe(true);
    expect(repaired.answer(KEYS.token)).toBe(9n);
  });
});

describe('restart repair: verified sources only', () => {
  /**
   * F22 in five nodes: node 0 is repaired; node 1 lost its state too; node 4 — the only one that holds the last
   * grant's token 9 besides the two empty nodes — is unreachable. Nodes 2 and 3 hold 5. Three sources are needed.
   */
  function twoEmptyOneUnreachable() {
    const { rig, sent } = rigWith(5, (m) => /^request c->n4 /.test(m));
    for (const model of rig.models) model.setRegister(KEYS.token, model.index === 4 ? 9n : 5n);
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
    expect(rig.models[0]!.incarnation()).toBeNull();
    // The copy streams, so batches read before the failure may be raised already: only values a readable source
    // held, and the node does not vote on them (no incarnation key) — nothing was taken as the truth.
    expect([undefined, 5n]).toContain(rig.models[0]!.register(KEYS.token));
  });

  it('refuses to count a source that is under repair itself', async () => {
    const { rig } = twoEmptyOneUnreachable();
    // Node 1 answers UNDER_REPAIR (a marker is present), not NOT_INITIALIZED.
    rig.models[1]!.initialize();
    rig.models[1]!.setMarker('another-repair', 1_000_000_000);

    const error: unknown = await rig
      .runAt(0, () => repairNode(repairContext(rig), rig.nodes[0]!, SIM_REPAIR_TIMING))
      .then(
        () => null,
        (e: unknown) => e,
      );

    expect((error as Error).message).toMatch(/node 1 \(sim-1\): it is under repair itself/);
    expect(rig.models[0]!.incarnation()).toBeNull();
  });

  it('repairs from the three valid sources once the unreachable one answers again', async () => {
    const { rig } = rigWith(5);
    for (const model of rig.models) model.setRegister(KEYS.token, model.index === 4 ? 9n : 5n);
    rig.models[0]!.loseState();
    rig.models[1]!.loseState();

    await rig.runAt(0, () => repairNode(repairContext(rig), rig.nodes[0]!, SIM_REPAIR_TIMING));

    expect(rig.models[0]!.incarnation()).not.toBeNull();
    expect(rig.models[0]!.register(KEYS.token)).toBe(9n);
  });
});

/**
 * A scope in memory, with the scripts' rules that the argument rests on: the marker (claim refused while the scope
 * holds its incarnation), raises that are a max and need the marker, a finish that needs it, and answers that are
 * never below the floor. `log` records every call in order.
 */
class MemoryScope {
  readonly log: string[] = [];
  floor = 0n;
  readonly registers = new Map<string, bigint>();
  incarnation: string | null = null;
  marker: string | null = null;
  /** Another process's marker: claims answer `busy` while it is set. */
  foreign = false;
  /** Raises refused as `no-repair-marker` (the marker lost) or thrown (the node failed) from this one on. */
  loseMarkerAtRaise = Infinity;
  failAtRaise = Infinity;
  private raises = 0;

  answer(key: string): bigint {
    const register = this.registers.get(key);
    return register !== undefined && register > this.floor ? register : this.floor;
  }

  scope(sources: readonly RepairSource[]): RepairScope {
    return {
      target: { index: 0, address: 'memory-0' },
      sources,
      repairMarker: (_t, operation, repairId) => {
        this.log.push(`marker ${operation}`);
        if (this.incarnation !== null) return Promise.resolve({ kind: 'initialized' });
        if (this.foreign) return Promise.resolve({ kind: 'busy' });
        if (operation === 'renew' && this.marker !== repairId)
          return Promise.resolve({ kind: 'no-repair-marker' });
        this.marker = repairId;
        return Promise.resolve({ kind: 'claimed' });
      },
      repairRaise: (_t, repairId, floor, registers) => {
        const n = this.raises++;
        this.log.push(`raise ${floor} ${registers.map(([k, v]) => `${k}=${v}`).join(',')}`);
        if (n >= this.failAtRaise) return Promise.reject(new Error('the node went away'));
        if (n >= this.loseMarkerAtRaise || this.marker !== repairId) {
          this.marker = null;
          return Promise.resolve({ kind: 'no-repair-marker' });
        }
        if (floor > this.floor) this.floor = floor;
        for (const [key, value] of registers) {
          if (value > (this.registers.get(key) ?? 0n)) this.registers.set(key, value);
        }
        return Promise.resolve({ kind: 'raised' });
      },
      finishRepair: (_t, repairId) => {
        this.log.push('finish');
        if (this.marker !== repairId) return Promise.resolve({ kind: 'no-repair-marker' });
        this.incarnation = `incarnation-of-${repairId}`;
        this.marker = null;
        return Promise.resolve({ kind: 'finished' });
      },
      status: (text) => {
        if (text === undefined) this.log.push('status stopped');
      },
    };
  }
}

/** A source in memory: its registers read `count` at a time, its seal epoch replaced by a sealing first batch. */
function memorySource(
  index: number,
  registers: Record<string, bigint>,
  log: string[],
  refuse?: Exclude<RepairReadReply['kind'], 'read'>,
): RepairSource & { seal: string; floor: bigint; fold(): void } {
  const held = new Map(Object.entries(registers));
  const source = {
    index,
    address: `memory-${index}`,
    seal: '',
    floor: 0n,
    fold(): void {
      for (const value of held.values()) if (value > source.floor) source.floor = value;
      held.clear();
    },
    repairRead: (_t: number, cursor: string, count: number, _inc: string, seal: string) => {
      log.push(`read ${index} ${cursor}${seal !== '' ? ' (seal)' : ''}`);
      if (refuse !== undefined) return Promise.resolve({ kind: refuse });
      if (seal !== '') source.seal = seal;
      const keys = [...held.keys()].sort();
      const from = Number(cursor);
      const next = from + count >= keys.length ? '0' : String(from + count);
      return Promise.resolve({
        kind: 'read' as const,
        incarnation: `source-${index}`,
        cursor: next,
        floor: source.floor,
        settings: { maxTtlMs: '1000' },
        registers: keys.slice(from, from + count).map((key) => [key, held.get(key)!] as const),
        leases: [],
      });
    },
  };
  return source;
}

const DRIVER_TIMING: RepairTiming = {
  markerTtlMs: 60_000, // no renewal falls inside a test
  waitPollMs: 1,
  batchSize: 2,
  triesPerBatch: 2,
  maxRestarts: 2,
};

function driverContext(members: number): RepairContext {
  let ids = 0;
  return {
    // Only the member count (N) is read from `nodes` by the driver; the scope supplies the sources.
    nodes: Array.from({ length: members }, (_, index) => ({ index }) as RepairNode),
    quorum: Math.floor(members / 2) + 1,
    clock: {
      now: () => Date.now(),
      sleep: (ms, signal) =>
        new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, ms);
          signal?.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason as Error)), {
            once: true,
          });
        }),
    },
    callTimeoutMs: 100,
    closing: new AbortController().signal,
    status: () => undefined,
    reportError: () => undefined,
    newId: () => `id-${ids++}`,
  };
}

describe('the one repair driver (repairScope), through a scope of its own', () => {
  it('claims, seals and reads N − quorum + 1 sources, raises, and finishes only after every raise, in that order', async () => {
    const target = new MemoryScope();
    const sources = [1, 2, 3, 4].map((i) => memorySource(i, { a: 3n, b: BigInt(i), c: 7n }, target.log));

    await repairScope(driverContext(5), target.scope(sources), DRIVER_TIMING);

    expect(target.log[0]).toBe('marker claim');
    // Three of the four sources (5 − 3 + 1) are sealed, each by its first batch; the fourth is never read.
    expect(target.log.filter((line) => line.endsWith('(seal)'))).toEqual([
      'read 1 0 (seal)',
      'read 2 0 (seal)',
      'read 3 0 (seal)',
    ]);
    expect(sources.map((s) => s.seal !== '')).toEqual([true, true, true, false]);
    const finish = target.log.indexOf('finish');
    expect(target.log.slice(finish)).toEqual(['finish', 'status stopped']);
    expect(target.log.slice(0, finish).some((line) => line.startsWith('raise '))).toBe(true);
    expect(target.incarnation).not.toBeNull();
    expect(['a', 'b', 'c'].map((key) => target.answer(key))).toEqual([3n, 3n, 7n]);
  });

  it('replaces a source that refuses, and leaves the scope empty when too few can be read', async () => {
    const target = new MemoryScope();
    const log = target.log;
    const sources = [
      memorySource(1, { a: 9n }, log, 'not-initialized'),
      memorySource(2, { a: 5n }, log),
      memorySource(3, { a: 5n }, log, 'under-repair'),
      memorySource(4, { a: 6n }, log),
    ];
    const error: unknown = await repairScope(driverContext(5), target.scope(sources), DRIVER_TIMING).then(
      () => null,
      (e: unknown) => e,
    );

    expect(error).toBeInstanceOf(TooFewSources);
    expect((error as Error).message).toMatch(/only 2 of the 3 source nodes needed could be read/);
    expect(target.incarnation).toBeNull();
    expect(target.log).not.toContain('finish');

    // With a valid source in place of the empty one, the next attempt repairs it.
    sources[0] = memorySource(1, { a: 9n }, log);
    await repairScope(driverContext(5), target.scope(sources), DRIVER_TIMING);
    expect(target.incarnation).not.toBeNull();
    expect(target.answer('a')).toBe(9n);
  });

  it('starts over from the claim when the marker is lost, and gives up after maxRestarts', async () => {
    const target = new MemoryScope();
    target.loseMarkerAtRaise = 0;
    const sources = [1, 2].map((i) => memorySource(i, { a: 4n }, target.log));

    const error: unknown = await repairScope(driverContext(3), target.scope(sources), DRIVER_TIMING).then(
      () => null,
      (e: unknown) => e,
    );

    expect(error).toBeInstanceOf(RepairRestart);
    expect(target.log.filter((line) => line === 'marker claim')).toHaveLength(1 + DRIVER_TIMING.maxRestarts);
    expect(target.log).not.toContain('finish');
    expect(target.incarnation).toBeNull();
  });

  it('waits while another process holds the marker, and ends when that repair finished', async () => {
    const target = new MemoryScope();
    target.foreign = true;
    const sources = [1, 2].map((i) => memorySource(i, { a: 4n }, target.log));
    let claims = 0;
    const scope = target.scope(sources);
    const counting: RepairScope = {
      ...scope,
      repairMarker: (...call) => {
        if (++claims === 3) target.incarnation = 'repaired-elsewhere';
        return scope.repairMarker(...call);
      },
    };

    await repairScope(driverContext(3), counting, DRIVER_TIMING);

    expect(claims).toBe(3);
    expect(target.log.some((line) => line.startsWith('read '))).toBe(false);
    expect(target.incarnation).toBe('repaired-elsewhere');
  });

  it('an attempt cut mid-copy leaves no incarnation; after the sources fold, the next one never answers below (F27)', async () => {
    const target = new MemoryScope();
    // The last grant's token 9 for `z`; `a`…`d` lower. The first attempt dies after its first raise.
    const registers = { a: 2n, b: 2n, c: 2n, d: 2n, z: 9n };
    const sources = [1, 2].map((i) => memorySource(i, registers, target.log));
    target.failAtRaise = 1;

    await expect(repairScope(driverContext(3), target.scope(sources), DRIVER_TIMING)).rejects.toThrow(
      'the node went away',
    );
    expect(target.incarnation).toBeNull();
    expect([...target.registers.values()].every((value) => value <= 9n)).toBe(true);

    // The sources fold every register into their floors; another attempt repairs from the floors alone.
    for (const source of sources) source.fold();
    target.failAtRaise = Infinity;
    target.marker = null;
    await repairScope(driverContext(3), target.scope(sources), DRIVER_TIMING);

    expect(target.incarnation).not.toBeNull();
    for (const key of Object.keys(registers)) expect(target.answer(key)).toBe(9n);
  });
});
