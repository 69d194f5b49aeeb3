// The slot scope of the one repair driver (nodes/cluster/slot-repair.ts) against members in memory: a Cluster member
// whose shard lost some slots, a Cluster source and a standalone source. What the slot scope adds to the driver is
// pinned here: a standalone source is sealed after the claim of every slot it serves (read once for all of them, or
// again for a slot claimed later), each slot's registers are folded into its floor, and its finish is stamped.
// Negative controls, by hand: letting a slot use a read that began before its claim (the `covers` check in
// `standaloneRead`) fails the second test; not waiting for every first claim fails the first (three reads, not one).
import { describe, expect, it } from 'vitest';
import { repairEmptySlots } from '../../../../../packages/coordinator/src/nodes/cluster/slot-repair.js';
import { ClusterMember } from '../../../../../packages/coordinator/src/nodes/cluster/cluster-member.js';
import { NodeScopes } from '../../../../../packages/coordinator/src/nodes/node-scopes.js';
import type { NodeConnection } from '../../../../../packages/coordinator/src/nodes/node-connection.js';
import type { RepairContext, RepairTiming } from '../../../../../packages/coordinator/src/nodes/repair.js';
import { resourceKeys } from '../../../../../packages/coordinator/src/keys/key-layout.js';
import { keySlot } from '../../../../../packages/coordinator/src/keys/slots.js';

const PREFIX = 'fenced';
const TIMING: RepairTiming = {
  markerTtlMs: 60_000,
  waitPollMs: 1,
  batchSize: 2,
  triesPerBatch: 1,
  maxRestarts: 1,
};

/** Resource keys whose token registers live in three different slots. */
const RESOURCES = ['r-one', 'r-two', 'r-three'].map((name) => resourceKeys(PREFIX, name));
const SLOTS = RESOURCES.map((r) => keySlot(r.token));

interface SlotState {
  incarnation: string | null;
  marker: string | null;
  floor: bigint;
  seal: string;
}

/** A Cluster member in memory: the per-slot scripts the slot scope calls, with the scripts' rules. */
function memoryMember(
  index: number,
  log: string[],
  empty: readonly number[],
  floors: Record<number, bigint> = {},
) {
  const slots = new Map<number, SlotState>();
  const state = (slot: number): SlotState => {
    let s = slots.get(slot);
    if (s === undefined) {
      s = {
        incarnation: empty.includes(slot) ? null : 'old@shard',
        marker: null,
        floor: floors[slot] ?? 0n,
        seal: '',
      };
      slots.set(slot, s);
    }
    return s;
  };
  /** Claims answer `busy` this many times first, per slot (another process's marker). */
  const busy = new Map<number, number>();
  const scopes = new NodeScopes(PREFIX, true);
  scopes.setAll(true);
  for (const slot of empty) scopes.set(slot, false);
  const script = (
    name: string,
    _timeoutMs: number,
    keys: readonly string[],
    args: readonly (string | number)[],
  ) => {
    const slot = keySlot(keys[0]!);
    const s = state(slot);
    if (name !== 'repair-marker') log.push(`m${index} ${name} ${slot}`);
    switch (name) {
      case 'repair-marker': {
        const left = busy.get(slot) ?? 0;
        const kind = s.incarnation !== null ? 'initialized' : left > 0 ? 'busy' : 'claimed';
        if (kind === 'busy') busy.set(slot, left - 1);
        if (kind === 'claimed') s.marker = String(args[1]);
        log.push(`m${index} repair-marker ${slot} ${args[0]} ${kind}`);
        // Claims of later slots answer later, as on a busy shard: the reads of the first may begin meanwhile.
        const delayMs = args[0] === 'claim' ? 5 * Math.max(0, empty.indexOf(slot)) : 0;
        return new Promise((resolve) => setTimeout(() => resolve({ kind }), delayMs));
      }
      case 'repair-raise': {
        if (s.marker !== args[0]) return Promise.resolve({ kind: 'no-repair-marker' });
        // A slot's raise carries no register of its own (args[2] = 0): everything is in the floor.
        expect(args[2]).toBe(0);
        const floor = BigInt(args[1]!);
        if (floor > s.floor) s.floor = floor;
        return Promise.resolve({ kind: 'raised' });
      }
      case 'finish-repair': {
        if (s.marker !== args[0]) return Promise.resolve({ kind: 'no-repair-marker' });
        s.incarnation = String(args[1]);
        s.seal = String(args[2]);
        s.marker = null;
        return Promise.resolve({ kind: 'finished' });
      }
      case 'repair-read-slot': {
        if (s.incarnation === null) return Promise.resolve({ kind: 'not-initialized' });
        s.seal = String(args[2]);
        return Promise.resolve({
          kind: 'read',
          incarnation: s.incarnation,
          cursor: '0',
          floor: s.floor,
          settings: {},
          registers: [],
          leases: [],
        });
      }
    }
    throw new Error(`unexpected script ${name}`);
  };
  const member = Object.create(ClusterMember.prototype) as ClusterMember;
  Object.defineProperties(member, {
    index: { value: index },
    address: { value: `cluster-${index}` },
    scopes: { value: scopes },
    keyPrefix: { value: PREFIX },
    script: { value: script },
    probe: { value: () => Promise.resolve() },
    servesSlot: { value: () => true },
    resourceKeyStart: { value: () => `${PREFIX}:{` },
  });
  return { member, state, busy };
}

