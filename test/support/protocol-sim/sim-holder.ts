/**
 * What a simulated client does while it believes it holds a lease (nemesis.ts's clients call `holdLease` after every
 * grant): it fences in through the modelled guard (guard-model.ts; three in four do), then runs a few critical sections through it
 * ("read the resource's value, write it + 1", each with an operation id), and between them extends the lease
 * (extend.ts's `extendOnQuorum`, retried with the same lease id while the answer is "too few nodes answered", as
 * the keep-alive loop retries) or inspects it (`inspectOnQuorum`). It never checks its validity before a write: a
 * holder paused by the nemesis, or whose messages were delayed past the ttl, writes with its old token — the
 * paused-holder scenario the guard exists for. A guarded write whose reply was lost is retried with the same
 * operation id (G5). The client's acquire is retried with the same lease id after a failed attempt, as
 * acquire-within.ts does (`acquireRetried`).
 *
 * The guard is reached over its own link: a request and a reply, each delayed (1 ms to 3 s) or lost, drawn from the
 * holder's own random stream; a holder's timeout rejects, and the write may still land later.
 *
 * Everything recorded here is judged by checkers.ts after the run.
 */
import { LeaseLostError } from '@fenced/shared';
import type { ResourceKeys } from '../../../packages/coordinator/src/keys/key-layout.js';
import type { ProtocolContext } from '../../../packages/coordinator/src/nodes/protocol-node.js';
import {
  attemptAcquire,
  type AttemptResult,
} from '../../../packages/coordinator/src/protocol/acquire-attempt.js';
import { extendOnQuorum } from '../../../packages/coordinator/src/protocol/extend.js';
import { inspectOnQuorum } from '../../../packages/coordinator/src/protocol/inspect.js';
import type { Releaser } from '../../../packages/coordinator/src/protocol/release.js';
import type { TokenProposer } from '../../../packages/coordinator/src/tokens/proposal.js';
import type { ExtendRecord, Trespass, WriteOutcome } from './checkers.js';
import type { GuardModel, GuardOutcome, GuardedWrite, PresentedGrant } from './guard-model.js';
import type { SimRedisNode } from './sim-redis-node.js';
import type { ProcessGate, SimWorld } from './sim-world.js';

/** What the holders record for the checkers. */
export interface HolderHistory {
  readonly outcomes: WriteOutcome[];
  readonly extensions: ExtendRecord[];
  readonly trespasses: Trespass[];
}

export function newHolderHistory(): HolderHistory {
  return { outcomes: [], extensions: [], trespasses: [] };
}

export interface HolderContext {
  readonly name: string;
  readonly world: SimWorld;
  readonly gate: ProcessGate;
  readonly protocol: ProtocolContext;
  readonly releaser: Releaser;
  readonly guard: GuardModel;
  readonly history: HolderHistory;
  /** The holder's own random stream (link delays and losses to the guard, its choices). */
  readonly random: () => number;
  /** Reports a step (`guard-write`) to the nemesis, which may cut right after it. */
  readonly onStep: (step: string) => void;
}

/** The guard link's delays; the last choice is a loss. */
const GUARD_DELAYS_MS = [1, 1, 15, 600, 3_000];
const GUARD_LOSS = 0.1;
const GUARD_TIMEOUT_MS = 1_000;
/** Tries of one guarded write (the first and its retries with the same operation id). */
const WRITE_TRIES = 3;
/** Tries of one extend while too few nodes answered. */
const EXTEND_TRIES = 3;

function linkDelay(random: () => number): number | null {
  if (random() < GUARD_LOSS) return null;
  return GUARD_DELAYS_MS[Math.floor(random() * GUARD_DELAYS_MS.length)]!;
}

/** One call to the guard over the link: `apply` runs there atomically when the request arrives. */
function guardCall<T>(h: HolderContext, label: string, apply: (seq: number) => T): Promise<T> {
  const { world, gate } = h;
  return new Promise<T>((resolve, reject) => {
    if (gate.dead) return; // a crashed process sends nothing
    let settled = false;
    const timeout = world.processAt(gate, world.time + GUARD_TIMEOUT_MS, `timeout ${label}`, () => {
      if (settled) return;
      settled = true;
      reject(new Error(`${label}: no reply`));
    });
    const there = linkDelay(h.random);
    if (there === null) return;
    world.at(world.time + there, `request ${label}`, () => {
      const reply = apply(world.seq);
      world.note(
        `${label} applied: ${JSON.stringify(reply, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`,
      );
      h.onStep('guard-write');
      const back = linkDelay(h.random);
      if (back === null) return;
      world.processAt(gate, world.time + back, `reply ${label}`, () => {
        if (settled) return;
        settled = true;
        timeout.cancelled = true;
        resolve(reply);
      });
    });
  });
}

/**
 * One guarded transaction, retried with the same operation id while its reply is lost. Returns whether the holder
 * may go on (false once fenced out, or when every try was lost).
 */
