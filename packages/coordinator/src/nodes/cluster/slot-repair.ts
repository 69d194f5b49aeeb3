/**
 * The slot scope of the one sealed repair (nodes/repair.ts holds the driver and its steps, docs/design.md §3 the
 * argument; DESIGN §3c, "amnesia is per slot"): a shard that restarted without its data lost the node state and
 * registers of its own slots, which refuse every vote until each is repaired from the same slot of the other
 * members. The member's other slots vote all along. For a resource in slot s, member i's vote is the vote of (i, s),
 * so the members behave for s exactly as N nodes do for a standalone repair; each empty slot s of T is one
 * {@link RepairScope}, and what differs is supplied here:
 * - **Keys**: every script runs on slot s's own node-state keys (`scopes.keysOf(s)`, through the builders of
 *   packages/coordinator/src/scripts/script-keys.ts).
 * - **Sources**: every other member, read for s: a Cluster member by repair-read-slot.lua (its slot-s seal epoch
 *   replaced and the whole slot read in one atomic call: one batch); a standalone node by repair-read.lua, sealed
 *   node-wide and read in full for this run's slots (`standaloneRead`), keeping slot s's keys — all a slot-s grant
 *   can have counted there. Safety: a slot uses only a read that began after its claim was answered (a slot
 *   claimed later gets a new read), so each source is sealed after the claim of every slot it serves. Cost: the
 *   first read waits until every slot's first claim was answered, so one read serves them all.
 * - **Raise**: on a stamped slot the floor is every resource's register (include/node-state.lua, promise_key), so a
 *   batch's registers are folded into the floor raised; nothing else is written but its leases.
 * - **Finish**: a stamped incarnation (`<id>@`, completed with the shard's id by the script), a new seal epoch.
 * It streams like every scope (why: nodes/repair.ts); a slot stopped at any step holds at most a raised floor and
 * leases, no incarnation, so it keeps refusing. Slots are independent: each has its own marker, seal, sources count,
 * restarts and finish; a slot with fewer than `N − quorum + 1` readable sources stays empty and is tried again.
 *
 * Tests that fail when this breaks: test/unit/coordinator/nodes/cluster/slot-repair.test.ts (mutation row 30),
 * test/fault/cluster-amnesia.test.ts (F25; its negative control turns the per-slot incarnation check off),
 * test/fault/slot-migration-amnesia.test.ts (F29: a Cluster member with standalone sources).
 */
import { randomUUID } from 'node:crypto';
import { keySlot } from '../../keys/slots.js';
import { repairRaiseCall, scriptKeys } from '../../scripts/script-keys.js';
import { ClusterMember } from './cluster-member.js';
import type { NodeConnection } from '../node-connection.js';
import {
  DEFAULT_REPAIR_TIMING,
  readSource,
  repairScope,
  RepairRestart,
  sourcesRequired,
  TooFewSources,
  type RepairContext,
  type RepairScope,
  type RepairSource,
  type RepairTiming,
} from '../repair.js';

/** Per-slot script calls in flight at once (claims, reads, raises, finishes, renewals of all the slots). */
const SLOT_CALLS_IN_FLIGHT = 512;

type RepairReadReply = Awaited<ReturnType<RepairSource['repairRead']>>;

/** What a standalone source held for the run's slots. */
interface SlotKeys {
  readonly registers: [string, bigint][];
  readonly leases: [string, string, number][];
}
interface StandaloneReply {
  readonly incarnation: string;
  readonly floor: bigint;
  readonly settings: Readonly<Record<string, string>>;
  readonly slots: ReadonlyMap<number, SlotKeys>;
}
/** One read of a standalone source for the run's slots, and the claims it covers (sealed after them). */
interface StandaloneRead {
  readonly covers: number;
  readonly reply: Promise<StandaloneReply>;
}

/**
 * Repairs every slot of `target` last seen empty (the probe's view, refreshed first), each as one scope of the
 * sealed repair, all at once. Resolves when every such slot was repaired here or elsewhere.
 * @throws Error naming the slots left unrepaired (too few sources, a lost marker, a call that kept failing)
 */
export async function repairEmptySlots(
  context: RepairContext,
  members: readonly (NodeConnection | ClusterMember)[],
  target: ClusterMember,
  timing: RepairTiming = DEFAULT_REPAIR_TIMING,
): Promise<void> {
  await target.probe(context.callTimeoutMs);
  const empty = target.scopes.empty().filter((slot) => target.servesSlot(slot));
  if (empty.length === 0) return;
  const run = new SlotRepairRun(context, members, target, empty, timing);
  try {
    await run.repairAll();
  } finally {
    context.status(target, undefined);
  }
}

