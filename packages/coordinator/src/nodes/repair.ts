/**
 * Restart repair (DESIGN §3, the sealed repair): a node that lost its state (no incarnation key) votes again only
 * after this. It needs no clock, no sit-out and no setting that another process may hold differently.
 *
 * The invariant it restores: for every resource, the repaired node T answers at least every token that any grant
 * completed (or will complete) with by counting a promise T has lost — so that a later majority containing T still
 * meets every earlier grant's promise (the argument in tokens/promise-rounds.ts). The steps:
 *
 * 1. **Claim.** Claiming T's repair marker is also the observation "T is empty" (repair-marker.lua refuses if the
 *    incarnation key exists). T refuses every vote while it has no incarnation key, so every promise T lost was
 *    applied before the claim, and any message that reaches T from now on finds it refusing or repaired.
 * 2. **Seal and read.** Each node holds a seal epoch; every script that records a promise (acquire.lua,
 *    promise.lua) carries the epoch its caller last saw for that node and refuses — recording nothing — when it is
 *    not the node's current one. The caller reads the epoch when it starts a round, for every node of the round at
 *    once (NodeConnection.sealEpoch). The first batch of this repair's read of a source S (repair-read.lua) replaces
 *    S's epoch with a fresh random one in the same atomic call that verifies S may be read. The repair reads
 *    `N − quorum + 1` sources this way, each in full (any number of batches), and merges their floors, registers,
 *    live leases and recorded settings.
 * 3. **Raise, then finish while the marker is ours.** T's floor becomes the sources' highest floor, every register
 *    above it is copied, every live lease is copied with the remaining ttl read (repair-raise.lua, batched, each
 *    batch retried; raising is idempotent). The registers are raised while the sources are still being read: each
 *    batch a source returns goes to T at once (several raise calls in flight), with the highest floor seen so far;
 *    once every source is read in full, the final floor (the highest of the sources' last batches) goes out, and
 *    every register raised at or below it is raised to it. finish-repair.lua runs only after every raise was
 *    answered; it gives T a new seal epoch, the settings, and its incarnation key, only if the marker is still ours.
 *    A node that restarts again during any step loses the marker, and the repair starts over from step 1. T votes
 *    again at once: there is no wait.
 *
 * **Why no clock is needed.** Let G be a grant whose token t counted a promise of T that T lost. G's promises of t
 * all come from one round (each round proposes a new value), which needs `quorum` promises: T's and `quorum − 1`
 * on other nodes. The repair sealed `N − quorum + 1` of the `N − 1` other nodes, so at most `quorum − 2` other nodes
 * are unsealed, and at least one of G's counted promises sits on a sealed source S. It was applied on S either
 * - *before* S's seal: then it is in S's register when the read starts (or in S's floor, if a fold moved it there
 *   during the scan; the floor of the last batch counts), so T is raised to at least t; or
 * - *after* S's seal: then the call carried S's new epoch (any other is refused), so G's round started after S's
 *   seal, which came after the claim on T — and T's promise of the same round was sent after the claim, when T
 *   refused everything. So it was not applied before the claim, i.e. it is not a lost promise: contradiction.
 * Either way T ends at least t — also with the streamed copy: raising is a max, so the order of the raise calls and
 * their overlap with the reads change nothing; every register of every batch of a sealed source is raised (or
 * skipped because a value at least as high was sent for it, or because it is at most the floor sent), and the final
 * floor is sent. Values raised from a batch of a source that later fails (restarted, unreachable) are values that
 * verified source held: raising T higher than needed makes it refuse more, never promise a value twice, and T does
 * not vote before the finish anyway.
 *
 * **An attempt cut at any step leaves nothing harmful** (F27), because **a node never answers below its floor** (a
 * present register reads as max(register, floor) in every script: include/decimal-token.lua) and **an attempt only
 * ever raises** (repair-raise.lua writes max, never lower; finish-repair.lua writes the incarnation, seal and
 * settings, no token). Cut after the claim: the marker expires and T stays empty. Cut during the reads or raises
 * (a source fails, the process is closed, killed or interrupted): T holds some registers and maybe a raised floor,
 * all values sealed sources held, and still no incarnation key, so it votes nowhere. Meanwhile the sources may fold
 * registers into their floors and other grants may run; the next attempt (this process's or another's, once the
 * marker is free) claims, seals and reads afresh and raises T's floor to at least every value the argument above
 * needs. A leftover register below that floor is then never an answer; one above it is a value a source held,
 * which only makes T refuse more. Cut before the finish, or the finish refused (the marker lost): as the last case.
 * So the argument above holds for the attempt that finishes, whatever earlier attempts left. Nothing in this rests on
 * how long anything took, on any process's clock or on any
 * process's settings: a round may be delayed arbitrarily (held in the network, a paused process), and the seal still
 * refuses it. A source that is itself empty or under repair is never read (repair-read.lua checks, atomically with
 * the read, that it holds its incarnation key — the same one in every batch — and no repair marker: F22), so every
 * source answers for its own promises.
 *
 * **Leases too, without Redlock's delayed restart.** A completed grant's lease sits on `quorum − 1` nodes besides T,
 * so the same counting puts it on a sealed source, from where it is copied with its remaining ttl; an acquire still
 * in flight is refused by the seal like a promise. T therefore forgets no live lease either, and needs no TTL-long
 * wait. (Lease exclusion is an efficiency matter, not a promise: no token argument rests on it. An extend that
 * lands on a source after the read leaves T's copy shorter than the source's key; nothing else depends on it.)
 *
 * At most one process repairs a node (the marker); others wait for it. The cost tracks active resources: idle
 * registers are folded into the floor (fold.lua), and the floor is one key.
 *
 * Tests that fail when this breaks: the protocol simulation (test/unit/coordinator/protocol/protocol-simulation.test.ts, with
 * processes of different settings and clock rates; its negative controls: the seal off, the old sit-out repair),
 * test/unit/coordinator/nodes/repair.test.ts, test/integration/coordinator/sealed-scripts.test.ts (the seal, script by
 * script), test/fault/amnesia.test.ts (F19, F22), test/fault/settings-disagree.test.ts (F23),
 * test/fault/flushed-node.test.ts (F24), and the mutation table's rows 09, 10 and 19–23 (test/mutants/). The copy's
 * raise to the final floor: repair.test.ts, "the copy streams while the sources are read".
 */
