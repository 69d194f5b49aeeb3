/**
 * The nemesis: a randomized schedule of faults, each cutting the run between two steps (after the `step`-th event of
 * the world: a message applied at a node, a reply read, a timer fired), over long-running processes that drive the
 * coordinator's real code (acquire attempts, release, the restart repair) against nodes running the real Lua scripts
 * (sim-redis-node.ts). The faults:
 *
 * - `amnesia`: a node restarts empty (every key and its script cache gone); a process starts repairing it.
 * - `repair`: another process starts repairing an empty node (the `node`-th of those empty now): the next attempt
 *   after a stopped one.
 * - `stop-repair`: a running repair (the `repair`-th of those running now) stops where it is (the process closes:
 *   its `closing` signal aborts) — after its claim, between two read batches, between two raises, before the finish.
 * - `crash`: a process crashes (its memory is lost; what it already sent may still land) and a new one starts in its
 *   place with the same configuration: a client goes on acquiring, a repairer repairs its node again.
 * - `fold`, `fold-all`: a node (every node) folds its idle registers into its floor (fold.lua).
 * - `pause`: a process stops for a while (its timers and the replies it reads wait; its messages in flight land).
 * - `skew`: a process's monotonic clock jumps.
 * - `start-client`: a process starts with other settings: a longer ttl and maxTtlMs, a short node timeout, slow
 *   timers, the other key layout, another node count, a wall clock an hour off.
 *
 * Message delays, losses and duplicates are chosen from the case's `seed` (explore.ts's randomChooser), as are the
 * clients' pauses between attempts. A case is data (fast-check generates and shrinks it): a failure prints the case,
 * and `runNemesis(case)` replays it exactly. After the run, the history checker (history.ts) checks G2 over every
 * pair of completed grants, and checkers.ts G3, G4 and G5 over the modelled guard's history (guard-model.ts): every
 * client, after a grant, fences in and writes through the guard, extends and inspects (sim-holder.ts).
 */
import fc from 'fast-check';
import { QuorumUnavailableError } from '@fenced/shared';
import { seededRandom } from '@fenced/test-utils/seeded-random';
import { settingsRecord } from '../../../packages/coordinator/src/nodes/cluster-settings.js';
import type { ProtocolContext } from '../../../packages/coordinator/src/nodes/protocol-node.js';
import { repairNode, type RepairContext } from '../../../packages/coordinator/src/nodes/repair.js';
import { repairEmptySlots } from '../../../packages/coordinator/src/nodes/cluster/slot-repair.js';
import type { NodeConnection } from '../../../packages/coordinator/src/nodes/node-connection.js';
import { keySlot } from '../../../packages/coordinator/src/keys/slots.js';
import { resolveOptions } from '../../../packages/coordinator/src/options.js';
import { Releaser } from '../../../packages/coordinator/src/protocol/release.js';
import { resourceKeys, type KeyLayout } from '../../../packages/coordinator/src/keys/key-layout.js';
import { quorumOf } from '../../../packages/coordinator/src/quorum/quorum.js';
import type { ScriptName } from '../../../packages/coordinator/src/scripts/script-results.js';
import { TokenProposer } from '../../../packages/coordinator/src/tokens/proposal.js';
import { coordinatorScript } from '../lua-redis/lua-redis.js';
import { randomChooser } from './explore.js';
import { checkHistory, lowerExtendTokens } from './checkers.js';
import { GUARD_VARIANTS, GuardModel, type GuardVariant } from './guard-model.js';
import { g2Violations, type GrantRecord } from './history.js';
import { mutatedScript } from './mutants.js';
import { HOUR_MS, SIM_REPAIR_TIMING } from './scenario.js';
import { acquireRetried, holdLease, newHolderHistory, watchReleases } from './sim-holder.js';
import { SimRedisNode } from './sim-redis-node.js';
import {
  CLUSTER_STEPS,
  clusterFaultArbitrary,
  f29Progress,
  lookForSlotGaps,
  strikeClusterFault,
  type ClusterFault,
  type ClusterRun,
} from './cluster-faults.js';
import { SimCluster, SimClusterMember } from './sim-cluster-member.js';
import { SimNode, SimWorld, type ProcessClock, type ProcessGate } from './sim-world.js';

const EPOCH_MS = 1_795_000_000_000;
/**
 * Clients pick one per attempt: a resource may stay idle long enough to be folded while others are busy. A case
 * uses one or all three (the seed decides): one node's floor holds every resource's folded tokens, so with one
 * resource a floor says more about it.
 */
const ALL_RESOURCES = ['sim-resource', 'sim-resource-2', 'sim-resource-3'] as const;
/** The cluster's settings, recorded on every node as a fresh-cluster initialization records them. */
const TTL_MS = 1_000;
const MAX_TTL_MS = 1_000;
/** Events per run. */
export const NEMESIS_STEPS = 1_500;
/** Events a case with Cluster members runs after NEMESIS_STEPS (no cut at an event is drawn past NEMESIS_STEPS). */
export const CLUSTER_TAIL_STEPS = 500;