async function guardedWrite(
  h: HolderContext,
  grant: PresentedGrant,
  kind: GuardedWrite['kind'],
  opId: string,
  /** The G4 control's read, made before the guarded transaction, outside it (`readOutside`). */
  readOutside?: number,
): Promise<boolean> {
  for (let attempt = 0; attempt < WRITE_TRIES; attempt++) {
    const write: GuardedWrite = { grant, kind, opId, ...(readOutside !== undefined ? { readOutside } : {}) };
    const answer = await guardCall(h, `${h.name}->guard ${kind} ${opId} t=${grant.token}`, (seq) => ({
      outcome: h.guard.apply(write, seq),
      seq,
    })).catch(() => null);
    if (answer === null) continue;
    const outcome: GuardOutcome = answer.outcome;
    h.history.outcomes.push({
      grant,
      opId,
      kind: outcome.kind,
      result: outcome.kind === 'stale' ? null : outcome.result,
      decidedSeq: answer.seq,
    });
    return outcome.kind !== 'stale';
  }
  h.history.outcomes.push({ grant, opId, kind: 'unknown', result: null, decidedSeq: h.world.seq });
  return false;
}

/** Extends, retrying with the same lease id while too few nodes answered. Returns false once the lease is lost. */
async function extendRetried(
  h: HolderContext,
  grant: PresentedGrant,
  keys: ResourceKeys,
  ttlMs: number,
  validUntil: { value: number },
): Promise<boolean> {
  for (let attempt = 0; attempt < EXTEND_TRIES; attempt++) {
    try {
      // The coordinator's background release retries on real timers (release.ts); in the simulation the release
      // is one round on the simulated nodes, so the run stays a function of its case.
      const background = {
        inBackground: (k: ResourceKeys, id: string) =>
          void h.releaser.undoAttempt(k, id).catch(() => undefined),
      };
      const extended = await extendOnQuorum(h.protocol, background, {
        resource: grant.resource,
        keys,
        leaseId: grant.leaseId,
        ttlMs,
        validUntil: validUntil.value,
      });
      h.history.extensions.push({ grant, token: extended.token, seq: h.world.seq });
      h.world.note(
        `${h.name} extended ${grant.leaseId} (token ${grant.token}): reported token ${extended.token}`,
      );
      validUntil.value = extended.validUntil;
      return true;
    } catch (error) {
      if (error instanceof LeaseLostError) return false;
    }
  }
  return true;
}

/**
 * The holder's session after a grant: fence in (three holders in four), then one to three critical sections through the guard over about
 * `holdMs`, with extends and inspects between them.
 */
export async function holdLease(
  h: HolderContext,
  grant: PresentedGrant,
  keys: ResourceKeys,
  lease: { readonly ttlMs: number; readonly validUntil: number },
  holdMs: number,
): Promise<void> {
  let op = 0;
  const opId = (): string => `${grant.leaseId}/${op++}`;
  // Most holders fence in at once (DESIGN §4, for G3); some go straight to their critical sections, which G4 must
  // survive as well (it rests on G1 and reads inside the guarded transaction only).
  if (h.random() < 0.75 && !(await guardedWrite(h, grant, 'fence-in', opId()))) return;
  const validUntil = { value: lease.validUntil };
  const sections = 1 + Math.floor(h.random() * 3);
  for (let i = 0; i < sections; i++) {
    // The G4 control reads first, outside the guard, and writes what it read + 1 after the pause below.
    let readOutside: number | undefined;
    if (h.guard.variant === 'guard-reads-outside') {
      readOutside = await guardCall(h, `${h.name}->guard read ${grant.resource}`, () =>
        h.guard.read(grant.resource),
      ).catch(() => undefined);
      if (readOutside === undefined) continue;
    }
    await h.protocol.clock.sleep(Math.floor((h.random() * holdMs) / sections));
    const r = h.random();
    if (r < 0.35) {
      if (!(await extendRetried(h, grant, keys, lease.ttlMs, validUntil))) return;
    } else if (r < 0.55) {
      await inspectOnQuorum(h.protocol, keys).catch(() => undefined);
    }
    if (!(await guardedWrite(h, grant, 'increment', opId(), readOutside))) return;
  }
}

/**
 * The client's acquire: one attempt, and after a failed one (its partial grants undone by the attempt) a second with
 * the same lease id, as acquire-within.ts retries — so a late reply or a duplicated request of the first attempt may
 * meet the second's grant on a node.
 */
export async function acquireRetried(
  protocol: ProtocolContext,
  deps: { proposer: TokenProposer; releaser: Releaser },
  request: { resource: string; keys: ResourceKeys; leaseId: string; ttlMs: number },
  retry: boolean,
): Promise<AttemptResult | null> {
  const once = (): Promise<AttemptResult | null> =>
    attemptAcquire(protocol, { ...deps, jitter: () => 0 }, request).catch(() => null);
  const first = await once();
  if (first?.kind === 'granted' || !retry) return first;
  return once();
}

/**
 * A node as one process sees it, watched: a release that deletes a lease record held by another lease id is
 * recorded as a trespass (judged by checkers.ts's `leaseRetryViolations`). Everything else is the node itself.
 */
export function watchReleases(model: SimRedisNode, world: SimWorld, history: HolderHistory): SimRedisNode {
  return new Proxy(model, {
    get(target, property, receiver) {
      if (property !== 'release') return Reflect.get(target, property, receiver) as unknown;
      return (keys: Parameters<SimRedisNode['release']>[0], leaseId: string) => {
        const before = target.lease(keys);
        const reply = target.release(keys, leaseId);
        if (before !== undefined && before.holder !== leaseId && target.lease(keys) === undefined) {
          history.trespasses.push({
            node: target.index,
            releasedBy: leaseId,
            deleted: before.holder,
            seq: world.seq,
          });
        }
        return reply;
      };
    },
  });
}