class SlotRepairRun {
  private readonly newId: () => string;
  /** Claims answered `claimed` so far, in order: a standalone read covers those answered before it began. */
  private claims = 0;
  private readonly unanswered: Set<number>;
  private readonly allAnswered: Promise<void>;
  private answeredAll: () => void = () => undefined;
  private readonly standaloneReads = new Map<NodeConnection, StandaloneRead>();
  private readonly waiting: (() => void)[] = [];
  private calls = 0;
  /** The slots' context: each source's failure, the same for hundreds of slots, is reported once. */
  private readonly slotContext: RepairContext;

  constructor(
    private readonly context: RepairContext,
    private readonly members: readonly (NodeConnection | ClusterMember)[],
    private readonly target: ClusterMember,
    private readonly slots: readonly number[],
    private readonly timing: RepairTiming,
  ) {
    this.newId = context.newId ?? randomUUID;
    this.unanswered = new Set(slots);
    this.allAnswered = new Promise((resolve) => (this.answeredAll = resolve));
    const reported = new Set<string>();
    this.slotContext = {
      ...context,
      reportError: (node, operation, error) => {
        const key = `${node} ${operation} ${error instanceof Error ? error.message : String(error)}`;
        if (reported.has(key)) return;
        reported.add(key);
        context.reportError(node, operation, error);
      },
    };
  }

  async repairAll(): Promise<void> {
    const total = this.slots.length;
    const status = (text: string, phase: 'reading' | 'finishing'): void =>
      this.context.status(this.target, `${total} slots restarted empty: ${text}`, { phase });
    status('claiming, sealing, reading and raising each slot', 'reading');
    let repaired = 0;
    let short = 0;
    let lost = 0;
    const failed: string[] = [];
    const every = Math.max(1, Math.floor(total / 20));
    await Promise.all(
      this.slots.map(async (slot) => {
        try {
          await repairScope(this.slotContext, this.scope(slot), this.timing);
          if (++repaired % every === 0) status(`${repaired} slots repaired`, 'reading');
        } catch (error) {
          if (error instanceof TooFewSources) short++;
          else if (error instanceof RepairRestart) lost++;
          else failed.push(`slot ${slot}: ${error instanceof Error ? error.message : String(error)}`);
        } finally {
          this.answered(slot);
          this.target.scopes.underRepair.delete(slot);
        }
      }),
    );
    status(`${repaired} slots repaired`, 'finishing');
    const problems: string[] = [];
    const required = sourcesRequired(this.members.length, this.context.quorum);
    if (short > 0) problems.push(`${short} slots had fewer than ${required} readable sources`);
    if (lost > 0) problems.push(`${lost} slots lost their repair marker (the shard restarted again?)`);
    if (failed.length > 0) problems.push(`${failed.length} slots failed (${failed[0]!})`);
    if (problems.length > 0) throw new Error(`slots left unrepaired: ${problems.join('; ')}`);
  }

  /** Slot `slot` of the target as a repair scope. */
  private scope(slot: number): RepairScope {
    const { target } = this;
    const k = target.scopes.keysOf(slot);
    let claimedAs = 0;
    return {
      target,
      sources: this.members
        .filter((m) => m !== target)
        .map((m) =>
          m instanceof ClusterMember
            ? this.clusterSource(m, slot)
            : this.standaloneSource(m, slot, () => claimedAs),
        ),
      repairMarker: async (timeoutMs, operation, repairId, markerTtlMs) => {
        try {
          const reply = await this.limited(() =>
            target.script('repair-marker', timeoutMs, scriptKeys['repair-marker'](k), [
              operation,
              repairId,
              markerTtlMs,
            ]),
          );
          if (operation === 'claim' && reply.kind === 'claimed') {
            claimedAs = ++this.claims;
            target.scopes.underRepair.add(slot);
          }
          if (reply.kind === 'initialized') target.scopes.set(slot, true);
          return reply;
        } finally {
          if (operation === 'claim') this.answered(slot);
        }
      },
      repairRaise: (timeoutMs, repairId, floor, registers, leases) => {
        // A stamped slot's floor is every resource's register of the slot (include/node-state.lua): registers are
        // folded into the floor raised, none is written as a key of its own (a slot's votes would never read it).
        let raised = floor;
        for (const [, value] of registers) if (value > raised) raised = value;
        // Each live lease as its record and its lease key (one key in the 'fenced' layout; keys/key-layout.ts).
        const { keys, args } = repairRaiseCall(k, target.keyPrefix, repairId, raised, [], leases);
        return this.limited(() => target.script('repair-raise', timeoutMs, keys, args));
      },
      finishRepair: async (timeoutMs, repairId, settings) => {
        const seal = this.newId();
        const done = await this.limited(() =>
          target.script(
            'finish-repair',
            timeoutMs,
            scriptKeys['finish-repair'](k),
            // Stamped with the slot's shard by the script (include/node-state.lua).
            [repairId, `${this.newId()}@`, seal, ...Object.entries(settings).flat()],
          ),
        );
        if (done.kind === 'finished') {
          target.scopes.set(slot, true);
          target.scopes.sealed(slot, seal);
        }
        return done;
      },
      // The run reports for all its slots at once.
      status: () => undefined,
    };
  }

