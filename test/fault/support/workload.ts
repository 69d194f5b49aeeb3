import type { Coordinator } from '@fenced/coordinator';
import type { History } from '@fenced/test-utils/history';
import { classify, increment, type CounterTarget, type WriteMode } from './counter-ops.js';
import { leaseRef } from './fault-world.js';
import type { NaiveTokenSource } from './naive-token-source.js';
import { classifyAcquire, sleep } from './verdict.js';

/**
 * Which protection a run has. `protected` is the product as designed; each other one switches one
 * protection off for a negative control:
 * - `no-guard`: plain transactions, no fence (reads inside them);
 * - `reads-outside`: guarded writes of a value read before the guard (F18);
 * - `naive-tokens`: the coordinator's lease, but the fencing token from INCR-on-every-node-take-the-max.
 */
export type Protection = 'protected' | 'no-guard' | 'reads-outside' | 'naive-tokens';

export function writeModeOf(protection: Protection): WriteMode {
  return protection === 'no-guard'
    ? 'unguarded'
    : protection === 'reads-outside'
      ? 'reads-outside'
      : 'guarded';
}

/**
 * One client of a workload: its own coordinator (its own view of the nodes) and its own store (the Kysely
 * store, or a counter store of any guard path).
 */
export interface WorkloadClient {
  readonly name: string;
  readonly coordinator: Coordinator;
  readonly store: CounterTarget;
  /** Needed for `naive-tokens`: a naive source over the same links as the coordinator. */
  readonly naive?: NaiveTokenSource;
}

export interface CycleOptions {
  readonly resource: string;
  readonly protection: Protection;
  readonly ttlMs: number;
  readonly waitMs: number;
  /**
   * Time spent in the critical section between the read and the write (makes leases expire mid-write); a
   * function draws one per critical section.
   */
  readonly holdMs?: number | (() => number);
  /**
   * Time between the grant and the guarded transaction (a holder that stalls before it writes, so a successor
   * may fence in first); a function draws one per critical section.
   */
  readonly stallMs?: number | (() => number);
}

let opCounter = 0;

/**
 * One critical section, recorded: acquire, increment (retried once with the same op id when its outcome is
 * unknown, as a careful client would), release. Never throws for a fault the run provokes.
 */
export async function cycle(history: History, client: WorkloadClient, options: CycleOptions): Promise<void> {
  const { resource, protection } = options;
  const acquire = history.invoke(client.name, 'acquire', resource);
  let lease;
  try {
    lease = await client.coordinator.acquire(resource, { ttlMs: options.ttlMs, waitMs: options.waitMs });
  } catch (error) {
    acquire[classifyAcquire(error)]({ error: describe(error) });
    if (classifyAcquire(error) === 'unknown') await sleep(20);
    return;
  }
  const ref = leaseRef(lease.id);
  let token = lease.token;
  if (protection === 'naive-tokens') {
    if (!client.naive) throw new Error(`${client.name} has no naive token source`);
    try {
      token = await client.naive.next(resource);
    } catch (error) {
      acquire.fail({ error: describe(error) });
      await lease.release().catch(() => undefined);
      return;
    }
  }
  acquire.ok({ token, leaseId: ref, validityMs: lease.validityMs });

  const stall = typeof options.stallMs === 'function' ? options.stallMs() : (options.stallMs ?? 0);
  if (stall > 0) await sleep(stall);

  const opId = `${client.name}-${++opCounter}-${process.pid}`;
  const mode = writeModeOf(protection);
  const hold = typeof options.holdMs === 'function' ? options.holdMs() : (options.holdMs ?? 0);
  for (let attempt = 0; attempt < 2; attempt++) {
    const pending = history.invoke(client.name, 'increment', resource, { token, leaseId: ref, opId });
    try {
      const value = await increment(
        client.store,
        { resource, token, leaseRef: ref, process: client.name, opId, mode },
        hold > 0 ? () => sleep(hold) : undefined,
      );
      pending.ok({ value });
      break;
    } catch (error) {
      const kind = classify(error);
      pending[kind]({ error: describe(error) });
      // Only a guarded write with an op id may be retried safely (G5); the unguarded one applies twice.
      if (kind === 'fail' || mode === 'unguarded') break;
    }
  }

  const release = history.invoke(client.name, 'release', resource, { leaseId: ref, token });
  try {
    await lease.release();
    release.ok();
  } catch (error) {
    release.unknown({ error: describe(error) });
  }
}

/**
 * Runs `workers` clients in parallel, each doing cycles until `stop()` says so or `maxCycles` is reached.
 * Bounded: every client stops after `maxCycles`.
 */
export async function runClients(
  history: History,
  clients: readonly WorkloadClient[],
  options: CycleOptions & { maxCycles: number; stop?: () => boolean },
): Promise<void> {
  await Promise.all(
    clients.map(async (client) => {
      for (let i = 0; i < options.maxCycles && !(options.stop?.() ?? false); i++)
        await cycle(history, client, options);
    }),
  );
}

function describe(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  return typeof code === 'string' ? `${code}: ${message}` : message;
}