/**
 * The steps the coverage counts report: every script the simulated processes run, the fold pass, a completed grant
 * and a guarded write applied at the modelled guard.
 */
export const COVERAGE_KEYS = [
  'start',
  'acquire',
  'promise',
  'release',
  'extend',
  'inspect',
  'guard-write',
  'repair-marker claim',
  'repair-marker renew',
  'repair-read (seal)',
  'repair-read',
  'repair-raise',
  'finish-repair',
  'fold',
  'grant',
] as const;

export type StepName = (typeof COVERAGE_KEYS)[number];

export type ClientSettings =
  'same' | 'long-ttl' | 'short-timeout' | 'slow-timers' | 'other-layout' | 'other-node-count';

export type Fault =
  | { readonly kind: 'amnesia'; readonly node: number }
  | { readonly kind: 'repair'; readonly node: number }
  | { readonly kind: 'stop-repair'; readonly repair: number }
  | { readonly kind: 'crash'; readonly process: number }
  | { readonly kind: 'fold'; readonly node: number }
  | { readonly kind: 'fold-all' }
  | { readonly kind: 'pause'; readonly process: number; readonly ms: number }
  | { readonly kind: 'skew'; readonly process: number; readonly ms: number }
  | { readonly kind: 'start-client'; readonly settings: ClientSettings; readonly skewMs: number }
  | ClusterFault;

export interface Cut {
  /**
   * The fault strikes right after the world's `step`-th event (a message applied, a reply read, a timer fired) or,
   * with `after`, right after the `step`-th run of that step anywhere (a script by name, as in COVERAGE_KEYS: the
   * 3rd `repair-raise`, the 5th `acquire`), before anything else happens.
   */
  readonly step: number;
  readonly after?: StepName | (typeof CLUSTER_STEPS)[number];
  readonly fault: Fault;
}

export interface NemesisCase {
  readonly nodes: number;
  /** Message delays, losses and duplicates, the clients' wall-clock skews and their pauses between attempts. */
  readonly seed: number;
  readonly cuts: readonly Cut[];
  /**
   * Swarm testing: the fault kinds this case uses (cuts of other kinds are skipped), so that a case concentrates on a
   * few kinds and each strikes more often. @defaultValue every kind
   */
  readonly palette?: readonly Fault['kind'][];
  /**
   * The last `members` nodes are Redis Cluster members of `shards` shards each (sim-cluster-member.ts), the others
   * standalone. @defaultValue every node standalone
   */
  readonly cluster?: { readonly members: number; readonly shards: number };
}

/** Which protection is on: the shipped scripts, or a negative control's mutant. */
export type NemesisVariant =
  | 'real'
  /** The floor rule off (as before the F27 fix): a present register is the answer even below the floor. */
  | 'floor-rule-off'
  /** acquire.lua and promise.lua ignore the seal epoch. */
  | 'seal-off'
  /** The settings check off (as before the F28 fix): a caller's node count and key layout are not compared. */
  | 'settings-check-off'
  /** release.lua deletes the lease key whoever holds it (no compare before the delete: F11). */
  | 'release-ownership-off'
  /** extend.lua prolongs the lease key whoever holds it (no compare before the PEXPIRE: F11). */
  | 'extend-ownership-off'
  /** acquire.lua writes the record's token as its proposal even over a higher token of the same lease (as before). */
  | 'record-token-off'
  /** The modelled guard with one protection off (guard-model.ts). */
  | GuardVariant
  /**
   * The slot rule off (DESIGN §3c, as before the F29 fix): a Cluster slot votes while its incarnation key is present,
   * whatever shard stamped it and whichever of its keys are missing, and records promises in each resource's
   * register (include/node-state.lua's stamp taken as absent).
   */
  | 'slot-rule-off';

export interface NemesisResult {
  readonly grants: readonly GrantRecord[];
  /** The first violation of the history, if any: G2, then G3, G4, G5, then the lease retries' checks. */
  readonly violation: string | null;
  /** Every violation, by checker (history.ts's G2; checkers.ts's G3, G4, G5 and lease retries). */
  readonly checks: Readonly<Record<'g2' | 'g3' | 'g4' | 'g5' | 'leases', readonly string[]>>;
  /** Guarded transactions committed at the modelled guard. */
  readonly commits: number;
  /** Extends that reported a token below their grant's (checkers.ts `lowerExtendTokens`; each also a violation). */
  readonly lowerExtendTokens: number;
  /** Every step that ran at least once (a script by name, as in COVERAGE_KEYS). */
  readonly stepsRun: ReadonlySet<string>;
  readonly steps: number;
  /** Cuts that struck (a cut past the end of the run does not). */
  readonly cutsFired: number;
  /** For each step a cut struck right after (a script by name, or a fold pass): the keys of `COVERAGE_KEYS`. */
  readonly cutAfter: ReadonlySet<string>;
  /**
   * Whether a node that votes held a register below its floor at some point (checked after every cut and at the
   * end): the state F27 leaves, where only the floor rule keeps the answer at the floor.
   */
  readonly shadowed: boolean;
  /**
   * Coverage signals for the guided search (guided.ts): every (step, fault) pair a cut struck at (`cut:<step>:<kind>`),
   * and the pieces of F27's chain this run reached (`F27_CHAIN`, in their order).
   */
  readonly features: ReadonlySet<string>;
  /**
   * The furthest piece of `F27_CHAIN` this run reached (1–10; 0 for none); in a case with Cluster members, of
   * `F29_CHAIN` (cluster-faults.ts).
   */
  readonly progress: number;
  readonly log: readonly string[];
}

