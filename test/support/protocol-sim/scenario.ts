/**
 * Scenarios for the protocol simulation: clients that acquire through the coordinator's real attempt code
 * (protocol/acquire-attempt.ts with tokens/promise-rounds.ts), nodes that lose their state, processes that repair
 * them through the real repair (nodes/repair.ts), registers folded into the floor at any moment, and a checker of
 * G2 run after every event: tokens are unique, and a grant that completed before another started has the smaller
 * token.
 *
 * Processes need not agree on anything but the nodes: each client has its own ttl, maxTtlMs and nodeTimeoutMs, and
 * its own clock (timers running slow, a monotonic clock that jumps); the repairers have theirs. The repair's read
 * spans several batches (other resources' registers are seeded, and a batch holds one key), and every other event
 * — a promise, a fold, a node losing its state, another repair — may fall between two batches.
 *
 * Clients' wall clocks are skewed (the proposal's time-derived first guess uses them), so the checker sees what the
 * protocol alone guarantees: a client an hour behind proposes tokens far below the others', and only the
 * registers' promises can lift its token above an earlier grant's.
 */
import { QuorumUnavailableError } from '@fenced/shared';
import { resolveOptions, type CoordinatorSettings } from '../../../packages/coordinator/src/options.js';
import { attemptAcquire } from '../../../packages/coordinator/src/protocol/acquire-attempt.js';
import type { ProtocolContext } from '../../../packages/coordinator/src/nodes/protocol-node.js';
import { Releaser } from '../../../packages/coordinator/src/protocol/release.js';
import { resourceKeys } from '../../../packages/coordinator/src/keys/key-layout.js';
import { quorumOf } from '../../../packages/coordinator/src/quorum/quorum.js';
import { driftMs } from '../../../packages/coordinator/src/quorum/validity.js';
import {
  repairNode,
  type RepairContext,
  type RepairNode,
  type RepairTiming,
} from '../../../packages/coordinator/src/nodes/repair.js';
import { TokenProposer } from '../../../packages/coordinator/src/tokens/proposal.js';
import { mutatedScript } from './mutants.js';
import { SimRedisNode } from './sim-redis-node.js';
import { SimNode, SimWorld, type Chooser, type LinkChoices, type ProcessClock } from './sim-world.js';

/** Wall-clock origin of the simulation: late 2026, so the time-derived guesses are realistic (~2^60.6). */
const EPOCH_MS = 1_795_000_000_000;
export const HOUR_MS = 3_600_000;

/** Which repair runs: the real one, or a deliberately broken one for a negative control. */
export type RepairVariant =
  /** nodes/repair.ts as shipped. */
  | 'real'
  /** nodes/repair.ts as shipped, but the nodes ignore seal epochs (the seal is off). */
  | 'seal-off'
  /**
   * The repair before the seal: claim, sit out the repairer's maxTtlMs + drift on the repairer's clock, then read
   * verified sources (no seal), copy, finish. Safe only while every process's grant window fits in that wait.
   */
  | 'sit-out-only'
  /** The real repair, but sources picked from a cached view and read without checking they are initialized (F22). */
  | 'unverified-sources'
  /** No repair at all: the node is initialized again at once, as if nothing had happened (detection off). */
  | 'reinitialize-at-once';

export interface ClientSpec {
  readonly name: string;
  /** Offset of this client's wall clock from true time (negative: behind). */
  readonly skewMs: number;
  /** Virtual times at which the client starts one acquire attempt each. */
  readonly startsMs: readonly number[];
  /** Release a granted lease this long after the grant; undefined: keep it until it expires. */
  readonly releaseAfterMs?: number;
  /** This client's ttl, maxTtlMs and nodeTimeoutMs. @defaultValue the spec's ttlMs and maxTtlMs, nodeTimeoutMs = ttlMs */
  readonly ttlMs?: number;
  readonly maxTtlMs?: number;
  readonly nodeTimeoutMs?: number;
  /** This client's monotonic clock and timers. @defaultValue true time */
  readonly clock?: ProcessClock;
  /**
   * Before each attempt, the client learns every initialized node's current seal epoch, as a process does when it
   * probes the nodes (at start-up, and in its background re-check). @defaultValue false: it learns an epoch only from
   * a SEALED reply
   */
  readonly probes?: boolean;
}