  /** A Cluster source read for `slot`: sealed and read in full in one atomic call (repair-read-slot.lua). */
  private clusterSource(source: ClusterMember, slot: number): RepairSource {
    return {
      index: source.index,
      address: source.address,
      repairRead: async (timeoutMs, cursor, count, incarnation, seal) => {
        const reply = await this.limited(() =>
          source.script(
            'repair-read-slot',
            timeoutMs,
            scriptKeys['repair-read'](source.scopes.keysOf(slot)),
            [slot, source.resourceKeyStart(), seal],
          ),
        );
        if (reply.kind === 'read') source.scopes.sealed(slot, seal);
        return reply;
      },
    };
  }

  /** A standalone source read for `slot`: the slot's keys of a full read shared by the run's slots. */
  private standaloneSource(source: NodeConnection, slot: number, claimedAs: () => number): RepairSource {
    return {
      index: source.index,
      address: source.address,
      repairRead: async (): Promise<RepairReadReply> => {
        const read = await this.standaloneRead(source, claimedAs());
        const kept = read.slots.get(slot);
        return {
          kind: 'read',
          incarnation: read.incarnation,
          cursor: '0',
          floor: read.floor,
          settings: read.settings,
          registers: kept?.registers ?? [],
          leases: kept?.leases ?? [],
        };
      },
    };
  }

  /**
   * The read of standalone `source` for every slot of this run, sealed after the claim `claimedAs` (a claim's
   * number, in the order the claims were answered): shared by every slot whose claim it covers.
   */
  private async standaloneRead(source: NodeConnection, claimedAs: number): Promise<StandaloneReply> {
    // One read for all the slots: it begins once every slot's first claim was answered.
    await this.allAnswered;
    let read = this.standaloneReads.get(source);
    if (read === undefined || read.covers < claimedAs) {
      read = { covers: this.claims, reply: this.readStandalone(source) };
      this.standaloneReads.set(source, read);
    }
    return read.reply;
  }

  private async readStandalone(source: NodeConnection): Promise<StandaloneReply> {
    const wanted = new Set(this.slots);
    const slots = new Map<number, SlotKeys>();
    const of = (key: string): SlotKeys | undefined => {
      const slot = keySlot(key);
      if (!wanted.has(slot)) return undefined;
      let kept = slots.get(slot);
      if (kept === undefined) slots.set(slot, (kept = { registers: [], leases: [] }));
      return kept;
    };
    let incarnation = '';
    const read = await readSource(
      this.context,
      {
        index: source.index,
        address: source.address,
        repairRead: async (...call) => {
          const reply = await source.repairRead(...call);
          if (reply.kind === 'read') incarnation = reply.incarnation;
          return reply;
        },
      },
      this.timing,
      () => this.context.closing.throwIfAborted(),
      (_floor, registers) => {
        for (const [key, value] of registers) of(key)?.registers.push([key, value]);
        return Promise.resolve();
      },
    );
    for (const [key, { value, pttlMs }] of read.leases) of(key)?.leases.push([key, value, pttlMs]);
    return { incarnation, floor: read.floor, settings: read.settings, slots };
  }

  /** Slot `slot` answered its first claim, or its repair ended first. */
  private answered(slot: number): void {
    if (this.unanswered.delete(slot) && this.unanswered.size === 0) this.answeredAll();
  }

  /** Runs a per-slot call once fewer than SLOT_CALLS_IN_FLIGHT are in flight. */
  private async limited<T>(call: () => Promise<T>): Promise<T> {
    while (this.calls >= SLOT_CALLS_IN_FLIGHT)
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.calls++;
    try {
      return await call();
    } finally {
      this.calls--;
      this.waiting.shift()?.();
    }
  }
}