/**
 * The pieces of F27's chain, in order, as states a run can be seen in (checked after every cut and every grant; a
 * resource's highest completed grant is g):
 *
 * 1. `missed`: a grant completed while some voting node holds that resource's register below the token (its
 *    promise missed the node).
 * 2. `amnesia-of-holder`: a node restarted empty while, for some resource, it held a register above another node's.
 * 3. `partial-below-granted`: a node being repaired (no incarnation yet) holds a copied register below g (copied from
 *    a node that missed g).
 * 4. `stopped-partial`: a repair stopped (or its process crashed) in that state.
 * 5. `fold-while-partial`: a fold struck in that state.
 * 6. `repaired-below-granted`: a node that restarted empty votes again and holds a register below g.
 * 7. `shadowed`: a voting node holds a resource's register below its own floor (counted only in a case with one
 *    resource: with several, a node's floor holds every resource's folded tokens, and a register leased during a fold
 *    is below it in the ordinary way; those are signals of their own, `… (several resources)`).
 * 8. `shadowed-below-granted`: that register is below g, and the floor at least g.
 * 9. `shadowed-gap`: F27's whole state: besides, another voting node answers below g — without the floor rule, a
 *    quorum of the two answers below g.
 * 10. `grant-below-granted`: after that state, a grant below one completed earlier for the resource (when the
 *    earlier one completed before the later one started, G2 is violated). Without the state before, it is a signal
 *    of its own (`… (no gap before)`: overlapping grants may come in any token order).
 */
export const F27_CHAIN = [
  'missed',
  'amnesia-of-holder',
  'partial-below-granted',
  'stopped-partial',
  'fold-while-partial',
  'repaired-below-granted',
  'shadowed',
  'shadowed-below-granted',
  'shadowed-gap',
  'grant-below-granted',
] as const;

/** Scripts whose mutant a variant runs: every script that includes the text replaced. */
function mutants(variant: NemesisVariant): Map<ScriptName, string> {
  const out = new Map<ScriptName, string>();
  const replace = (names: readonly ScriptName[], from: string, to: string): void => {
    for (const name of names) {
      if (coordinatorScript(name).source.includes(from)) out.set(name, mutatedScript(name, from, to));
    }
  };
  const all: ScriptName[] = [
    'acquire',
    'promise',
    'extend',
    'release',
    'inspect',
    'repair-marker',
    'repair-read',
    'repair-raise',
    'finish-repair',
    'fold',
  ];
  const slotScripts: ScriptName[] = ['repair-read-slot', 'fold-slot', 'probe-shard', 'settings'];
  if (variant === 'slot-rule-off') {
    replace(
      [...all, ...slotScripts],
      "  local at = string.find(incarnation, '@', 1, true)\n",
      '  local at = nil\n',
    );
  }
  if (variant === 'floor-rule-off') replace(all, '  return max_token(cur, floor)\nend', '  return cur\nend');
  if (variant === 'seal-off') {
    replace(['acquire'], '  if caller_epoch ~= epoch then\n    return {13, epoch}\n  end\n', '');
    replace(['promise'], 'if ARGV[3] ~= epoch then\n  return {13, epoch}\nend\n', '');
  }
  if (variant === 'release-ownership-off') {
    replace(
      ['release'],
      "  if lease_holder(value) ~= lease_id then\n    return {2}\n  end\n  redis.call('DEL', lease_key)",
      "  redis.call('DEL', lease_key)",
    );
  }
  if (variant === 'extend-ownership-off') {
    replace(
      ['extend'],
      "if value == false or lease_holder(value) ~= ARGV[1] then\n  return {2}\nend\nredis.call('PEXPIRE', KEYS[3], ARGV[2])",
      "if value == false then\n  return {2}\nend\nredis.call('PEXPIRE', KEYS[3], ARGV[2])",
    );
  }
  if (variant === 'record-token-off') {
    replace(
      ['acquire'],
      "local record = lease_id .. '|' .. record_token(record_key, lease_id, proposal)",
      "local record = lease_id .. '|' .. proposal",
    );
  }
  if (variant === 'settings-check-off') {
    replace(
      all,
      'local function settings_mismatch(recorded, node_count, key_layout)\n',
      'local function settings_mismatch(recorded, node_count, key_layout)\n  do return nil end\n',
    );
  }
  if (variant !== 'real' && !isGuardVariant(variant) && out.size === 0)
    throw new Error(`variant ${variant}: no script changed`);
  return out;
}