export interface ScenarioSpec {
  readonly nodes: number;
  readonly ttlMs: number;
  readonly maxTtlMs: number;
  readonly clients: readonly ClientSpec[];
  /** The repairers' maxTtlMs and clock (the sit-out-only control waits on them). @defaultValue the spec's, true time */
  readonly repairer?: { readonly maxTtlMs?: number; readonly clock?: ProcessClock };
  /** Idle resources whose registers are seeded on every node, so a repair's read spans several batches. */
  readonly fillerResources?: number;
  /** Node `node` loses its state at `atMs`; repairers start `repairDelaysMs` after it (one process each). */
  readonly amnesias: readonly { node: number; atMs: number; repairDelaysMs: readonly number[] }[];
  /** At `atMs`, node `node` folds the resource's register into its floor (if it has no live lease). */
  readonly folds: readonly { node: number; atMs: number }[];
  /** Initial value of the resource's register on every node (0n: absent). */
  readonly seededRegister: bigint;
  readonly links: LinkChoices;
  readonly repair: RepairVariant;
  /** Bound of the run in events and virtual time. */
  readonly maxSteps?: number;
  /**
   * Keys per repair read batch (SCAN's COUNT) and per raise batch. @defaultValue 1: a read takes one batch per key
   * of the source's keyspace (its node-state keys included), and anything may happen between two
   */
  readonly repairBatchSize?: number;
}

export interface Grant {
  readonly client: string;
  readonly token: bigint;
  readonly startSeq: number;
  readonly endSeq: number;
  readonly startMs: number;
  readonly endMs: number;
}

export interface ScenarioResult {
  readonly grants: readonly Grant[];
  /** The first G2 violation, if any. */
  readonly violation: string | null;
  readonly steps: number;
  readonly log: readonly string[];
}

const RESOURCE = 'sim-resource';
const KEYS = resourceKeys('fenced', RESOURCE);

/** acquire.lua and promise.lua without the seal check: the seal is off. */
const SEAL_OFF = {
  acquire: () =>
    mutatedScript('acquire', '  if caller_epoch ~= epoch then\n    return {13, epoch}\n  end\n', ''),
  promise: () => mutatedScript('promise', 'if ARGV[3] ~= epoch then\n  return {13, epoch}\nend\n', ''),
};

export const SIM_REPAIR_TIMING: RepairTiming = {
  markerTtlMs: 3_000,
  waitPollMs: 400,
  // One key per batch: a read of a source takes one batch per register and lease, and anything may happen between.
  batchSize: 1,
  triesPerBatch: 3,
  maxRestarts: 3,
};

/** Checks G2 for a new grant against every earlier one; returns a description of the first violation. */
export function checkGrant(grants: readonly Grant[], grant: Grant): string | null {
  for (const other of grants) {
    if (other.token === grant.token) {
      return `duplicate token ${grant.token}: ${describe(other)} and ${describe(grant)}`;
    }
    if (other.endSeq < grant.startSeq && other.token > grant.token) {
      return `token went backwards: ${describe(other)} completed before ${describe(grant)} started`;
    }
    if (grant.endSeq < other.startSeq && grant.token > other.token) {
      return `token went backwards: ${describe(grant)} completed before ${describe(other)} started`;
    }
  }
  return null;
}

function describe(g: Grant): string {
  return `${g.client} (token ${g.token}, ${g.startMs}–${g.endMs} ms)`;
}

