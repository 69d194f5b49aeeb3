/**
 * A fixed schedule around the simulation's world and nodes (the real Lua scripts), for unit tests of one protocol step (an acquire
 * attempt, an extend, a repair): the test says how long every message takes — or that it is lost — as a function of
 * the message, and the step runs on virtual time. No real timers, no timing thresholds: "a slow second promise
 * round" is exactly the schedule that makes it slow.
 *
 * Message names are the simulation's (sim-world.ts): `request <caller>-><node> <what>` and
 * `reply <caller>-><node> <what>`, e.g. `reply c->n1 promise t=42`; `<what>` is `acquire t=…`, `promise t=…`,
 * `extend`, `release`, `repair-read`, ….
 */
import { QuorumUnavailableError } from '@fenced/shared';
import {
  resolveOptions,
  type CoordinatorOptions,
  type CoordinatorSettings,
} from '../../../packages/coordinator/src/options.js';
import type { ProtocolContext } from '../../../packages/coordinator/src/nodes/protocol-node.js';
import { quorumOf } from '../../../packages/coordinator/src/quorum/quorum.js';
import { SimRedisNode } from './sim-redis-node.js';
import { SimNode, SimWorld } from './sim-world.js';

/** How long one message takes, in virtual ms, or `'lost'`. */
export type Schedule = (message: string) => number | 'lost';

export interface ScriptedRigOptions {
  readonly nodes: number;
  /** Every delay `schedule` returns (the world picks delays from a fixed list). */
  readonly delaysMs: readonly number[];
  readonly schedule: Schedule;
  /** Coordinator options other than `nodes`. */
  readonly options?: Omit<CoordinatorOptions, 'nodes'>;
  /** Builds node `index` (a subclass can act before a script runs); a plain node by default. */
  readonly model?: (index: number, now: () => number) => SimRedisNode;
}

export interface ScriptedRig {
  readonly world: SimWorld;
  /** The nodes' states, initialized (each holds its incarnation key). */
  readonly models: readonly SimRedisNode[];
  readonly settings: Readonly<CoordinatorSettings>;
  /** The context of one process (caller `c`) that asks every node. */
  readonly context: ProtocolContext;
  /** The nodes as caller `c` reaches them (also the RepairNode slice). */
  readonly nodes: readonly SimNode[];
  /**
   * Starts `step` at virtual time `atMs` and runs the world until nothing is left to happen. Resolves with the
   * step's value and the virtual times it started and settled; rejects with the step's error.
   */
  runAt<T>(atMs: number, step: () => Promise<T>): Promise<{ value: T; startedMs: number; settledMs: number }>;
}

export function scriptedRig(options: ScriptedRigOptions): ScriptedRig {
  const { delaysMs, schedule } = options;
  const world = new SimWorld(
    (point, count) => {
      const delay = schedule(point);
      const pick = delay === 'lost' ? delaysMs.length : delaysMs.indexOf(delay);
      if (pick < 0 || pick >= count)
        throw new Error(`schedule: ${String(delay)} for "${point}" is not a choice`);
      return pick;
    },
    { delaysMs, losses: true, duplicates: false },
  );
  const models = Array.from(
    { length: options.nodes },
    (_, i) => options.model?.(i, () => world.time) ?? new SimRedisNode(i, () => world.time),
  );
  for (const model of models) model.initialize();
  const settings = resolveOptions({ nodes: ['redis://sim'], ...options.options });
  const nodes = models.map((model) => new SimNode(world, model, 'c', 1, options.nodes));
  const context: ProtocolContext = {
    nodes,
    quorum: quorumOf(options.nodes),
    settings,
    clock: world.clock(),
    isVoting: () => true,
    noteAbstentions: () => undefined,
    refreshSettings: () => Promise.resolve(false),
    unavailable: (summary) => new QuorumUnavailableError(summary),
  };
  return {
    world,
    models,
    settings,
    context,
    nodes,
    async runAt<T>(atMs: number, step: () => Promise<T>) {
      let outcome: { ok: true; value: T } | { ok: false; error: unknown } | undefined;
      let settledMs = Number.NaN;
      world.at(atMs, 'step starts', () => {
        step().then(
          (value) => {
            outcome = { ok: true, value };
            settledMs = world.time;
          },
          (error: unknown) => {
            outcome = { ok: false, error };
            settledMs = world.time;
          },
        );
      });
      await world.run({ maxSteps: 100_000, untilMs: Number.MAX_SAFE_INTEGER });
      if (outcome === undefined) throw new Error('the step never settled (nothing left to happen)');
      if (!outcome.ok) throw outcome.error;
      return { value: outcome.value, startedMs: atMs, settledMs };
    },
  };
}