function isGuardVariant(variant: NemesisVariant): variant is GuardVariant {
  return (GUARD_VARIANTS as readonly string[]).includes(variant);
}

/** What a cut struck after: the script of the last message applied (`repair-read (seal)` is the sealing batch). */
function stepName(label: string): string {
  const what = label.slice(label.indexOf(' ') + 1);
  return what
    .replace(/ t=\d+$/, '')
    .replace(/ floor=\d+$/, '')
    .replace(/^repair-marker (claim|renew)$/, 'repair-marker $1');
}

interface Process {
  readonly name: string;
  readonly gate: ProcessGate;
  readonly kind: 'client' | 'repairer';
  /** How to start it again after a crash. */
  readonly restart: () => void;
  /** A repairer's node and its closing signal. */
  readonly node?: number;
  readonly closing?: AbortController;
}

/** Runs one case; every nondeterministic decision comes from the case. */
export async function runNemesis(
  c: NemesisCase,
  options: { variant?: NemesisVariant; log?: boolean; maxSteps?: number } = {},
): Promise<NemesisResult> {
  const variant = options.variant ?? 'real';
  const random = seededRandom(c.seed ^ 0x6e6d);
  const int = (min: number, max: number): number => min + Math.floor(random() * (max - min + 1));
  const world = new SimWorld(
    randomChooser(c.seed, 0.6),
    { delaysMs: [1, 15, 600, 3 * TTL_MS], losses: true, duplicates: true },
    options.log === true,
  );
  const n = c.nodes;
  const quorum = quorumOf(n);
  const replaced = mutants(variant);
  const keysOf = (resource: string, layout: KeyLayout) => resourceKeys('fenced', resource, layout);
  const seeded = random() < 0.5 ? 0n : 1_900_000_000_000_000_000n;
  const RESOURCES = random() < 0.5 ? ALL_RESOURCES.slice(0, 1) : ALL_RESOURCES;
  const fillers = int(0, 3);
  const clusterMembers = Math.min(c.cluster?.members ?? 0, n);
  const clusterSlots = [
    ...RESOURCES.map((r) => keySlot(keysOf(r, 'fenced').token)),
    ...Array.from({ length: fillers }, (_, i) => keySlot(resourceKeys('fenced', `filler-${i}`).token)),
  ];
  const models: (SimRedisNode | SimCluster)[] = Array.from({ length: n }, (_, i) =>
    i >= n - clusterMembers
      ? new SimCluster(i, () => world.time, c.cluster?.shards ?? 2, clusterSlots)
      : new SimRedisNode(i, () => world.time),
  );
  const clusters = models.filter((m): m is SimCluster => m instanceof SimCluster);
  const standalone = models.filter((m): m is SimRedisNode => m instanceof SimRedisNode);
  /** One process's connection to node `i`: a SimNode, or a SimClusterMember for a Cluster member. */
  const connect = (
    model: SimRedisNode | SimCluster,
    name: string,
    scale: number | undefined,
    count: number,
    gate: ProcessGate,
  ) =>
    model instanceof SimCluster
      ? new SimClusterMember(world, model, name, scale, count, gate)
      : new SimNode(world, model, name, scale, count, gate);
  for (const model of models) {
    for (const [name, source] of replaced) model.scriptSources.set(name, source);
    const settings = settingsRecord({ maxTtlMs: MAX_TTL_MS, nodeCount: n, keyLayout: 'fenced' });
    if (model instanceof SimCluster) model.initialize(settings);
    else {
      model.initialize();
      model.setSettings(settings);
    }
    if (seeded > 0n) for (const r of RESOURCES) model.setRegister(keysOf(r, 'fenced').token, seeded);
    for (let i = 0; i < fillers; i++)
      model.setRegister(resourceKeys('fenced', `filler-${i}`).token, 1_000n + BigInt(i));
  }

  const grants: GrantRecord[] = [];
  const guard = new GuardModel(isGuardVariant(variant) ? variant : null);
  const held = newHolderHistory();
  // A standalone node's releases are watched for trespasses (sim-holder.ts); a Cluster member's are not.
  const watched = models.map((model) =>
    model instanceof SimRedisNode ? watchReleases(model, world, held) : model,
  );
  const processes: Process[] = [];
  const cutAfter = new Set<string>();
  let lastStep = 'start';
  const unrepaired = new Set<number>();
  let ids = 0;
  const newId = (): string => `id-${ids++}`;
  const newGate = (): ProcessGate => ({ dead: false, pausedUntil: 0, offsetMs: 0 });
  const settingsOf = (o: { maxTtlMs: number; nodeTimeoutMs: number }) =>
    resolveOptions({ nodes: ['redis://sim'], ...o, retryJitterMs: 0 });

  const startClient = (settings: ClientSettings, skewMs: number): void => {
    const name = `c${processes.length}`;
    const gate = newGate();
    const ttlMs = settings === 'long-ttl' ? 3 * TTL_MS : TTL_MS;
    const clock: ProcessClock = settings === 'slow-timers' ? { timerScale: 3 } : {};
    const layout: KeyLayout = settings === 'other-layout' ? 'redlock' : 'fenced';
    const nodeCount = settings === 'other-node-count' ? (n === 3 ? 5 : 3) : n;
    const context: ProtocolContext = {
      nodes: watched.map((model) => connect(model, name, clock.timerScale, nodeCount, gate)),
      quorum,
      settings: settingsOf({
        maxTtlMs: settings === 'long-ttl' ? 60_000 : MAX_TTL_MS,
        nodeTimeoutMs: settings === 'short-timeout' ? 50 : ttlMs,
      }),
      clock: world.clock(clock, gate),
      isVoting: () => true,
      noteAbstentions: () => undefined,
      refreshSettings: () => Promise.resolve(false),
      unavailable: (summary) => new QuorumUnavailableError(summary),
    };
    const proposer = new TokenProposer(() => EPOCH_MS + world.time + skewMs + gate.offsetMs);
    const releaser = new Releaser(context);
    const own = seededRandom(c.seed ^ (processes.length * 0x9e37));
    const holder = {
      name,
      world,
      gate,
      protocol: context,
      releaser,
      guard,
      history: held,
      random: seededRandom(c.seed ^ (processes.length * 0x9e37) ^ 0x601d),
      onStep: (step: string) => stepDone(step),
    };
    processes.push({ name, gate, kind: 'client', restart: () => startClient(settings, skewMs) });
    const loop = async (): Promise<void> => {
      for (;;) {
        await context.clock.sleep(Math.floor(own() * 4 * ttlMs));
        const resource = RESOURCES[Math.floor(own() * RESOURCES.length)]!;
        const keys = keysOf(resource, layout);
        const startSeq = world.seq;
        const startMs = world.time;
        const leaseId = newId();
        world.note(`${name} attempt ${leaseId}`);
        const result = await acquireRetried(
          context,
          { proposer, releaser },
          { resource, keys, leaseId, ttlMs },
          holder.random() < 0.5,
        );
        if (result?.kind !== 'granted') continue;
        world.note(`${name} granted ${result.grant.token}`);
        grants.push({
          resource,
          process: name,
          token: result.grant.token,
          startSeq,
          endSeq: world.seq,
          startMs,
          endMs: world.time,
        });
        noteGrant(resource, result.grant.token);
        stepDone('grant');
        const grant = {
          resource,
          process: name,
          token: result.grant.token,
          leaseId,
          startSeq,
          endSeq: grants.at(-1)!.endSeq,
        };
        await holdLease(holder, grant, keys, result.grant, 1 + Math.floor(own() * ttlMs));
        await releaser.undoAttempt(keys, leaseId).catch(() => undefined);
      }
    };
    void loop();
  };

  const startRepairer = (node: number): void => {
    if (models[node]!.incarnation() !== null) return;
    if (models[node] instanceof SimCluster) {
      startSlotRepairer(node);
      return;
    }
    const name = `r${processes.length}-n${node}`;
    const gate = newGate();
    const closing = new AbortController();
    processes.push({ name, gate, kind: 'repairer', node, closing, restart: () => startRepairer(node) });
    const nodes = models.map((model) => connect(model, name, 1, n, gate));
    const context: RepairContext = {
      nodes,
      quorum,
      clock: world.clock({}, gate),
      callTimeoutMs: TTL_MS,
      closing: closing.signal,
      status: () => undefined,
      reportError: () => undefined,
      newId,
    };
    // A repair that ends with the node still empty (stopped, crashed, given up) is taken up again by a process that
    // notices the node empty (NodeSet repairs a node its probe finds empty): another repairer starts at once, and
    // waits for the stopped one's marker to expire.
    const retry = (): void => {
      if (gate.dead || closing.signal.aborted) {
        world.processAt(undefined, world.time, `retry repair of n${node}`, () => startRepairer(node));
      }
    };
    void repairNode(context, nodes[node]!, SIM_REPAIR_TIMING).then(() => {
      if (models[node]!.incarnation() !== null) unrepaired.delete(node);
    }, retry);
  };

  /**
   * The slot repair of a Cluster member (the coordinator's repairEmptySlots): every slot of it that a probe finds
   * unable to vote, repaired from the same slot of the other members. Taken up again, as a standalone repair is, when
   * it stops or leaves slots empty while the member still has slots that do not vote.
   */
  const startSlotRepairer = (node: number): void => {
    const name = `r${processes.length}-n${node}`;
    const gate = newGate();
    const closing = new AbortController();
    processes.push({ name, gate, kind: 'repairer', node, closing, restart: () => startSlotRepairer(node) });
    const nodes = models.map((model) => connect(model, name, 1, n, gate));
    const context: RepairContext = {
      nodes,
      quorum,
      clock: world.clock({}, gate),
      callTimeoutMs: TTL_MS,
      closing: closing.signal,
      status: () => undefined,
      reportError: () => undefined,
      newId,
    };
    const target = nodes[node] as SimClusterMember;
    const again = (): void => {
      if (gate.dead || models[node]!.incarnation() !== null) return;
      world.processAt(
        undefined,
        world.time + SIM_REPAIR_TIMING.markerTtlMs,
        `retry slot repair of n${node}`,
        () => startSlotRepairer(node),
      );
    };
    void repairEmptySlots(
      context,
      nodes as unknown as readonly NodeConnection[],
      target.asClusterMember(),
      SIM_REPAIR_TIMING,
    ).then(() => {
      if (models[node]!.incarnation() !== null) unrepaired.delete(node);
      else again();
    }, again);
  };

  const strike = (fault: Fault): void => {
    const processAt = (i: number): Process | undefined =>
      processes.length === 0 ? undefined : processes[i % processes.length];
    world.note(`nemesis: ${JSON.stringify(fault)}`);
    switch (fault.kind) {
      case 'amnesia': {
        const node = fault.node % n;
        // More than N − quorum nodes without their state is beyond what any quorum protocol survives.
        if (!unrepaired.has(node) && unrepaired.size >= n - quorum) return;
        unrepaired.add(node);
        models[node]!.loseState();
        startRepairer(node);
        return;
      }
      case 'repair': {
        const empty = models.filter((m) => m.incarnation() === null);
        if (empty.length > 0) startRepairer(empty[fault.node % empty.length]!.index);
        return;
      }
      case 'stop-repair': {
        const running = processes.filter((p) => p.closing?.signal.aborted === false && !p.gate.dead);
        running[fault.repair % Math.max(1, running.length)]?.closing!.abort(
          new Error('closed by the nemesis'),
        );
        return;
      }
      case 'crash': {
        const p = processAt(fault.process);
        if (p === undefined || p.gate.dead) return;
        p.gate.dead = true;
        p.restart();
        return;
      }
      case 'fold':
        models[fault.node % n]!.foldAll();
        return;
      case 'fold-all':
        for (const model of models) model.foldAll();
        return;
      case 'pause': {
        const p = processAt(fault.process);
        if (p !== undefined) p.gate.pausedUntil = Math.max(p.gate.pausedUntil, world.time + fault.ms);
        return;
      }
      case 'skew': {
        const p = processAt(fault.process);
        if (p !== undefined) p.gate.offsetMs += fault.ms;
        return;
      }
      case 'start-client':
        startClient(fault.settings, fault.skewMs);
        return;
      case 'shard-amnesia':
      case 'migrate-slot':
        strikeClusterFault(clusterRun, fault);
        return;
    }
  };

  const skews = [0, -HOUR_MS, HOUR_MS, -1_234];
  for (let i = 0; i < (n === 3 ? 2 : 3); i++) startClient('same', skews[int(0, skews.length - 1)]!);

  let shadowed = false;
  const features = new Set<string>();
  const tokenKeys = RESOURCES.map((r) => keysOf(r, 'fenced').token);
  /** The highest token granted (completed) for each resource so far. */
  const granted = new Map<string, bigint>();
  const lookForShadows = (): void => {
    if (clusters.length > 0) lookForSlotGaps(clusterRun);
    for (const model of standalone) {
      if (model.incarnation() === null) continue;
      const floor = model.floor();
      for (const [key, value] of model.registers()) {
        if (value >= floor) continue;
        shadowed = true;
        if (!tokenKeys.includes(key)) continue;
        // With several resources a node's floor holds the others' tokens too, so a register below it is ordinary (a
        // resource leased during a fold): only with one resource is it F27's piece.
        const piece = (name: string): string =>
          tokenKeys.length === 1 ? name : `${name} (several resources)`;
        features.add(piece('shadowed'));
        // F27's whole state: a completed grant's token g above the shadowed register and at most the floor, and
        // another voting node answering below g.
        const g = granted.get(key) ?? 0n;
        if (value >= g || g > floor) continue;
        features.add(piece('shadowed-below-granted'));
        if (
          models.some((other) => other !== model && other.incarnation() !== null && other.answer(key) < g)
        ) {
          features.add(piece('shadowed-gap'));
        }
      }
    }
    if (partialCopy()) features.add('partial-below-granted');
    for (const model of models) {
      if (model.amnesias === 0 || model.incarnation() === null) continue;
      for (const key of tokenKeys) {
        const register = model.register(key);
        if (register !== undefined && register < (granted.get(key) ?? 0n))
          features.add('repaired-below-granted');
      }
    }
  };
  /** A node being repaired (no incarnation yet) that already holds a copied register below a granted token. */
  const partialCopy = (): boolean =>
    models.some(
      (model) =>
        model.incarnation() === null &&
        tokenKeys.some((key) => {
          const copied = model.register(key);
          return copied !== undefined && copied < (granted.get(key) ?? 0n);
        }),
    );
  const noteGrant = (resource: string, token: bigint): void => {
    const key = keysOf(resource, 'fenced').token;
    if (token < (granted.get(key) ?? 0n) && features.has('slot-gap'))
      features.add('slot-grant-below-granted');
    if (token < (granted.get(key) ?? 0n)) {
      features.add(
        features.has('shadowed-gap') ? 'grant-below-granted' : 'grant-below-granted (no gap before)',
      );
    }
    if (token > (granted.get(key) ?? 0n)) granted.set(key, token);
    if (models.some((model) => model.incarnation() !== null && (model.register(key) ?? 0n) < token)) {
      features.add('missed');
    }
    lookForShadows();
  };
  /** Before a fault strikes: the chain's pieces it makes. */
  const beforeStrike = (fault: Fault): void => {
    if (fault.kind === 'amnesia') {
      const node = models[fault.node % n]!;
      const holder = tokenKeys.some((key) => {
        const mine = node.register(key);
        return (
          mine !== undefined && models.some((other) => other !== node && (other.register(key) ?? 0n) < mine)
        );
      });
      if (holder && node.incarnation() !== null) features.add('amnesia-of-holder');
    }
    if ((fault.kind === 'stop-repair' || fault.kind === 'crash') && partialCopy())
      features.add('stopped-partial');
    if (fault.kind.startsWith('fold') && partialCopy()) features.add('fold-while-partial');
  };
  const clusterRun: ClusterRun = {
    world,
    clusters,
    features,
    tokenKeys,
    granted,
    stepDone: (step) => stepDone(step),
    repair: (index) => startRepairer(index),
    quorum,
    votersBelow: (key, g) =>
      models.filter((model) =>
        model instanceof SimCluster
          ? !model.migrations.has(keySlot(key)) && model.slotVotes(keySlot(key)) && model.answer(key) < g
          : model.incarnation() !== null && model.answer(key) < g,
      ).length,
    mayLose: (index) =>
      unrepaired.has(index) || unrepaired.size < n - quorum ? (unrepaired.add(index), true) : false,
  };
  const inPalette = (cut: Cut): boolean => c.palette === undefined || c.palette.includes(cut.fault.kind);
  const cuts = c.cuts
    .filter((cut) => cut.after === undefined && inPalette(cut))
    .sort((a, b) => a.step - b.step);
  /** Cuts after the n-th run of a step, by step name. */
  const stepCuts = new Map<string, Cut[]>();
  for (const cut of c.cuts) {
    if (cut.after !== undefined && inPalette(cut))
      stepCuts.set(cut.after, [...(stepCuts.get(cut.after) ?? []), cut]);
  }
  const runsOf = new Map<string, number>();
  let next = 0;
  let fired = 0;
  world.onApply = (label) => stepDone(stepName(label));
  function stepDone(step: string): void {
    lastStep = step;
    const count = (runsOf.get(lastStep) ?? 0) + 1;
    runsOf.set(lastStep, count);
    for (const cut of stepCuts.get(lastStep) ?? []) {
      if (cut.step !== count) continue;
      cutAfter.add(lastStep);
      features.add(`cut:${lastStep}:${cut.fault.kind}`);
      beforeStrike(cut.fault);
      strike(cut.fault);
      lookForShadows();
      fired++;
    }
  }
  await world.run({
    // A case with Cluster members runs CLUSTER_TAIL_STEPS events more after the last a cut can strike at: a slot move
    // takes tens of events, and what it left behind needs grants after it to show.
    maxSteps: options.maxSteps ?? NEMESIS_STEPS + (clusters.length > 0 ? CLUSTER_TAIL_STEPS : 0),
    untilMs: Number.MAX_SAFE_INTEGER,
    afterEach: () => {
      while (next < cuts.length && cuts[next]!.step <= world.steps) {
        cutAfter.add(lastStep);
        features.add(`cut:${lastStep}:${cuts[next]!.fault.kind}`);
        beforeStrike(cuts[next]!.fault);
        strike(cuts[next]!.fault);
        lookForShadows();
        if (cuts[next]!.fault.kind.startsWith('fold')) lastStep = 'fold';
        next++;
        fired++;
      }
    },
  });
  // Nothing of a crashed or finished run may go on in the background: every process stops here.
  for (const p of processes) {
    p.gate.dead = true;
    p.closing?.abort(new Error('run over'));
  }
  lookForShadows();
  const checks = {
    g2: g2Violations(grants).map((v) => v.text),
    ...checkHistory({ commits: guard.commits, ...held }),
  };
  const progress =
    clusters.length > 0
      ? f29Progress(features)
      : F27_CHAIN.reduce((max, piece, i) => (features.has(piece) ? i + 1 : max), 0);
  return {
    grants,
    violation: Object.values(checks).flat()[0] ?? null,
    checks,
    commits: guard.commits.length,
    lowerExtendTokens: lowerExtendTokens(held.extensions),
    stepsRun: new Set(runsOf.keys()),
    steps: world.steps,
    cutsFired: fired,
    cutAfter,
    shadowed,
    features,
    progress,
    log: world.log,
  };
}

