/**
 * The nemesis's Cluster faults (nemesis.ts runs them; sim-cluster-member.ts is the member they strike), and the
 * coverage signals of F29's chain (DESIGN §7: a slot migration meets a shard that restarts empty, and the slot
 * votes without the registers it lost):
 *
 * - `shard-amnesia`: one shard of a Cluster member restarts empty (its slots' keys and its script cache gone, its
 *   node id kept); a process starts the slot repair of that member (the coordinator's `repairEmptySlots`).
 * - `migrate-slot`: one of the member's slots starts moving to another shard, `batch` keys per MIGRATE, a batch every
 *   20 ms (each batch an event of the world, so any other cut can fall between two batches); with `cancelAfter` > 0
 *   the move is cancelled after that many batches (CLUSTER SETSLOT NODE back to the exporting shard; the keys moved
 *   stay behind). When it ends, a process runs the slot repair of the member (as a vote answering NOT_INITIALIZED, or
 *   the next probe, asks for it); it finds nothing to do when every slot still votes.
 *
 * The pieces of F29's chain, checked after every cut, batch and grant (g a resource's highest completed grant):
 * 1 `slot-migrating`, 2 `register-moved` (a batch moved a token register or a slot's floor), 3
 * `loss-mid-migration` (a shard restarted empty while a slot it exports or imports was moving, after a batch
 * moved a key; or a move cancelled after a batch moved a register or floor, which stays behind), 4
 * `migration-ended` (after that, the move completed or was cancelled), 5 `slot-forgot` (a slot that votes —
 * probe-shard.lua's own answer — answers below what it held for a resource before), 6 `slot-votes-below-granted`
 * (that answer is below g), 7 `slot-gap` (F29's whole state: besides, enough other voting members answer below g
 * that a quorum does), 8 `slot-grant-below-granted` (after that state, a grant below one completed earlier).
 */
import fc from 'fast-check';
import { keySlot } from '../../../packages/coordinator/src/keys/slots.js';
import type { SimCluster, SlotMigration } from './sim-cluster-member.js';
import type { SimWorld } from './sim-world.js';

export const F29_CHAIN = [
  'slot-migrating',
  'register-moved',
  'loss-mid-migration',
  'migration-ended',
  'slot-forgot',
  'slot-votes-below-granted',
  'slot-gap',
  'slot-grant-below-granted',
] as const;

export type ClusterFault =
  | { readonly kind: 'shard-amnesia'; readonly member: number; readonly shard: number }
  | {
      readonly kind: 'migrate-slot';
      readonly member: number;
      readonly slot: number;
      /** Keys per MIGRATE batch. */
      readonly batch: number;
      /** Cancel the move after this many batches; 0: move it all. */
      readonly cancelAfter: number;
    };

/** The steps a cut may strike right after, besides nemesis.ts's COVERAGE_KEYS. */
export const CLUSTER_STEPS = ['migrate-batch', 'migrate-end', 'repair-read-slot', 'probe-shard'] as const;

const small = fc.nat({ max: 4 });

export const clusterFaultArbitrary: fc.Arbitrary<ClusterFault> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({ kind: fc.constant('shard-amnesia' as const), member: small, shard: small }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('migrate-slot' as const),
      member: small,
      slot: small,
      batch: fc.constantFrom(1, 1, 2, 3),
      cancelAfter: fc.oneof({ weight: 2, arbitrary: fc.constant(0) }, fc.integer({ min: 1, max: 4 })),
    }),
  },
);

/** What the Cluster faults need of the run (nemesis.ts supplies it). */
export interface ClusterRun {
  readonly world: SimWorld;
  readonly clusters: readonly SimCluster[];
  readonly features: Set<string>;
  /** The token keys of the run's resources. */
  readonly tokenKeys: readonly string[];
  /** The highest completed grant per token key. */
  readonly granted: ReadonlyMap<string, bigint>;
  /** A step ran (coverage, and cuts after a named step). */
  stepDone(step: string): void;
  /** Starts the repair of member `index` (the slot repair). */
  repair(index: number): void;
  /** How many members that vote now (a Cluster member: the resource's slot) answer below `g` for `tokenKey`. */
  votersBelow(tokenKey: string, g: bigint): number;
  readonly quorum: number;
  /** Whether member `index` may lose a shard now (at most N − quorum members without their state at once). */
  mayLose(index: number): boolean;
}

