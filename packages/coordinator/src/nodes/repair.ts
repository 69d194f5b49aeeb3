/**
 * Restart repair (DESIGN §3): a node that lost its state (no incarnation key) votes again only after this.
 *
 * The invariant it restores: for every resource, the repaired node answers at least every token that any grant
 * completed with, so that a later majority containing it still meets every earlier grant's promise (the argument in
 * tokens/promise-rounds.ts). The order of the steps *is* the safety argument:
 *
 * 1. **Claim, then sit out.** Claiming the node's repair marker is also the observation "this node is empty"
 *    (repair-marker.lua refuses if the incarnation key exists). Every grant that counted a promise the node has
 *    since lost started before that loss, hence before the claim, and is decided within its own ttl or not at all
 *    (protocol/acquire-attempt.ts never hands out a lease with validity <= 0). So after `maxTtlMs` (+ drift) from the
 *    claim, every such grant has completed or failed, and each completed grant's promises sit on a majority *without*
 *    this node. Reading earlier is unsafe: a promise still in flight to another node lands after the read, and the
 *    repaired node plus nodes that never saw it form a majority below a completed grant (F19; the simulation finds
 *    it in a few hundred schedules when the sit-out is moved after the copy). The sit-out also lets every lease the
 *    node voted for expire (Redlock's delayed restart).
 * 2. **Read verified sources.** Any `N − quorum + 1` nodes other than this one meet every majority that excludes it.
 *    Each source is read in batches by repair-read.lua, which checks *in the same atomic call* that the source holds
 *    its incarnation key (same one as in its first batch) and no repair marker: a node that is itself empty or under
 *    repair is never a source, whatever this process's cached view says (F22). The floor is taken from each source's
 *    last batch, so registers folded into it during the scan are covered.
 * 3. **Raise, then finish while the marker is ours.** The node's floor becomes the sources' highest floor and every
 *    register above it is copied (repair-raise.lua, batched, each batch retried; raising is idempotent). The marker is
 *    renewed for as long as the repair runs; finish-repair.lua sets the incarnation key only if the marker is still
 *    ours. A node that restarts again during any step loses the marker, and the repair starts over from step 1.
 *
 * At most one process repairs a node (the marker); others wait for it. The cost tracks active resources: idle
 * registers are folded into the floor (fold.lua), and the floor is one key.
 */
import { randomUUID } from 'node:crypto';
import type { CoordinatorSettings } from '../options.js';
import type { ProtocolClock } from './protocol-node.js';
import { driftMs } from '../redlock/validity.js';
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
  repairRead(timeoutMs: number, cursor: string, count: number, incarnation: string): Promise<RepairReadReply>;
  repairRaise(
    timeoutMs: number,
    repairId: string,
    floor: bigint,
    registers: readonly (readonly [string, bigint])[],
  ): Promise<RepairRaiseReply>;
  finishRepair(timeoutMs: number, repairId: string, incarnation: string): Promise<FinishRepairReply>;
}

/** Where a repair is, for `nodeStatus()[i].repair` and the service's `fenced_node_repair*` gauges. */
export interface RepairProgress {
  /**
   * `claiming` (taking the node's repair marker, or starting over), `waiting` (another process repairs it),
   * `sitting-out` (step 1), `reading` (step 2), `copying` (step 3), `finishing` (the final, marker-checked call).
   */
  readonly phase: 'claiming' | 'waiting' | 'sitting-out' | 'reading' | 'copying' | 'finishing';
  /** Token registers raised on the node so far (during and after `copying`). */
  readonly registersCopied?: number;
  /** Token registers to raise (known from `copying` on). */
  readonly registersTotal?: number;
}

export interface RepairContext {
  readonly nodes: readonly RepairNode[];
  readonly quorum: number;
  readonly settings: Pick<CoordinatorSettings, 'maxTtlMs' | 'driftFactor'>;
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
  /** Registers per read batch (SCAN COUNT hint) and per raise batch. */
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
  const { clock, settings } = context;
  const newId = context.newId ?? randomUUID;
  const repairId = newId();
  const timeout = context.callTimeoutMs;

  // Step 1a: claim the marker — or wait while another process's repair runs.
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
  // The claim observed the node empty: every grant that counted a promise it lost started before this moment.
  const claimedAt = clock.now();
  const keeper = keepMarkerAlive(context, target, repairId, timing);
  try {
    // Step 1b: sit out the longest ttl (plus drift) from the claim.
    const sitOutMs = settings.maxTtlMs + driftMs(settings.maxTtlMs, settings.driftFactor);
    context.status(
      target,
      `restarted empty: sits out ${sitOutMs} ms (maxTtlMs + drift) before copying registers and voting again` +
        (restartedBecause === undefined ? '' : ` (${restartedBecause})`),
      { phase: 'sitting-out' },
    );
    await keeper.sleep(claimedAt + sitOutMs - clock.now());

    // Step 2: read N − quorum + 1 verified sources.
    const sources = await readSources(context, target, timing, keeper);

    // Step 3: raise the node, then finish while the marker is still ours.
    const registers = [...sources.registers].filter(([, value]) => value > sources.floor);
    const copying = (copied: number): void =>
      context.status(
        target,
        `restarted empty: copying the floor and ${registers.length} active token registers (${copied} copied)`,
        { phase: 'copying', registersCopied: copied, registersTotal: registers.length },
      );
    copying(0);
    let floorSent = false;
    for (let i = 0; i < registers.length || !floorSent; i += timing.batchSize) {
      keeper.throwIfLost();
      const batch = registers.slice(i, i + timing.batchSize);
      const raised = await retried(timing, () => target.repairRaise(timeout, repairId, sources.floor, batch));
      if (raised.kind === 'no-repair-marker') throw new RepairRestart('its repair marker was lost');
      if (raised.kind === 'corrupt')
        throw new Error('its floor or a register holds something other than a token');
      floorSent = true;
      copying(Math.min(registers.length, i + batch.length));
    }
    keeper.throwIfLost();
    context.status(target, 'restarted empty: registers copied; finishing the repair', {
      phase: 'finishing',
      registersCopied: registers.length,
      registersTotal: registers.length,
    });
    const finished = await retried(timing, () => target.finishRepair(timeout, repairId, newId()));
    if (finished.kind !== 'finished') throw new RepairRestart('its repair marker was lost before the finish');
  } finally {
    keeper.stop();
  }
}