export const FAULT_KINDS: readonly Fault['kind'][] = [
  'amnesia',
  'repair',
  'stop-repair',
  'crash',
  'fold',
  'fold-all',
  'pause',
  'skew',
  'start-client',
];

const process = fc.nat({ max: 7 });
const node = fc.nat({ max: 4 });

/** One fault; weights favour what F27 needs (losses, repairs stopped and restarted, folds), but every kind appears. */
export const faultArbitrary: fc.Arbitrary<Fault> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('amnesia' as const), node }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('repair' as const), node }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('stop-repair' as const), repair: node }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('crash' as const), process }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('fold' as const), node }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('fold-all' as const) }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('pause' as const),
      process,
      ms: fc.constantFrom(50, 600, 3_000),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('skew' as const),
      process,
      ms: fc.constantFrom(-2_000, 2_000, 5_000),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('start-client' as const),
      settings: fc.constantFrom<ClientSettings>(
        'same',
        'long-ttl',
        'short-timeout',
        'slow-timers',
        'other-layout',
        'other-node-count',
      ),
      skewMs: fc.constantFrom(0, -HOUR_MS, HOUR_MS),
    }),
  },
);

export const cutArbitrary: fc.Arbitrary<Cut> = fc.oneof(
  fc.record({ step: fc.nat({ max: NEMESIS_STEPS - 1 }), fault: faultArbitrary }),
  fc.record({
    // Mostly one of the first runs of the step (a repair's finish runs once), sometimes a later one.
    step: fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 1, max: 3 }) }, fc.integer({ min: 1, max: 12 })),
    after: fc.constantFrom(...COVERAGE_KEYS.filter((key) => key !== 'start' && key !== 'fold')),
    fault: faultArbitrary,
  }),
);