import { randomUUID } from 'node:crypto';
import type { ProtocolClock } from './protocol-node.js';
import type {
  FinishRepairReply,
  RepairMarkerReply,
  RepairRaiseReply,
  RepairReadReply,
} from '../scripts/script-results.js';

/** The slice of a node the repair needs: the four repair scripts. */
export interface RepairNode {
  readonly index: number;
  readonly address: string;
  repairMarker(
    timeoutMs: number,
    operation: 'claim' | 'renew',
    repairId: string,
    markerTtlMs: number,
  ): Promise<RepairMarkerReply>;
  /** One batch of a source; a non-empty `seal` (the first batch) seals the source with that epoch. */
  repairRead(
    timeoutMs: number,
    cursor: string,
    count: number,
    incarnation: string,
    seal: string,
  ): Promise<RepairReadReply>;
  repairRaise(
    timeoutMs: number,
    repairId: string,
    floor: bigint,
    registers: readonly (readonly [string, bigint])[],
    leases: readonly (readonly [string, string, number])[],
  ): Promise<RepairRaiseReply>;
  finishRepair(
    timeoutMs: number,
    repairId: string,
    incarnation: string,
    sealEpoch: string,
    settings: Readonly<Record<string, string>>,
  ): Promise<FinishRepairReply>;
}

