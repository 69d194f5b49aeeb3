/**
 * The sealed repair of the empty slots of a Redis Cluster member (DESIGN §3c, "amnesia is per slot"): a shard that
 * restarted without its data lost the node state and the registers of its own slots; those slots refuse every vote
 * (their incarnation keys are gone) until this repair copies them back from the same slots of the other members. The
 * member's other slots vote all along. No clock, no sit-out, no wait.
 *
 * Safety argument: it is the argument of nodes/repair.ts, word for word, with "node" read as "(member, slot)".
 * For a resource in slot s, a grant counts one promise per member, each recorded by a script on that member's
 * state for s: on a Cluster member, the slot-s state (incarnation, floor, seal, registers of slot s, all in slot s);
 * on a standalone member, the node's state. So for slot s the members behave exactly as N nodes do in DESIGN §3:
 * 1. **Claim** (repair-marker.lua on the slot's own incarnation and marker keys): observes (T, s) empty; every
 *    promise (T, s) lost was applied before it, and every script on slot s of T refuses from then on.
 * 2. **Seal and read**, for slot s, `N − quorum + 1` other members, each atomically verified and sealed: a Cluster
 *    source by repair-read-slot.lua (the source's slot-s seal epoch replaced, then the whole slot read in the same
 *    call), a standalone source by repair-read.lua (the node's seal epoch replaced by its first batch, then every
 *    batch read; only slot s's registers and leases are kept, which is all a slot-s grant can have counted there).
 *    A grant G whose token t counted a lost promise of (T, s) needs `quorum − 1` other promises from one round; at
 *    most `quorum − 2` of the other members are unsealed for s, so one counted promise sits on a sealed source S:
 *    applied before S's seal, the read saw it (or S's floor did, which is copied), so (T, s) is raised to at least t;
 *    applied after it, G's round carried S's new epoch, so it began after the seal, after the claim, when (T, s)
 *    refused everything — not a lost promise. Live leases are copied the same way.
 * 3. **Raise** (repair-raise.lua: the floor of slot s — the highest floor or register read for s, since on a member the
 *    slot's floor is every resource's register — and its leases, while the slot's marker is ours) and
 *    **finish** (finish-repair.lua: a new incarnation and seal epoch for the slot, the settings, only while the
 *    marker is ours). A shard that restarts again loses the markers, and its slots are repaired again.
 * Slots are independent: each has its own marker, seal, sources count and finish. A slot with fewer than
 * `N − quorum + 1` readable sources is left empty (it keeps refusing) and tried again later. A source slot that is
 * itself empty or under repair is never read (checked atomically with the read).
 *
 * Tests that fail when this breaks: test/fault/cluster-amnesia.test.ts (F25: a shard restarted empty under load, its
 * slots repaired while the others vote; the negative control turns the per-slot incarnation check off and the
 * checker must see tokens go backwards).
 */
import { randomUUID } from 'node:crypto';
import { keySlot } from '../../keys/slots.js';
import { interpretReply, type RepairReadReply } from '../../scripts/script-results.js';
import { repairRaiseCall, scriptKeys } from '../../scripts/script-keys.js';
import { ClusterMember } from './cluster-member.js';
import type { NodeConnection } from '../node-connection.js';
import {
  DEFAULT_REPAIR_TIMING,
  everyThirdOfMarkerTtl,
  laterCopy,
  mergeSettings,
  retried,
  sourcesRequired,
  type RepairContext,
  type RepairTiming,
} from '../repair.js';

/** Per-slot calls in flight at once while raising. */
const RAISES_IN_FLIGHT = 32;

interface SlotRead {
  floor: bigint;
  readonly registers: Map<string, bigint>;
  readonly leases: Map<string, { value: string; pttlMs: number }>;
  /** Sources read in full for this slot. */
  sources: number;
}

/**
 * Repairs every slot of `target` last seen empty (the probe's view, refreshed first). Resolves when every such slot
 * was repaired here or elsewhere.
 * @throws Error naming the slots left unrepaired (too few sources, another process repairing them, a lost marker)
 */