/**
 * A case: 3 or 5 nodes, a seed, up to 32 cuts, each at any event or right after any run of a step, and the palette
 * of fault kinds it uses.
 */
export const nemesisCaseArbitrary: fc.Arbitrary<NemesisCase> = fc.record({
  nodes: fc.constantFrom(3, 5),
  seed: fc.nat({ max: 2 ** 31 - 1 }),
  cuts: fc.array(cutArbitrary, { maxLength: 32 }),
  palette: fc.subarray([...FAULT_KINDS], { minLength: 1 }),
});

/** Every fault kind of a case with Cluster members: the standalone kinds and cluster-faults.ts's. */
const CLUSTER_FAULT_KINDS: readonly Fault['kind'][] = [...FAULT_KINDS, 'shard-amnesia', 'migrate-slot'];

/** A fault of a case with Cluster members: half of them the Cluster faults (shard restarts, slot moves). */
export const clusterCaseFaultArbitrary: fc.Arbitrary<Fault> = fc.oneof(faultArbitrary, clusterFaultArbitrary);

export const clusterCutArbitrary: fc.Arbitrary<Cut> = fc.oneof(
  fc.record({ step: fc.nat({ max: NEMESIS_STEPS - 1 }), fault: clusterCaseFaultArbitrary }),
  fc.record({
    step: fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 1, max: 3 }) }, fc.integer({ min: 1, max: 12 })),
    after: fc.constantFrom<NonNullable<Cut['after']>>(
      ...COVERAGE_KEYS.filter((key) => key !== 'start' && key !== 'fold'),
      ...CLUSTER_STEPS,
    ),
    fault: clusterCaseFaultArbitrary,
  }),
);