/** Where a repair is, for `nodeStatus()[i].repair` and the service's `fenced_node_repair*` gauges. */
export interface RepairProgress {
  /**
   * `claiming` (taking the node's repair marker, or starting over), `waiting` (another process repairs it),
   * `reading` (step 2: sealing and reading the sources, each batch raised on the node meanwhile), `copying` (the
   * rest of step 3 after the last batch read: the final floor, the leases), `finishing` (the final, marker-checked
   * call).
   */
  readonly phase: 'claiming' | 'waiting' | 'reading' | 'copying' | 'finishing';
  /** Token registers raised on the node so far (during and after `copying`). */
  readonly registersCopied?: number;
  /** Token registers to raise (known from `copying` on). */
  readonly registersTotal?: number;
}

export interface RepairContext {
  readonly nodes: readonly RepairNode[];
  readonly quorum: number;
  /** Waits between polls while another process repairs the node, and paces the marker's renewals. */
  readonly clock: ProtocolClock;
  /** Bound of one repair call. */
  readonly callTimeoutMs: number;
  /** Aborted when the coordinator closes. */
  readonly closing: AbortSignal;
  /** What the repair is doing now, for `nodeStatus()`; `undefined` when it stopped. */
  status(node: RepairNode, text: string | undefined, progress?: RepairProgress): void;
  reportError(node: number, operation: string, error: unknown): void;
  /** A fresh random id (repair ids, incarnations). */
  newId?: () => string;
}

/** How the repair's timing is set. Defaults below; the simulation shortens them. */
export interface RepairTiming {
  /** The marker expires this long after its last renewal. */
  readonly markerTtlMs: number;
  /** How often a waiting process looks whether another's repair finished or died. */
  readonly waitPollMs: number;
  /** Keys per read batch (SCAN COUNT hint) and registers or leases per raise batch. */
  readonly batchSize: number;
  /** Tries per batch before the source (read) or the repair (raise) gives up. */
  readonly triesPerBatch: number;
  /** How many times the repair starts over after the node restarted again, before it gives up. */
  readonly maxRestarts: number;
}

export const DEFAULT_REPAIR_TIMING: RepairTiming = Object.freeze({
  markerTtlMs: 15_000,
  waitPollMs: 1_000,
  batchSize: 1_000,
  triesPerBatch: 3,
  maxRestarts: 5,
});

/**
 * Raise calls in flight at once (a few more for a moment when several sources' reads hand over batches together):
 * the copy is bound by round trips, not by the node.
 */
const RAISES_IN_FLIGHT = 4;

/** The node restarted again (or the marker expired): the repair must start over from the claim. */
class RepairRestart extends Error {
  override readonly name = 'RepairRestart';
}

/**
 * Repairs `target` (DESIGN §3), starting over when it restarts again meanwhile. Resolves once the node holds its
 * incarnation key again (repaired here or by another process).
 * @throws Error when too few sources can be read, a batch keeps failing, or the coordinator closes
 */
export async function repairNode(
  context: RepairContext,
  target: RepairNode,
  timing: RepairTiming = DEFAULT_REPAIR_TIMING,
): Promise<void> {
  try {
    let restartedBecause: string | undefined;
    for (let attempt = 0; ; attempt++) {
      try {
        await repairOnce(context, target, timing, restartedBecause);
        return;
      } catch (error) {
        if (!(error instanceof RepairRestart) || attempt >= timing.maxRestarts) throw error;
        restartedBecause = `repair attempt ${attempt + 2}: ${error.message}, so the repair starts over`;
        context.status(target, `restarted empty: ${restartedBecause}`, { phase: 'claiming' });
      }
    }
  } finally {
    context.status(target, undefined);
  }
}