/** Runs one scenario under one chooser; every nondeterministic decision is the chooser's. */
export async function runScenario(
  spec: ScenarioSpec,
  choose: Chooser,
  options: { log?: boolean } = {},
): Promise<ScenarioResult> {
  const world = new SimWorld(choose, spec.links, options.log === true);
  const models = Array.from({ length: spec.nodes }, (_, i) => new SimRedisNode(i, () => world.time));
  for (const model of models) {
    model.initialize();
    if (spec.repair === 'seal-off') {
      for (const name of ['acquire', 'promise'] as const) model.scriptSources.set(name, SEAL_OFF[name]());
    }
    if (spec.seededRegister > 0n) model.setRegister(KEYS.token, spec.seededRegister);
    for (let i = 0; i < (spec.fillerResources ?? 0); i++) {
      model.setRegister(resourceKeys('fenced', `filler-${i}`).token, 1_000n + BigInt(i));
    }
  }
  const settingsOf = (maxTtlMs: number, nodeTimeoutMs: number): Readonly<CoordinatorSettings> =>
    resolveOptions({ nodes: ['redis://sim'], maxTtlMs, nodeTimeoutMs, retryJitterMs: 0 });
  const repairerSettings = settingsOf(spec.repairer?.maxTtlMs ?? spec.maxTtlMs, spec.ttlMs);
  const quorum = quorumOf(spec.nodes);
  const grants: Grant[] = [];
  let violation: string | null = null;
  /** Nodes that lost their state and are not repaired yet: more than N − quorum is beyond the failure model. */
  const unrepaired = new Set<number>();
  let ids = 0;
  const newId = (): string => `id-${ids++}`;

  const contextFor = (caller: string, client: ClientSpec): ProtocolContext => ({
    nodes: models.map((model) => new SimNode(world, model, caller, client.clock?.timerScale, spec.nodes)),
    quorum,
    settings: settingsOf(
      client.maxTtlMs ?? spec.maxTtlMs,
      client.nodeTimeoutMs ?? client.ttlMs ?? spec.ttlMs,
    ),
    clock: world.clock(client.clock),
    // Every client asks every node: the scripts themselves refuse to vote without an incarnation key, so a stale
    // "it votes" view can only cost a vote, never count an empty node's.
    isVoting: () => true,
    noteAbstentions: () => undefined,
    refreshSettings: () => Promise.resolve(false),
    unavailable: (summary) => new QuorumUnavailableError(summary),
  });

  for (const client of spec.clients) {
    const context = contextFor(client.name, client);
    const ttlMs = client.ttlMs ?? spec.ttlMs;
    const proposer = new TokenProposer(() => EPOCH_MS + world.time + client.skewMs);
    const releaser = new Releaser(context);
    for (const startMs of client.startsMs) {
      world.at(startMs, `${client.name} starts`, () => {
        if (client.probes === true) {
          for (const node of context.nodes as SimNode[]) {
            if (node.model.incarnation() !== null) node.sealEpoch = node.model.seal();
          }
        }
        const startSeq = world.seq;
        const startTime = world.time;
        const leaseId = newId();
        world.note(`${client.name} attempt ${leaseId}`);
        void attemptAcquire(
          context,
          { proposer, releaser, jitter: () => 0 },
          { resource: RESOURCE, keys: KEYS, leaseId, ttlMs },
        ).then(
          (result) => {
            if (result.kind !== 'granted') return;
            const grant: Grant = {
              client: client.name,
              token: result.grant.token,
              startSeq,
              endSeq: world.seq,
              startMs: startTime,
              endMs: world.time,
            };
            world.note(`${client.name} granted ${grant.token}`);
            violation ??= checkGrant(grants, grant);
            grants.push(grant);
            if (client.releaseAfterMs !== undefined) {
              world.at(world.time + client.releaseAfterMs, `${client.name} releases`, () => {
                void releaser.undoAttempt(KEYS, leaseId);
              });
            }
          },
          () => undefined,
        );
      });
    }
  }

  for (const amnesia of spec.amnesias) {
    world.at(amnesia.atMs, `n${amnesia.node} loses its state`, () => {
      if (!unrepaired.has(amnesia.node) && unrepaired.size >= spec.nodes - quorum) return;
      unrepaired.add(amnesia.node);
      models[amnesia.node]!.loseState();
      world.note(`n${amnesia.node} lost its state`);
    });
    amnesia.repairDelaysMs.forEach((delayMs, k) => {
      world.at(amnesia.atMs + delayMs, `repairer ${k} of n${amnesia.node}`, () => {
        const caller = `repairer${k}-n${amnesia.node}`;
        const nodes = models.map(
          (model) => new SimNode(world, model, caller, spec.repairer?.clock?.timerScale, spec.nodes),
        );
        const context: RepairContext = {
          nodes,
          quorum,
          clock: world.clock(spec.repairer?.clock),
          callTimeoutMs: 1_000,
          closing: new AbortController().signal,
          status: () => undefined,
          reportError: () => undefined,
          newId,
        };
        const target = nodes[amnesia.node]!;
        const repaired = (): void => {
          if (models[amnesia.node]!.incarnation() !== null) unrepaired.delete(amnesia.node);
        };
        const timing = {
          ...SIM_REPAIR_TIMING,
          batchSize: spec.repairBatchSize ?? SIM_REPAIR_TIMING.batchSize,
        };
        void runRepairVariant(spec.repair, context, repairerSettings, target, models, timing).then(
          repaired,
          () => undefined,
        );
      });
    });
  }

  for (const fold of spec.folds) {
    world.at(fold.atMs, `n${fold.node} folds`, () => {
      const folded = models[fold.node]!.foldAll();
      if (folded > 0) world.note(`n${fold.node} folded ${folded} registers`);
    });
  }

  await world.run({
    maxSteps: spec.maxSteps ?? 5_000,
    untilMs: Number.MAX_SAFE_INTEGER,
  });
  return { grants, violation, steps: world.steps, log: world.log };
}