/** A standalone node in memory, read in batches; `sealedAfter` records how many claims preceded each seal. */
function memoryStandalone(index: number, log: string[], registers: Record<string, bigint>, floor: bigint) {
  const keys = Object.keys(registers).sort();
  const node = {
    index,
    address: `standalone-${index}`,
    repairRead: (_t: number, cursor: string, count: number, _incarnation: string, seal: string) => {
      log.push(`s${index} repair-read ${cursor}${seal !== '' ? ' (seal)' : ''}`);
      const from = Number(cursor);
      return Promise.resolve({
        kind: 'read' as const,
        incarnation: 'standalone',
        cursor: from + count >= keys.length ? '0' : String(from + count),
        floor,
        settings: { maxTtlMs: '1000' },
        registers: keys.slice(from, from + count).map((key) => [key, registers[key]!] as const),
        leases: [],
      });
    },
  };
  return node as unknown as NodeConnection;
}

function context(members: readonly unknown[]): RepairContext {
  let ids = 0;
  return {
    nodes: members as RepairContext['nodes'],
    quorum: Math.floor(members.length / 2) + 1,
    clock: {
      now: () => Date.now(),
      sleep: (ms) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
    },
    callTimeoutMs: 100,
    closing: new AbortController().signal,
    status: () => undefined,
    reportError: () => undefined,
    newId: () => `id-${ids++}`,
  };
}

/** Claims of the target answered before each seal of the standalone source (by log order). */
function claimsBeforeSeals(log: readonly string[]): number[] {
  const counts: number[] = [];
  let claims = 0;
  for (const line of log) {
    if (/^m0 repair-marker \d+ claim claimed$/.test(line)) claims++;
    if (/^s2 repair-read .* \(seal\)$/.test(line)) counts.push(claims);
  }
  return counts;
}

describe('the slot scope of the repair', () => {
  it('seals a standalone source once, after every slot claimed, and raises each slot to its own highest value', async () => {
    const log: string[] = [];
    const target = memoryMember(0, log, SLOTS);
    const source = memoryMember(1, log, [], { [SLOTS[0]!]: 4n, [SLOTS[1]!]: 4n, [SLOTS[2]!]: 4n });
    const standalone = memoryStandalone(
      2,
      log,
      {
        [RESOURCES[0]!.token]: 9n,
        [RESOURCES[1]!.token]: 3n,
        [resourceKeys(PREFIX, 'elsewhere').token]: 50n,
      },
      2n,
    );
    const members = [target.member, source.member, standalone];

    await repairEmptySlots(context(members), members, target.member, TIMING);

    // One read of the standalone node for the three slots (two batches), sealed after all three claims.
    expect(claimsBeforeSeals(log)).toEqual([3]);
    expect(log.filter((line) => line.startsWith('s2 '))).toHaveLength(2);
    // Each slot: the highest of its Cluster source's slot floor, the node's floor and its own registers there.
    expect(SLOTS.map((slot) => target.state(slot).floor)).toEqual([9n, 4n, 4n]);
    for (const slot of SLOTS) {
      expect(target.state(slot).incarnation).toMatch(/@$/); // stamped with the shard by finish-repair.lua
      expect(target.member.scopes.votes(slot)).toBe(true);
      expect(target.member.scopes.epochOf(slot)).toBe(target.state(slot).seal);
      expect(source.state(slot).seal).not.toBe('');
    }
    expect(target.member.scopes.underRepair.size).toBe(0);
  });

  it('reads a standalone source again, sealed after its claim, for a slot claimed after the first read began', async () => {
    const log: string[] = [];
    const target = memoryMember(0, log, SLOTS);
    target.busy.set(SLOTS[2]!, 2); // another process's marker: this slot is claimed two polls later
    const source = memoryMember(1, log, []);
    const standalone = memoryStandalone(2, log, { [RESOURCES[2]!.token]: 7n }, 0n);
    const members = [target.member, source.member, standalone];

    await repairEmptySlots(context(members), members, target.member, TIMING);

    // The first read covers the two slots claimed at once; the late slot gets its own, after its claim.
    expect(claimsBeforeSeals(log)).toEqual([2, 3]);
    expect(target.state(SLOTS[2]!).floor).toBe(7n);
    expect(SLOTS.every((slot) => target.member.scopes.votes(slot))).toBe(true);
  });

  it('leaves a slot empty when too few of its sources can be read, and names it', async () => {
    const log: string[] = [];
    const target = memoryMember(0, log, SLOTS);
    // The Cluster source lost the same slots: only the standalone source is left, and two are needed of three.
    const source = memoryMember(1, log, SLOTS);
    const standalone = memoryStandalone(2, log, {}, 0n);
    const members = [target.member, source.member, standalone];

    await expect(repairEmptySlots(context(members), members, target.member, TIMING)).rejects.toThrow(
      /slots left unrepaired: 3 slots had fewer than 2 readable sources/,
    );
    for (const slot of SLOTS) {
      expect(target.state(slot).incarnation).toBeNull();
      expect(target.member.scopes.votes(slot)).toBe(false);
    }
  });
});