async function repairOnce(
  context: RepairContext,
  target: RepairNode,
  timing: RepairTiming,
  restartedBecause: string | undefined,
): Promise<void> {
  const { clock } = context;
  const newId = context.newId ?? randomUUID;
  const repairId = newId();
  const timeout = context.callTimeoutMs;

  // Step 1: claim the marker — or wait while another process's repair runs.
  for (;;) {
    context.closing.throwIfAborted();
    const claim = await retried(timing, () =>
      target.repairMarker(timeout, 'claim', repairId, timing.markerTtlMs),
    );
    if (claim.kind === 'initialized') return; // repaired elsewhere, or never lost its state
    if (claim.kind === 'claimed') break;
    context.status(target, 'restarted empty: another process is repairing it; waiting', { phase: 'waiting' });
    await clock.sleep(timing.waitPollMs, context.closing);
  }
  // The claim observed the node empty: every promise it lost was applied before this moment.
  const keeper = keepMarkerAlive(context, target, repairId, timing);
  try {
    // Step 2: seal and read N − quorum + 1 verified sources, and step 3 with it: each batch read is raised on the
    // node while the next one is read. No wait comes before it: the seal, not time, keeps every round that began
    // before it from recording anything on a source afterwards.
    if (restartedBecause !== undefined) context.status(target, `restarted empty: ${restartedBecause}`);
    const copier = new Copier(timing.batchSize, (floor, registers, leases) => {
      keeper.throwIfLost();
      return retried(timing, () => target.repairRaise(timeout, repairId, floor, registers, leases)).then(
        (raised) => {
          if (raised.kind === 'no-repair-marker') throw new RepairRestart('its repair marker was lost');
          if (raised.kind === 'corrupt')
            throw new Error('its floor or a register holds something other than a token');
        },
      );
    });
    const sources = await readSources(context, target, timing, keeper, copier);

    // Step 3's rest: the final floor, the registers it overtook, the live leases; then finish while the marker is
    // still ours.
    const leases = [...sources.leases].map(([key, lease]) => [key, lease.value, lease.pttlMs] as const);
    const copying = (copied: number, total: number): void =>
      context.status(
        target,
        `restarted empty: copying the floor, ${total} active token registers (${copied} copied) and ` +
          `${leases.length} live leases`,
        { phase: 'copying', registersCopied: copied, registersTotal: total },
      );
    await copier.finish(sources.floor, leases, copying);
    keeper.throwIfLost();
    context.status(target, 'restarted empty: registers and leases copied; finishing the repair', {
      phase: 'finishing',
      registersCopied: copier.total,
      registersTotal: copier.total,
    });
    const finished = await retried(timing, () =>
      target.finishRepair(timeout, repairId, newId(), newId(), sources.settings),
    );
    if (finished.kind !== 'finished') throw new RepairRestart('its repair marker was lost before the finish');
  } finally {
    keeper.stop();
  }
}

interface SourceRead {
  /** The floor of the source's last batch (merged: the highest of them). Its registers went to the copier. */
  readonly floor: bigint;
  /** Live leases: key → value and remaining ttl. */
  readonly leases: ReadonlyMap<string, { readonly value: string; readonly pttlMs: number }>;
  readonly settings: Readonly<Record<string, string>>;
}

/** How many sources a repair must seal and read in full: every majority without the node meets them. */
export function sourcesRequired(nodes: number, quorum: number): number {
  return nodes - quorum + 1;
}

/**
 * Seals and reads `N − quorum + 1` sources in full, in parallel; a source that cannot be read (empty, under
 * repair, restarted, unreachable) is replaced by the next candidate. Each batch's registers go to `copier` as it
 * arrives (raised on the node while the reads go on). Merges the rest: the highest floor, per lease the copy with
 * the longest remaining ttl, and the settings.
 */
