/**
 * The sealed repair (DESIGN §3 and §3c; docs/design.md §3, "sealed repair", holds the whole argument): one driver
 * for every scope that lost its state, a standalone node (`repairNode` below) or one slot of a Redis Cluster member
 * (nodes/cluster/slot-repair.ts). A {@link RepairScope} supplies only what differs: the scripts on the scope's keys
 * (marker, raise, finish) and the sources that qualify, each read for this scope.
 *
 * Invariant: when scope T votes again it answers, for every resource, at least every token a grant completed (or
 * will complete) with by counting a promise T lost; and an attempt stopped anywhere leaves nothing that makes T
 * answer below a value it promised. Steps, in code order (`repairOnce`):
 * 1. **Claim** T's repair marker (repair-marker.lua refuses while T holds its incarnation key): every promise T lost
 *    was applied before it, and T refuses every vote from then on. Another process's claim: wait. The marker is
 *    renewed every third of its ttl until the finish; losing it starts the attempt over (`maxRestarts`).
 * 2. **Seal and read** `N − quorum + 1` other members (`readSources`, `readSource`): the first batch of each
 *    replaces its seal epoch in the call that verifies it initialized, not under repair, the same incarnation in
 *    every batch (F22); a source that fails is replaced by the next.
 * 3. **Raise** T while reading (`Copier`, repair-raise.lua: a max, only while the marker is ours): each batch's
 *    registers above the floor seen so far, then the final floor (the sources' last batches) and the live leases.
 * 4. **Finish** (finish-repair.lua) only while the marker is ours: new incarnation, seal epoch, settings. No wait.
 * Why: a grant that counted a lost promise of T holds `quorum − 1` other promises of one round, and at most
 * `quorum − 2` other members are unsealed; so one sits on a sealed source, applied before the seal (read: T is
 * raised to it) or after it (refused: its round carried the old epoch). No clock and no setting enters.
 *
 * **Streamed, for every scope.** Stopped after 1: T holds nothing, the marker expires. During 2 or 3, or before 4
 * (a source fails, the process closes or dies, the marker is lost): T holds some values verified sealed sources
 * held (registers, a raised floor, leases) and no incarnation key, so it votes nowhere; the sources may fold, and
 * the next attempt (any process's) seals afresh and raises T's floor at least as far as it needs. What is left is
 * then below that floor — never an answer, since a node never answers below its floor (include/decimal-token.lua)
 * — or a value a source held, which only makes T refuse more (F27). Collecting every source first would leave a
 * subset of the same values at every cut, so it buys no safety; streaming keeps one code path and bounded memory.
 *
 * Tests that fail when this breaks: test/unit/coordinator/nodes/repair.test.ts (the driver, both scopes' rules),
 * test/unit/coordinator/protocol/protocol-simulation.test.ts (negative controls: the seal off, the sit-out repair),
 * test/integration/coordinator/nodes/repair-sources.test.ts, test/integration/coordinator/sealed-scripts.test.ts,
 * test/fault/amnesia.test.ts (F19, F22), test/fault/flushed-node.test.ts (F24), test/fault/partial-repair.test.ts
 * (F27), test/fault/cluster-amnesia.test.ts (F25), test/fault/slot-migration-amnesia.test.ts (F29), and the
 * mutation rows 09, 10, 19 and 22–24 (docs/mutation-testing.md).
 */
import { randomUUID } from 'node:crypto';
import type { ProtocolClock } from './protocol-node.js';
import type {
  FinishRepairReply,
  RepairMarkerReply,
  RepairRaiseReply,
  RepairReadReply,
} from '../scripts/script-results.js';

type Register = readonly [key: string, value: bigint];
type LiveLease = readonly [key: string, value: string, pttlMs: number];

/** The slice of a standalone node the repair needs: the four repair scripts. */
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
    registers: readonly Register[],
    leases: readonly LiveLease[],
  ): Promise<RepairRaiseReply>;
  finishRepair(
    timeoutMs: number,
    repairId: string,
    incarnation: string,
    sealEpoch: string,
    settings: Readonly<Record<string, string>>,
  ): Promise<FinishRepairReply>;
}