export async function repairEmptySlots(
  context: RepairContext,
  members: readonly (NodeConnection | ClusterMember)[],
  target: ClusterMember,
  timing: RepairTiming = DEFAULT_REPAIR_TIMING,
): Promise<void> {
  const newId = context.newId ?? randomUUID;
  const timeout = context.callTimeoutMs;
  const prefix = target.keyPrefix;
  const bulkTimeout = Math.max(10_000, timeout * 10);
  await target.probe(timeout);
  const empty = target.scopes.empty().filter((slot) => target.servesSlot(slot));
  if (empty.length === 0) return;
  const repairId = newId();
  const status = (text: string, phase: 'claiming' | 'waiting' | 'reading' | 'copying' | 'finishing'): void =>
    context.status(target, `${empty.length} slots restarted empty: ${text}`, { phase });

  // Step 1: claim each empty slot's marker.
  status('claiming the slots', 'claiming');
  const claims = await target.eachSlot(
    'repair-marker',
    bulkTimeout,
    'repair-marker',
    scriptKeys['repair-marker'],
    () => ['claim', repairId, timing.markerTtlMs],
    (raw) => raw,
    empty,
  );
  const claimed: number[] = [];
  let busy = 0;
  claims.forEach((raw, i) => {
    const slot = empty[i]!;
    const code = Array.isArray(raw) ? Number(raw[0]) : NaN;
    if (code === 1) claimed.push(slot);
    else if (code === 10) target.scopes.set(slot, true);
    else busy++;
  });
  if (claimed.length === 0) {
    if (busy > 0) throw new Error(`${busy} slots are being repaired by another process`);
    return;
  }
  for (const slot of claimed) target.scopes.underRepair.add(slot);
  const claimedSet = new Set(claimed);
  const keeper = keepMarkersAlive(context, target, claimed, repairId, timing);
  try {
    // Step 2: seal and read, per slot, every other member that can be read.
    status(`sealing and reading ${claimed.length} slots of the other members`, 'reading');
    const reads = new Map<number, SlotRead>(
      claimed.map((slot) => [slot, { floor: 0n, registers: new Map(), leases: new Map(), sources: 0 }]),
    );
    const settings: Record<string, string> = {};
    const candidates = members.filter((m) => m !== target);
    await Promise.all(
      candidates.map(async (source) => {
        try {
          if (source instanceof ClusterMember) {
            await readClusterSource(context, source, claimed, reads, settings, bulkTimeout, newId);
          } else {
            await readStandaloneSource(context, source, claimedSet, reads, settings, timing, newId);
          }
        } catch (error) {
          context.reportError(source.index, 'repair-read', error);
        }
      }),
    );
    const required = sourcesRequired(members.length, context.quorum);
    const ready = claimed.filter((slot) => reads.get(slot)!.sources >= required);
    const short = claimed.length - ready.length;

    // Step 3: raise each slot, then finish it while its marker is ours.
    status(`copying floors, registers and leases into ${ready.length} slots`, 'copying');
    let next = 0;
    const finished: number[] = [];
    const lost: number[] = [];
    const worker = async (): Promise<void> => {
      while (next < ready.length) {
        const slot = ready[next++]!;
        keeper.throwIfClosed();
        const read = reads.get(slot)!;
        const k = target.scopes.keysOf(slot);
        // On a member, the slot's floor is the token register of every resource of the slot (include/node-state.lua):
        // every register read from the sources is folded into it, and none is copied as a key of its own (a member's
        // votes would never read it).
        let floor = read.floor;
        for (const value of read.registers.values()) if (value > floor) floor = value;
        const registers: (readonly [string, bigint])[] = [];
        const leases = [...read.leases].map(([key, lease]) => [key, lease.value, lease.pttlMs] as const);
        let ok = true;
        for (let i = 0; ok && (i < registers.length || i === 0); i += timing.batchSize) {
          const batch = registers.slice(i, i + timing.batchSize);
          const leaseBatch = i + timing.batchSize >= registers.length ? leases : [];
          // Each live lease as its record and its lease key (one key in the 'fenced' layout; keys/key-layout.ts).
          const { keys, args } = repairRaiseCall(k, prefix, repairId, floor, batch, leaseBatch);
          const raised = await retried(timing, () => target.script('repair-raise', timeout, keys, args));
          if (raised.kind !== 'raised') ok = false;
        }
        if (!ok) {
          lost.push(slot);
          continue;
        }
        const seal = newId();
        const done = await retried(timing, () =>
          target.script(
            'finish-repair',
            timeout,
            scriptKeys['finish-repair'](k),
            // Stamped with the slot's shard by the script (include/node-state.lua).
            [repairId, `${newId()}@`, seal, ...Object.entries(settings).flat()],
          ),
        );
        if (done.kind === 'finished') {
          target.scopes.set(slot, true);
          target.scopes.sealed(slot, seal);
          finished.push(slot);
        } else lost.push(slot);
      }
    };
    await Promise.all(Array.from({ length: RAISES_IN_FLIGHT }, worker));
    status(`${finished.length} slots repaired`, 'finishing');
    const problems: string[] = [];
    if (short > 0) problems.push(`${short} slots had fewer than ${required} readable sources`);
    if (lost.length > 0)
      problems.push(`${lost.length} slots lost their repair marker (the shard restarted again?)`);
    if (busy > 0) problems.push(`${busy} slots are being repaired by another process`);
    if (problems.length > 0) throw new Error(`slots left unrepaired: ${problems.join('; ')}`);
  } finally {
    keeper.stop();
    for (const slot of claimed) target.scopes.underRepair.delete(slot);
    context.status(target, undefined);
  }
}