async function readSources(
  context: RepairContext,
  target: RepairNode,
  timing: RepairTiming,
  keeper: MarkerKeeper,
  copier: Copier,
): Promise<SourceRead> {
  const required = sourcesRequired(context.nodes.length, context.quorum);
  const candidates = context.nodes.filter((n) => n !== target);
  if (candidates.length < required) {
    throw new Error(`needs ${required} other nodes to copy token registers from, has ${candidates.length}`);
  }
  context.status(target, `restarted empty: sealing and reading ${required} of the other nodes`, {
    phase: 'reading',
  });
  const merged = {
    floor: 0n,
    leases: new Map<string, { value: string; pttlMs: number }>(),
    settings: {} as Record<string, string>,
  };
  let complete = 0;
  let next = 0;
  const problems: string[] = [];
  // `required` workers, each taking the next candidate until one is read in full.
  const worker = async (): Promise<void> => {
    while (next < candidates.length) {
      const source = candidates[next++]!;
      try {
        const read = await readSource(context, source, timing, keeper, copier, context.newId ?? randomUUID);
        if (read.floor > merged.floor) merged.floor = read.floor;
        for (const [key, lease] of read.leases) {
          const known = merged.leases.get(key);
          if (known === undefined || laterCopy(lease, known)) merged.leases.set(key, lease);
        }
        mergeSettings(merged.settings, read.settings);
        complete++;
        return;
      } catch (error) {
        // A lost marker, or a raise that failed (the node, not this source): the repair stops.
        if (error instanceof RepairRestart || copier.failed) throw error;
        problems.push(`node ${source.index} (${source.address}): ${messageOf(error)}`);
        context.reportError(source.index, 'repair-read', error);
      }
    }
  };
  await Promise.all(Array.from({ length: required }, worker));
  keeper.throwIfLost();
  if (complete < required) {
    throw new Error(
      `only ${complete} of the ${required} source nodes needed could be read${problems.length > 0 ? ` (${problems.join('; ')})` : ''}`,
    );
  }
  return merged;
}

/**
 * Whether lease record `a` is the copy to keep over `b` (same key): the one carrying the grant's token — a node that
 * granted with a refused guess keeps `<leaseId>|<guess>`, the nodes that promised the grant's token hold
 * `<leaseId>|<token>` (promise.lua), and a sealed source among those is read — then the longer remaining ttl.
 */
export function laterCopy(
  a: { readonly value: string; readonly pttlMs: number },
  b: { readonly value: string; readonly pttlMs: number },
): boolean {
  const tokenOf = (value: string): bigint => {
    const text = value.slice(value.indexOf('|') + 1);
    return value.includes('|') && /^[0-9]{1,19}$/.test(text) ? BigInt(text) : 0n;
  };
  const [ta, tb] = [tokenOf(a.value), tokenOf(b.value)];
  return ta !== tb ? ta > tb : a.pttlMs > b.pttlMs;
}

/**
 * The sources' settings merged: a field the sources disagree on (a `settings set` that reached only some of them)
 * takes the largest value for `maxTtlMs` — the node must not refuse a ttl that others accept — and the first
 * source's value otherwise.
 */
export function mergeSettings(into: Record<string, string>, from: Readonly<Record<string, string>>): void {
  for (const [field, value] of Object.entries(from)) {
    const known = into[field];
    if (known === undefined) into[field] = value;
    else if (field === 'maxTtlMs' && Number(value) > Number(known)) into[field] = value;
  }
}

/**
 * Seals one source (its first batch) and reads it in full, handing each batch's registers to `copier` (which may
 * make the next read wait while enough raises are in flight); throws when it is not a valid source or a batch
 * keeps failing. Registers handed over before a later batch fails stay raised: they are values the source held.
 */
