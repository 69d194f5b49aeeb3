/**
 * Scenarios for the protocol simulation: clients that acquire through the coordinator's real attempt code
 * (protocol/acquire-attempt.ts with tokens/promise-rounds.ts), nodes that lose their state, processes that repair
 * them through the real repair (nodes/repair.ts), registers folded into the floor at any moment, and a checker of
 * G2 run after every event: tokens are unique, and a grant that completed before another started has the smaller
 * token.
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
import { resourceKeys } from '../../../packages/coordinator/src/redlock/keys.js';
import { quorumOf } from '../../../packages/coordinator/src/redlock/quorum.js';
import { driftMs } from '../../../packages/coordinator/src/redlock/validity.js';
import {
  repairNode,
  type RepairContext,
  type RepairNode,
  type RepairTiming,
} from '../../../packages/coordinator/src/nodes/repair.js';
import { TokenProposer } from '../../../packages/coordinator/src/tokens/proposal.js';
import { SimNodeModel } from './sim-node.js';
import { SimNode, SimWorld, type Chooser, type LinkChoices } from './sim-world.js';

/** Wall-clock origin of the simulation: late 2026, so the time-derived guesses are realistic (~2^60.6). */
const EPOCH_MS = 1_795_000_000_000;
export const HOUR_MS = 3_600_000;

/** Which repair runs: the real one, or a deliberately broken one for a negative control. */
export type RepairVariant =
  /** nodes/repair.ts as shipped. */
  | 'real'
  /** The old order: read the sources and copy at once, then sit out (F19's bug). */
  | 'copy-before-sit-out'
  /** The real order, but sources picked from a cached view and read without checking they are initialized (F22). */
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
}

export interface ScenarioSpec {
  readonly nodes: number;
  readonly ttlMs: number;
  readonly maxTtlMs: number;
  readonly clients: readonly ClientSpec[];
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

export const SIM_REPAIR_TIMING: RepairTiming = {
  markerTtlMs: 3_000,
  waitPollMs: 400,
  batchSize: 2,
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
  const models = Array.from({ length: spec.nodes }, (_, i) => new SimNodeModel(i, () => world.time));
  for (const model of models) {
    model.state.incarnation = 'incarnation-0';
    if (spec.seededRegister > 0n) model.state.registers.set(KEYS.token, spec.seededRegister);
  }
  const settings: Readonly<CoordinatorSettings> = resolveOptions({
    nodes: ['redis://sim'],
    maxTtlMs: spec.maxTtlMs,
    nodeTimeoutMs: spec.ttlMs,
    retryJitterMs: 0,
  });
  const quorum = quorumOf(spec.nodes);
  const grants: Grant[] = [];
  let violation: string | null = null;
  /** Nodes that lost their state and are not repaired yet: more than N − quorum is beyond the failure model. */
  const unrepaired = new Set<number>();
  let ids = 0;
  const newId = (): string => `id-${ids++}`;

  const contextFor = (caller: string): ProtocolContext => ({
    nodes: models.map((model) => new SimNode(world, model, caller)),
    quorum,
    settings,
    clock: world.clock(),
    // Every client asks every node: the scripts themselves refuse to vote without an incarnation key, so a stale
    // "it votes" view can only cost a vote, never count an empty node's.
    isVoting: () => true,
    noteAbstentions: () => undefined,
    unavailable: (summary) => new QuorumUnavailableError(summary),
  });

  for (const client of spec.clients) {
    const context = contextFor(client.name);
    const proposer = new TokenProposer(() => EPOCH_MS + world.time + client.skewMs);
    const releaser = new Releaser(context);
    for (const startMs of client.startsMs) {
      world.at(startMs, `${client.name} starts`, () => {
        const startSeq = world.seq;
        const startTime = world.time;
        const leaseId = newId();
        world.note(`${client.name} attempt ${leaseId}`);
        void attemptAcquire(
          context,
          { proposer, releaser, jitter: () => 0 },
          { resource: RESOURCE, keys: KEYS, leaseId, ttlMs: spec.ttlMs },
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
        const nodes = models.map((model) => new SimNode(world, model, caller));
        const context: RepairContext = {
          nodes,
          quorum,
          settings,
          clock: world.clock(),
          callTimeoutMs: 1_000,
          closing: new AbortController().signal,
          status: () => undefined,
          reportError: () => undefined,
          newId,
        };
        const target = nodes[amnesia.node]!;
        const repaired = (): void => {
          if (models[amnesia.node]!.state.incarnation !== null) unrepaired.delete(amnesia.node);
        };
        void runRepairVariant(spec.repair, context, target, models).then(repaired, () => undefined);
      });
    });
  }

  for (const fold of spec.folds) {
    world.at(fold.atMs, `n${fold.node} folds`, () => {
      if (models[fold.node]!.fold(KEYS.token, KEYS.lease)) world.note(`n${fold.node} folded`);
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
  target: RepairNode,
  models: readonly SimNodeModel[],
): Promise<void> {
  if (variant === 'real') {
    await repairNode(context, target, SIM_REPAIR_TIMING);
    return;
  }
  const id = context.newId!();
  if (variant === 'reinitialize-at-once') {
    models[target.index]!.state.incarnation = id;
    return;
  }
  const claim = await target.repairMarker(context.callTimeoutMs, 'claim', id, 1e12);
  if (claim.kind !== 'claimed') return;
  const sitOut = (): Promise<void> =>
    context.clock.sleep(
      context.settings.maxTtlMs + driftMs(context.settings.maxTtlMs, context.settings.driftFactor),
    );
  const required = context.nodes.length - context.quorum + 1;
  const copy = async (values: { floor: bigint; registers: Map<string, bigint> }): Promise<void> => {
    const registers = [...values.registers].filter(([, v]) => v > values.floor);
    await target.repairRaise(context.callTimeoutMs, id, values.floor, registers);
  };
  if (variant === 'copy-before-sit-out') {
    // The bug of F19: the sources are read before promises still in flight to them have landed.
    await copy(await readVerified(context, target, required));
    await sitOut();
  } else {
    // The bug of F22: sources chosen from a cached view (every other node "votes") and read without the check.
    await sitOut();
    const merged = { floor: 0n, registers: new Map<string, bigint>() };
    for (const source of context.nodes.filter((n) => n !== target).slice(0, required)) {
      const state = models[source.index]!.state;
      if (state.floor > merged.floor) merged.floor = state.floor;
      for (const [key, value] of state.registers) {
        if (value > (merged.registers.get(key) ?? 0n)) merged.registers.set(key, value);
      }
    }
    await copy(merged);
  }
  await target.finishRepair(context.callTimeoutMs, id, context.newId!());
}

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
      const read = await source.repairRead(context.callTimeoutMs, cursor, 100, '').catch(() => null);
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