/** A source as one scope reads it: batch by batch, the first one sealing it (see `RepairNode.repairRead`). */
export type RepairSource = Pick<RepairNode, 'index' | 'address' | 'repairRead'>;

/**
 * What one repair restores, and all that differs between scopes: a standalone node, or one slot of a Cluster
 * member. Its scripts run on the scope's own keys (packages/coordinator/src/scripts/script-keys.ts).
 */
export interface RepairScope {
  /** The member repaired: it names the repair in errors and status. */
  readonly target: { readonly index: number; readonly address: string };
  /** The sources that qualify: every other member, each read for this scope. */
  readonly sources: readonly RepairSource[];
  repairMarker: RepairNode['repairMarker'];
  repairRaise: RepairNode['repairRaise'];
  /** Lets the scope vote again, with a new incarnation and seal epoch, only while the marker is ours. */
  finishRepair(
    timeoutMs: number,
    repairId: string,
    settings: Readonly<Record<string, string>>,
  ): Promise<FinishRepairReply>;
  /** What the repair of this scope is doing now; `undefined` when it stopped. */
  status(text: string | undefined, progress?: RepairProgress): void;
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
  /** Every quorum member: N. */
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

/** The scope restarted again (or the marker expired): the repair must start over from the claim. */
export class RepairRestart extends Error {
  override readonly name = 'RepairRestart';
}

/** Fewer than `N − quorum + 1` sources could be read in full: the scope stays empty (it keeps refusing). */
export class TooFewSources extends Error {
  override readonly name = 'TooFewSources';
}

/**
 * Repairs a standalone node (DESIGN §3), starting over when it restarts again meanwhile. Resolves once the node
 * holds its incarnation key again (repaired here or by another process).
 * @throws Error when too few sources can be read, a batch keeps failing, or the coordinator closes
 */
export function repairNode(
  context: RepairContext,
  target: RepairNode,
  timing: RepairTiming = DEFAULT_REPAIR_TIMING,
): Promise<void> {
  const newId = context.newId ?? randomUUID;
  return repairScope(
    context,
    {
      target,
      sources: context.nodes.filter((n) => n !== target),
      repairMarker: (...call) => target.repairMarker(...call),
      repairRaise: (...call) => target.repairRaise(...call),
      finishRepair: (timeoutMs, repairId, settings) =>
        target.finishRepair(timeoutMs, repairId, newId(), newId(), settings),
      status: (text, progress) => context.status(target, text, progress),
    },
    timing,
  );
}

/**
 * Repairs one scope (the steps above), starting over when it restarts again meanwhile. Resolves once the scope
 * holds its incarnation key again (repaired here or by another process).
 * @throws TooFewSources, RepairRestart (restarted more than `maxRestarts` times), or the error of a call that kept
 * failing or of the coordinator closing
 */
export async function repairScope(
  context: RepairContext,
  scope: RepairScope,
  timing: RepairTiming = DEFAULT_REPAIR_TIMING,
): Promise<void> {
  try {
    let restartedBecause: string | undefined;
    for (let attempt = 0; ; attempt++) {
      try {
        await repairOnce(context, scope, timing, restartedBecause);
        return;
      } catch (error) {
        if (!(error instanceof RepairRestart) || attempt >= timing.maxRestarts) throw error;
        restartedBecause = `repair attempt ${attempt + 2}: ${error.message}, so the repair starts over`;
        scope.status(`restarted empty: ${restartedBecause}`, { phase: 'claiming' });
      }
    }
  } finally {
    scope.status(undefined);
  }
}

async function repairOnce(
  context: RepairContext,
  scope: RepairScope,
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
      scope.repairMarker(timeout, 'claim', repairId, timing.markerTtlMs),
    );
    if (claim.kind === 'initialized') return; // repaired elsewhere, or never lost its state
    if (claim.kind === 'claimed') break;
    scope.status('restarted empty: another process is repairing it; waiting', { phase: 'waiting' });
    // A signal of its own follows `closing`: thousands of slots may wait at once, each listener on its own signal.
    await clock.sleep(timing.waitPollMs, AbortSignal.any([context.closing]));
  }
  // The claim observed the scope empty: every promise it lost was applied before this moment.
  const keeper = keepMarkerAlive(context, scope, repairId, timing);
  try {
    // Steps 2 and 3 together: each batch read is raised on the scope while the next one is read. No wait comes
    // before it: the seal, not time, keeps every round that began before it from recording on a source afterwards.
    if (restartedBecause !== undefined) scope.status(`restarted empty: ${restartedBecause}`);
    const copier = new Copier(timing.batchSize, (floor, registers, leases) => {
      keeper.throwIfLost();
      return retried(timing, () => scope.repairRaise(timeout, repairId, floor, registers, leases)).then(
        (raised) => {
          if (raised.kind === 'no-repair-marker') throw new RepairRestart('its repair marker was lost');
          if (raised.kind === 'corrupt')
            throw new Error('its floor or a register holds something other than a token');
        },
      );
    });
    const sources = await readSources(context, scope, timing, keeper, copier);

    // Step 3's rest: the final floor, the registers it overtook, the live leases; then step 4, while the marker is
    // still ours.
    const leases = [...sources.leases].map(([key, lease]) => [key, lease.value, lease.pttlMs] as const);
    const copying = (copied: number, total: number): void =>
      scope.status(
        `restarted empty: copying the floor, ${total} active token registers (${copied} copied) and ` +
          `${leases.length} live leases`,
        { phase: 'copying', registersCopied: copied, registersTotal: total },
      );
    await copier.finish(sources.floor, leases, copying);
    keeper.throwIfLost();
    scope.status('restarted empty: registers and leases copied; finishing the repair', {
      phase: 'finishing',
      registersCopied: copier.total,
      registersTotal: copier.total,
    });
    const finished = await retried(timing, () => scope.finishRepair(timeout, repairId, sources.settings));
    if (finished.kind !== 'finished') throw new RepairRestart('its repair marker was lost before the finish');
  } finally {
    keeper.stop();
  }
}