async function runRepairVariant(
  variant: RepairVariant,
  context: RepairContext,
  settings: Readonly<CoordinatorSettings>,
  target: RepairNode,
  models: readonly SimRedisNode[],
  timing: RepairTiming,
): Promise<void> {
  if (variant === 'real' || variant === 'seal-off') {
    await repairNode(context, target, timing);
    return;
  }
  const id = context.newId!();
  if (variant === 'reinitialize-at-once') {
    models[target.index]!.initialize(id);
    return;
  }
  const claim = await target.repairMarker(context.callTimeoutMs, 'claim', id, 1e12);
  if (claim.kind !== 'claimed') return;
  const required = context.nodes.length - context.quorum + 1;
  const copy = async (values: { floor: bigint; registers: Map<string, bigint> }): Promise<void> => {
    const registers = [...values.registers].filter(([, v]) => v > values.floor);
    await target.repairRaise(context.callTimeoutMs, id, values.floor, registers, []);
  };
  if (variant === 'sit-out-only') {
    // The repair before the seal: a wait of the repairer's maxTtlMs (+ drift) on the repairer's clock, then an
    // unsealed read. Another process's grant window is its own min(nodeTimeoutMs, ttl) on its own clock.
    await context.clock.sleep(settings.maxTtlMs + driftMs(settings.maxTtlMs, settings.driftFactor));
    await copy(await readVerified(context, target, required));
  } else {
    // The bug of F22: sources chosen from a cached view (every other node "votes") and read without the check.
    const merged = { floor: 0n, registers: new Map<string, bigint>() };
    for (const source of context.nodes.filter((n) => n !== target).slice(0, required)) {
      const node = models[source.index]!;
      node.setSeal(context.newId!());
      if (node.floor() > merged.floor) merged.floor = node.floor();
      for (const [key, value] of node.registers()) {
        if (value > (merged.registers.get(key) ?? 0n)) merged.registers.set(key, value);
      }
    }
    await copy(merged);
  }
  // No new seal epoch on the repaired node: the broken repairs are those of a design without seals.
  await target.finishRepair(context.callTimeoutMs, id, context.newId!(), '', {});
}

/** Reads every other node in full, verified but unsealed; throws unless `required` of them were read. */
async function readVerified(
  context: RepairContext,
  target: RepairNode,
  required: number,
): Promise<{ floor: bigint; registers: Map<string, bigint> }> {
  const merged = { floor: 0n, registers: new Map<string, bigint>() };
  let complete = 0;
  for (const source of context.nodes.filter((n) => n !== target)) {
    let cursor = '0';
    let ok = true;
    let floor = 0n;
    do {
      const read = await source.repairRead(context.callTimeoutMs, cursor, 100, '', '').catch(() => null);
      if (read === null || read.kind !== 'read') {
        ok = false;
        break;
      }
      cursor = read.cursor;
      floor = read.floor;
      for (const [key, value] of read.registers) {
        if (value > (merged.registers.get(key) ?? 0n)) merged.registers.set(key, value);
      }
    } while (cursor !== '0');
    if (ok) {
      if (floor > merged.floor) merged.floor = floor;
      complete++;
    }
  }
  if (complete < required) throw new Error('too few sources');
  return merged;
}