interface SourceRead {
  readonly floor: bigint;
  readonly registers: ReadonlyMap<string, bigint>;
}

/**
 * Reads every other node as a source, in parallel, and merges what at least `N − quorum + 1` of them returned in
 * full: the highest floor, and per register the highest value.
 */
async function readSources(
  context: RepairContext,
  target: RepairNode,
  timing: RepairTiming,
  keeper: MarkerKeeper,
): Promise<SourceRead> {
  const required = context.nodes.length - context.quorum + 1;
  const candidates = context.nodes.filter((n) => n !== target);
  if (candidates.length < required) {
    throw new Error(`needs ${required} other nodes to copy token registers from, has ${candidates.length}`);
  }
  context.status(target, `restarted empty: reading token registers from ${required} of the other nodes`, {
    phase: 'reading',
  });
  const registers = new Map<string, bigint>();
  let floor = 0n;
  let complete = 0;
  const problems: string[] = [];
  await Promise.all(
    candidates.map(async (source) => {
      try {
        const read = await readSource(context, source, timing, keeper);
        if (read.floor > floor) floor = read.floor;
        for (const [key, value] of read.registers) {
          const known = registers.get(key);
          if (known === undefined || value > known) registers.set(key, value);
        }
        complete++;
      } catch (error) {
        if (error instanceof RepairRestart) throw error;
        problems.push(`node ${source.index} (${source.address}): ${messageOf(error)}`);
        context.reportError(source.index, 'repair-read', error);
      }
    }),
  );
  keeper.throwIfLost();
  if (complete < required) {
    throw new Error(
      `only ${complete} of the ${required} source nodes needed could be read${problems.length > 0 ? ` (${problems.join('; ')})` : ''}`,
    );
  }
  return { floor, registers };
}

/** Reads one source in full; throws when it is not a valid source or a batch keeps failing. */
async function readSource(
  context: RepairContext,
  source: RepairNode,
  timing: RepairTiming,
  keeper: MarkerKeeper,
): Promise<SourceRead> {
  const registers = new Map<string, bigint>();
  let incarnation = '';
  let cursor = '0';
  let floor = 0n;
  do {
    keeper.throwIfLost();
    const from = cursor;
    const read = await retried(timing, () =>
      source.repairRead(context.callTimeoutMs, from, timing.batchSize, incarnation),
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
        incarnation = read.incarnation;
        cursor = read.cursor;
        // The floor of the last batch counts: it includes every register folded away during the scan.
        floor = read.floor;
        for (const [key, value] of read.registers) registers.set(key, value);
    }
  } while (cursor !== '0');
  return { floor, registers };
}

interface MarkerKeeper {
  /** Sleeps `ms` (or returns at once for `ms <= 0`); throws RepairRestart when the marker is lost meanwhile. */
  sleep(ms: number): Promise<void>;
  throwIfLost(): void;
  stop(): void;
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
  const stopOrClose = AbortSignal.any([stopped.signal, context.closing]);
  void (async () => {
    const every = Math.max(1, Math.floor(timing.markerTtlMs / 3));
    while (!stopOrClose.aborted) {
      try {
        await context.clock.sleep(every, stopOrClose);
      } catch {
        return;
      }
      try {
        const renewed = await target.repairMarker(
          context.callTimeoutMs,
          'renew',
          repairId,
          timing.markerTtlMs,
        );
        if (renewed.kind !== 'claimed') {
          loseWith(
            renewed.kind === 'initialized'
              ? 'another process initialized it meanwhile'
              : 'its repair marker was lost (it restarted again, or the marker expired)',
          );
          return;
        }
      } catch (error) {
        // A failed renewal is not a loss: the marker lives markerTtlMs, and the next renewal may get through. If it
        // does expire, the raise and finish scripts see that and the repair starts over.
        context.reportError(target.index, 'repair-renew', error);
      }
    }
  })();
  const throwIfLost = (): void => {
    const reason = lost;
    if (reason !== undefined) throw reason;
  };
  return {
    async sleep(ms: number): Promise<void> {
      throwIfLost();
      if (ms > 0) {
        try {
          await context.clock.sleep(ms, stopOrClose);
        } catch (error) {
          throwIfLost();
          throw error;
        }
      }
      throwIfLost();
    },
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
async function retried<T>(timing: RepairTiming, call: () => Promise<T>): Promise<T> {
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