/** Runs one Cluster fault. */
export function strikeClusterFault(run: ClusterRun, fault: ClusterFault): void {
  if (run.clusters.length === 0) return;
  const cluster = run.clusters[fault.member % run.clusters.length]!;
  switch (fault.kind) {
    case 'shard-amnesia': {
      if (!run.mayLose(cluster.index)) return;
      const shard = fault.shard % cluster.shards.length;
      remember(run);
      for (const m of cluster.migrations.values()) {
        if ((m.from === shard || m.to === shard) && m.batches > 0) run.features.add('loss-mid-migration');
      }
      cluster.loseShard(shard);
      run.repair(cluster.index);
      return;
    }
    case 'migrate-slot': {
      const slot = cluster.slots[fault.slot % cluster.slots.length]!;
      const from = cluster.ownerOf(slot);
      const migration = cluster.beginMigration(slot, (from + 1) % cluster.shards.length);
      if (migration === undefined) return;
      run.features.add('slot-migrating');
      run.world.note(`m${cluster.index}: slot ${slot} moves from shard ${migration.from} to ${migration.to}`);
      scheduleBatch(run, cluster, migration, fault);
      return;
    }
  }
}

const BATCH_EVERY_MS = 20;

function scheduleBatch(
  run: ClusterRun,
  cluster: SimCluster,
  migration: SlotMigration,
  fault: Extract<ClusterFault, { kind: 'migrate-slot' }>,
): void {
  run.world.at(run.world.time + BATCH_EVERY_MS, `migrate slot ${migration.slot}`, () => {
    remember(run);
    const cancelled = fault.cancelAfter > 0 && migration.batches >= fault.cancelAfter;
    if (cancelled && movedState.has(migration)) run.features.add('loss-mid-migration');
    const moved = cancelled ? [] : cluster.migrateBatch(migration, fault.batch);
    if (moved.length > 0) {
      run.world.note(`m${cluster.index}: slot ${migration.slot} batch moved ${moved.join(' ')}`);
      if (moved.some((key) => key.endsWith(':token') || key.endsWith(':floor'))) {
        run.features.add('register-moved');
        movedState.add(migration);
      }
      run.stepDone('migrate-batch');
      scheduleBatch(run, cluster, migration, fault);
      return;
    }
    cluster.endMigration(migration, cancelled);
    run.world.note(`m${cluster.index}: slot ${migration.slot} ${cancelled ? 'move cancelled' : 'moved'}`);
    if (run.features.has('loss-mid-migration')) run.features.add('migration-ended');
    run.stepDone('migrate-end');
    run.repair(cluster.index);
  });
}

/** Moves that carried a register or a floor to the importing shard. */
const movedState = new WeakSet<SlotMigration>();
/** Per member and token key, the most the slot held anywhere (register or floor, on any shard). */
const heldBy = new WeakMap<SimCluster, Map<string, bigint>>();

/** Records what each member's slots hold now, on any of its shards (a slot that loses it later forgot it). */
export function remember(run: ClusterRun): void {
  for (const cluster of run.clusters) {
    let held = heldBy.get(cluster);
    if (held === undefined) heldBy.set(cluster, (held = new Map<string, bigint>()));
    for (const key of run.tokenKeys) {
      const now = cluster.heldAnywhere(key);
      if (now > (held.get(key) ?? 0n)) held.set(key, now);
    }
  }
}

/**
 * F29's state: a slot that votes answers below what it held before (`slot-forgot`), and below a completed grant of
 * that resource (`slot-votes-below-granted`).
 */
export function lookForSlotGaps(run: ClusterRun): void {
  for (const cluster of run.clusters) {
    const held = heldBy.get(cluster);
    for (const key of run.tokenKeys) {
      const slot = keySlot(key);
      if (cluster.migrations.has(slot) || !cluster.slotVotes(slot)) continue;
      const answer = cluster.answer(key);
      if (answer >= (held?.get(key) ?? 0n)) continue;
      run.features.add('slot-forgot');
      const g = run.granted.get(key) ?? 0n;
      if (answer >= g) continue;
      if (!run.features.has('slot-votes-below-granted')) {
        run.world.note(
          `slot ${slot} of n${cluster.index} votes answering ${answer} for ${key}, below the grant ${g} (held ${held?.get(key) ?? 0n})`,
        );
      }
      run.features.add('slot-votes-below-granted');
      if (run.votersBelow(key, g) >= run.quorum) run.features.add('slot-gap');
    }
  }
  remember(run);
}

/** The furthest piece of F29's chain a run reached (0 for none). */
export function f29Progress(features: ReadonlySet<string>): number {
  return F29_CHAIN.reduce((max, piece, i) => (features.has(piece) ? i + 1 : max), 0);
}