/**
 * A case with mixed members (DESIGN §3c): 3 or 5 nodes of which the last one or two are Redis Cluster members of two
 * or three shards, with the Cluster faults among the cuts.
 */
export const clusterCaseArbitrary: fc.Arbitrary<NemesisCase> = fc.record({
  nodes: fc.constantFrom(3, 5),
  seed: fc.nat({ max: 2 ** 31 - 1 }),
  cuts: fc.array(clusterCutArbitrary, { maxLength: 32 }),
  palette: fc.subarray([...CLUSTER_FAULT_KINDS], { minLength: 1 }),
  cluster: fc.record({ members: fc.integer({ min: 1, max: 2 }), shards: fc.constantFrom(2, 3) }),
});

/** The arbitraries of a search: standalone nodes only, or mixed members (`cluster`). */
export function nemesisArbitraries(cluster: boolean): {
  readonly cases: fc.Arbitrary<NemesisCase>;
  readonly cuts: fc.Arbitrary<Cut>;
  readonly faults: fc.Arbitrary<Fault>;
} {
  return cluster
    ? { cases: clusterCaseArbitrary, cuts: clusterCutArbitrary, faults: clusterCaseFaultArbitrary }
    : { cases: nemesisCaseArbitrary, cuts: cutArbitrary, faults: faultArbitrary };
}