async function readSource(
  context: RepairContext,
  source: RepairNode,
  timing: RepairTiming,
  keeper: MarkerKeeper,
  copier: Copier,
  newId: () => string,
): Promise<SourceRead> {
  const leases = new Map<string, { value: string; pttlMs: number }>();
  let settings: Readonly<Record<string, string>> = {};
  let incarnation = '';
  let cursor = '0';
  let floor = 0n;
  // The first batch seals the source with a fresh epoch (the same one on a retry of that batch).
  let seal = newId();
  do {
    keeper.throwIfLost();
    const from = cursor;
    const sealing = seal;
    const read = await retried(timing, () =>
      source.repairRead(context.callTimeoutMs, from, timing.batchSize, incarnation, sealing),
    );
    switch (read.kind) {
      case 'not-initialized':
        throw new Error('it has no incarnation key (it lost its state too)');
      case 'under-repair':
        throw new Error('it is under repair itself');
      case 'incarnation-changed':
        throw new Error('it restarted during the read');
      case 'corrupt':
        throw new Error('its floor holds something other than a token');
      case 'read':
        seal = '';
        incarnation = read.incarnation;
        cursor = read.cursor;
        // The floor of the last batch counts: it includes every register folded away during the scan.
        floor = read.floor;
        settings = read.settings;
        for (const [key, value, pttlMs] of read.leases) leases.set(key, { value, pttlMs });
        await copier.add(read.floor, read.registers);
    }
  } while (cursor !== '0');
  return { floor, leases, settings };
}

type RaiseBatch = (
  floor: bigint,
  registers: readonly (readonly [string, bigint])[],
  leases: readonly (readonly [string, string, number])[],
) => Promise<void>;

/**
 * Step 3 streamed: raises the node with the registers of each batch the sources return, `RAISES_IN_FLIGHT` raise
 * calls at once, while the reads go on (raising is idempotent, order-free and only ever raises, so it need not wait
 * for the merge). A register goes out only when it is above the floor seen so far and above what was already sent
 * for it. Each call carries the highest floor seen so far; `finish` sends the final one. A register sent before a
 * later batch's higher floor (a fold on the source during the scan) may stay below that floor on the node: the node
 * never answers below its floor (include/decimal-token.lua, read_register), so it is harmless.
 */