function merge(
  into: SlotRead,
  floor: bigint,
  registers: Iterable<readonly [string, bigint]>,
  leases: Iterable<readonly [string, string, number]>,
): void {
  if (floor > into.floor) into.floor = floor;
  for (const [key, value] of registers) {
    const known = into.registers.get(key);
    if (known === undefined || value > known) into.registers.set(key, value);
  }
  for (const [key, value, pttlMs] of leases) {
    const known = into.leases.get(key);
    if (known === undefined || laterCopy({ value, pttlMs }, known)) into.leases.set(key, { value, pttlMs });
  }
}

/** Seals and reads each claimed slot on a Cluster source (one atomic call per slot). */
async function readClusterSource(
  context: RepairContext,
  source: ClusterMember,
  slots: readonly number[],
  reads: Map<number, SlotRead>,
  settings: Record<string, string>,
  timeoutMs: number,
  newId: () => string,
): Promise<void> {
  const seals = new Map(slots.map((slot) => [slot, newId()]));
  const prefixOfResources = source.resourceKeyStart();
  const replies = await source.eachSlot<RepairReadReply>(
    'repair-read',
    timeoutMs,
    'repair-read-slot',
    scriptKeys['repair-read'],
    (slot) => [slot, prefixOfResources, seals.get(slot)!],
    (raw) => interpretReply('repair-read-slot', raw),
    slots,
  );
  replies.forEach((reply, i) => {
    if (reply.kind !== 'read') return;
    const slot = slots[i]!;
    source.scopes.sealed(slot, seals.get(slot)!);
    merge(reads.get(slot)!, reply.floor, reply.registers, reply.leases);
    mergeSettings(settings, reply.settings);
    reads.get(slot)!.sources++;
  });
  void context;
}

/** Seals a standalone source (its first batch) and reads it in full, keeping the claimed slots' keys. */
async function readStandaloneSource(
  context: RepairContext,
  source: NodeConnection,
  slots: ReadonlySet<number>,
  reads: Map<number, SlotRead>,
  settings: Record<string, string>,
  timing: RepairTiming,
  newId: () => string,
): Promise<void> {
  const registers: [number, string, bigint][] = [];
  const leases: [number, string, string, number][] = [];
  let incarnation = '';
  let cursor = '0';
  let floor = 0n;
  let firstSeal = newId();
  let recordedSettings: Readonly<Record<string, string>> = {};
  do {
    const from = cursor;
    const sealing = firstSeal;
    const read = await retried(timing, () =>
      source.repairRead(context.callTimeoutMs, from, timing.batchSize, incarnation, sealing),
    );
    if (read.kind !== 'read') throw new Error(`not a valid source: ${read.kind}`);
    firstSeal = '';
    incarnation = read.incarnation;
    cursor = read.cursor;
    floor = read.floor;
    recordedSettings = read.settings;
    for (const [key, value] of read.registers) {
      const slot = keySlot(key);
      if (slots.has(slot)) registers.push([slot, key, value]);
    }
    for (const [key, value, pttlMs] of read.leases) {
      const slot = keySlot(key);
      if (slots.has(slot)) leases.push([slot, key, value, pttlMs]);
    }
  } while (cursor !== '0');
  // The node-wide floor bounds every slot's registers there: it counts for each slot.
  for (const slot of slots) {
    merge(reads.get(slot)!, floor, [], []);
    reads.get(slot)!.sources++;
  }
  for (const [slot, key, value] of registers) merge(reads.get(slot)!, 0n, [[key, value]], []);
  for (const [slot, key, value, pttlMs] of leases) merge(reads.get(slot)!, 0n, [], [[key, value, pttlMs]]);
  mergeSettings(settings, recordedSettings);
}

interface MarkersKeeper {
  throwIfClosed(): void;
  stop(): void;
}

/** Renews the claimed slots' markers every third of their ttl while the repair runs. */
function keepMarkersAlive(
  context: RepairContext,
  target: ClusterMember,
  slots: readonly number[],
  repairId: string,
  timing: RepairTiming,
): MarkersKeeper {
  const stopped = new AbortController();
  everyThirdOfMarkerTtl(context, timing, stopped.signal, async () => {
    // A lost marker needs no action here: the raise and finish scripts check it, and the slot stays empty.
    await target
      .eachSlot(
        'repair-renew',
        Math.max(10_000, context.callTimeoutMs * 10),
        'repair-marker',
        scriptKeys['repair-marker'],
        () => ['renew', repairId, timing.markerTtlMs],
        (raw) => raw,
        slots,
      )
      .catch(() => undefined);
  });
  return {
    throwIfClosed: () => context.closing.throwIfAborted(),
    stop: () => stopped.abort(),
  };
}