/** What a source (or the merge of the sources) gave besides the registers, which went to the copier. */
export interface SourceRead {
  /** The floor of the source's last batch (merged: the highest of them). */
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
 * Seals and reads `N − quorum + 1` of the scope's sources in full, in parallel; a source that cannot be read (empty,
 * under repair, restarted, unreachable) is replaced by the next candidate. Each batch's registers go to `copier` as
 * it arrives (raised on the scope while the reads go on). Merges the rest: the highest floor, per lease the copy to
 * keep (`laterCopy`), and the settings.
 */
async function readSources(
  context: RepairContext,
  scope: RepairScope,
  timing: RepairTiming,
  keeper: MarkerKeeper,
  copier: Copier,
): Promise<SourceRead> {
  const required = sourcesRequired(context.nodes.length, context.quorum);
  const candidates = scope.sources;
  if (candidates.length < required) {
    throw new TooFewSources(
      `needs ${required} other nodes to copy token registers from, has ${candidates.length}`,
    );
  }
  scope.status(`restarted empty: sealing and reading ${required} of the other nodes`, { phase: 'reading' });
  const merged = {
    floor: 0n,
    leases: new Map<string, { value: string; pttlMs: number }>(),
    settings: {} as Record<string, string>,
  };
  let complete = 0;
  let next = 0;
  const problems: string[] = [];
  const raiseBatch = (floor: bigint, registers: readonly Register[]): Promise<void> =>
    copier.add(floor, registers);
  // `required` workers, each taking the next candidate until one is read in full.
  const worker = async (): Promise<void> => {
    while (next < candidates.length) {
      const source = candidates[next++]!;
      try {
        const read = await readSource(context, source, timing, () => keeper.throwIfLost(), raiseBatch);
        if (read.floor > merged.floor) merged.floor = read.floor;
        for (const [key, lease] of read.leases) {
          const known = merged.leases.get(key);
          if (known === undefined || laterCopy(lease, known)) merged.leases.set(key, lease);
        }
        mergeSettings(merged.settings, read.settings);
        complete++;
        return;
      } catch (error) {
        // A lost marker, or a raise that failed (the scope, not this source): the repair stops.
        if (error instanceof RepairRestart || copier.failed) throw error;
        problems.push(`node ${source.index} (${source.address}): ${messageOf(error)}`);
        context.reportError(source.index, 'repair-read', error);
      }
    }
  };
  await Promise.all(Array.from({ length: required }, worker));
  keeper.throwIfLost();
  if (complete < required) {
    throw new TooFewSources(
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
 * Seals one source (its first batch) and reads it in full, handing each batch's floor and registers to `onBatch`
 * (which may make the next read wait while enough raises are in flight); throws when it is not a valid source, a
 * batch keeps failing, or `throwIfLost` throws. Registers handed over before a later batch fails stay raised: they
 * are values the source held. The Cluster member's slot repair reads a standalone source once, for all its slots,
 * through this too.
 */
export async function readSource(
  context: Pick<RepairContext, 'callTimeoutMs' | 'newId'>,
  source: RepairSource,
  timing: RepairTiming,
  throwIfLost: () => void,
  onBatch: (floor: bigint, registers: readonly Register[]) => Promise<void>,
): Promise<SourceRead> {
  const newId = context.newId ?? randomUUID;
  const leases = new Map<string, { value: string; pttlMs: number }>();
  let settings: Readonly<Record<string, string>> = {};
  let incarnation = '';
  let cursor = '0';
  let floor = 0n;
  // The first batch seals the source with a fresh epoch (the same one on a retry of that batch).
  let seal = newId();
  do {
    throwIfLost();
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
        await onBatch(read.floor, read.registers);
    }
  } while (cursor !== '0');
  return { floor, leases, settings };
}

type RaiseBatch = (
  floor: bigint,
  registers: readonly Register[],
  leases: readonly LiveLease[],
) => Promise<void>;

/**
 * Step 3 streamed: raises the scope with the registers of each batch the sources return, `RAISES_IN_FLIGHT` raise
 * calls at once, while the reads go on (raising is idempotent, order-free and only ever raises, so it need not wait
 * for the merge). A register goes out only when it is above the floor seen so far and above what was already sent
 * for it. Each call carries the highest floor seen so far; `finish` sends the final one. A register sent before a
 * later batch's higher floor (a fold on the source during the scan) may stay below that floor on the scope: a node
 * never answers below its floor (include/decimal-token.lua, read_register), so it is harmless.
 */
class Copier {
  /** Highest value sent (or queued) per register. */
  private readonly sent = new Map<string, bigint>();
  private floor = 0n;
  private pending: Register[] = [];
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

  /** A raise failed: the repair must stop (the failure is the scope's, not a source's). */
  get failed(): boolean {
    return this.failure !== undefined;
  }

  /** Takes one batch's floor and registers; resolves once its full raise batches are sent (not answered). */
  async add(floor: bigint, registers: readonly Register[]): Promise<void> {
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
    leases: readonly LiveLease[],
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

  private async send(registers: readonly Register[], leases: readonly LiveLease[]): Promise<void> {
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

/** Renews the scope's repair marker every third of its ttl while the repair runs; notes when it is lost. */
function keepMarkerAlive(
  context: RepairContext,
  scope: RepairScope,
  repairId: string,
  timing: RepairTiming,
): MarkerKeeper {
  const stopped = new AbortController();
  let lost: RepairRestart | undefined;
  const loseWith = (reason: string): void => {
    lost ??= new RepairRestart(reason);
    if (!stopped.signal.aborted) stopped.abort(lost);
  };
  const renew = async (): Promise<void> => {
    try {
      const renewed = await scope.repairMarker(context.callTimeoutMs, 'renew', repairId, timing.markerTtlMs);
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
      context.reportError(scope.target.index, 'repair-renew', error);
    }
  };
  const stopOrClose = AbortSignal.any([stopped.signal, context.closing]);
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
  return {
    throwIfLost(): void {
      const reason = lost;
      if (reason !== undefined) throw reason;
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