class Copier {
  /** Highest value sent (or queued) per register. */
  private readonly sent = new Map<string, bigint>();
  private floor = 0n;
  private pending: (readonly [string, bigint])[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private failure: { readonly error: unknown } | undefined;
  private copied = 0;
  private inFlightRegisters = 0;
  private onCopied: ((copied: number) => void) | undefined;
  /** Registers raised in all (known once `finish` resolved). */
  total = 0;

  constructor(
    private readonly batchSize: number,
    private readonly raise: RaiseBatch,
  ) {}

  /** A raise failed: the repair must stop (the failure is the node's, not a source's). */
  get failed(): boolean {
    return this.failure !== undefined;
  }

  /** Takes one batch's floor and registers; resolves once its full raise batches are sent (not answered). */
  async add(floor: bigint, registers: readonly (readonly [string, bigint])[]): Promise<void> {
    this.throwIfFailed();
    if (floor > this.floor) this.floor = floor;
    for (const register of registers) {
      const [key, value] = register;
      if (value <= this.floor) continue;
      const known = this.sent.get(key);
      if (known !== undefined && value <= known) continue;
      this.sent.set(key, value);
      this.pending.push(register);
    }
    while (this.pending.length >= this.batchSize) {
      await this.send(this.pending.splice(0, this.batchSize), []);
    }
  }

  /**
   * After the reads: raises the final floor (`floor`, merged from the sources' last batches), what is still
   * pending above it, and the live leases; resolves when every raise has been answered.
   */
  async finish(
    floor: bigint,
    leases: readonly (readonly [string, string, number])[],
    progress: (copied: number, total: number) => void,
  ): Promise<void> {
    this.throwIfFailed();
    if (floor > this.floor) this.floor = floor;
    // A register sent below the final floor stays as it is: the node answers max(register, floor) (read_register).
    const rest = this.pending.filter(([, value]) => value > this.floor);
    this.pending = [];
    this.total = this.copied + this.inFlightRegisters + rest.length;
    this.onCopied = (copied) => progress(copied, this.total);
    progress(this.copied, this.total);
    // The floor goes with every call; an empty first batch when nothing else is left to send.
    for (let i = 0; i < rest.length || i === 0; i += this.batchSize) {
      await this.send(rest.slice(i, i + this.batchSize), []);
    }
    for (let i = 0; i < leases.length; i += this.batchSize) {
      await this.send([], leases.slice(i, i + this.batchSize));
    }
    while (this.inFlight.size > 0) await Promise.race(this.inFlight);
    this.throwIfFailed();
    this.total = this.copied;
  }

  private async send(
    registers: readonly (readonly [string, bigint])[],
    leases: readonly (readonly [string, string, number])[],
  ): Promise<void> {
    while (this.inFlight.size >= RAISES_IN_FLIGHT) await Promise.race(this.inFlight);
    this.throwIfFailed();
    this.inFlightRegisters += registers.length;
    const call: Promise<void> = this.raise(this.floor, registers, leases)
      .then(
        () => {
          this.copied += registers.length;
          this.onCopied?.(this.copied);
        },
        (error: unknown) => {
          this.failure ??= { error };
        },
      )
      .finally(() => {
        this.inFlightRegisters -= registers.length;
        this.inFlight.delete(call);
      });
    this.inFlight.add(call);
  }

  private throwIfFailed(): void {
    if (this.failure !== undefined) throw this.failure.error;
  }
}

interface MarkerKeeper {
  throwIfLost(): void;
  stop(): void;
}

/**
 * Runs `renew` every third of the repair marker's ttl until `stop` is aborted (a lost marker aborts it too) or the
 * coordinator closes: the renewal loop of a node's repair and of a Cluster member's per-slot repair.
 */
export function everyThirdOfMarkerTtl(
  context: Pick<RepairContext, 'clock' | 'closing'>,
  timing: RepairTiming,
  stop: AbortSignal,
  renew: () => Promise<void>,
): void {
  const stopOrClose = AbortSignal.any([stop, context.closing]);
  void (async () => {
    const every = Math.max(1, Math.floor(timing.markerTtlMs / 3));
    while (!stopOrClose.aborted) {
      try {
        await context.clock.sleep(every, stopOrClose);
      } catch {
        return;
      }
      await renew();
    }
  })();
}

/** Renews the repair marker every third of its ttl while the repair runs; notes when it is lost. */
function keepMarkerAlive(
  context: RepairContext,
  target: RepairNode,
  repairId: string,
  timing: RepairTiming,
): MarkerKeeper {
  const stopped = new AbortController();
  let lost: RepairRestart | undefined;
  const loseWith = (reason: string): void => {
    lost ??= new RepairRestart(reason);
    if (!stopped.signal.aborted) stopped.abort(lost);
  };
  everyThirdOfMarkerTtl(context, timing, stopped.signal, async () => {
    try {
      const renewed = await target.repairMarker(context.callTimeoutMs, 'renew', repairId, timing.markerTtlMs);
      if (renewed.kind !== 'claimed') {
        loseWith(
          renewed.kind === 'initialized'
            ? 'another process initialized it meanwhile'
            : 'its repair marker was lost (it restarted again, or the marker expired)',
        );
      }
    } catch (error) {
      // A failed renewal is not a loss: the marker lives markerTtlMs, and the next renewal may get through. If it
      // does expire, the raise and finish scripts see that and the repair starts over.
      context.reportError(target.index, 'repair-renew', error);
    }
  });
  const throwIfLost = (): void => {
    const reason = lost;
    if (reason !== undefined) throw reason;
  };
  return {
    throwIfLost(): void {
      throwIfLost();
      context.closing.throwIfAborted();
    },
    stop(): void {
      if (!stopped.signal.aborted) stopped.abort(new Error('repair stopped'));
    },
  };
}

/** Runs one call, retrying it (up to `triesPerBatch` in all) when it throws: a timeout or a connection blip. */
export async function retried<T>(timing: RepairTiming, call: () => Promise<T>): Promise<T> {
  let lastError: unknown;
  for (let attempt = 0; attempt < timing.triesPerBatch; attempt++) {
    try {
      return await call();
    } catch (error) {
      lastError = error;
    }
  }
  throw lastError;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
