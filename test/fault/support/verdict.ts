import fs from 'node:fs/promises';
import path from 'node:path';
import type { Coordinator, Lease } from '@fenced/coordinator';
import { LockedError, QuorumUnavailableError } from '@fenced/shared';
import {
  checkCommitOrder,
  checkCounter,
  checkExactlyOnce,
  checkTokens,
  combine,
  reportOverlaps,
  type CheckResult,
} from '@fenced/test-utils/checkers';
import { toJson, type History } from '@fenced/test-utils/history';
import { TokenExhaustedError } from '@fenced/coordinator';
import type { FaultWorld } from './fault-world.js';
import { leaseRef } from './fault-world.js';
import { holderIncrement, recordedIncrement } from './counter-ops.js';

export interface Verdict extends CheckResult {
  /** Lock overlaps found (information: Redlock does not promise mutual exclusion). */
  readonly overlaps: number;
}

/**
 * Judges a run with every checker: tokens (G2), commit order (G1, G3), the lost-update counter of each resource
 * (G4), exactly-once operation ids (G5), plus the overlap report as information. The commit records and the
 * final counter values are read from the database here, so call it once, after the run.
 */
export async function judge(
  world: FaultWorld,
  history: History,
  resources: readonly string[],
): Promise<Verdict> {
  await world.recordCommits(history, resources);
  const data = history.data;
  const results: Record<string, CheckResult> = {
    tokens: checkTokens(data),
    commits: checkCommitOrder(data),
    exactlyOnce: checkExactlyOnce(data, { applied: await world.appliedOperations(resources) }),
  };
  for (const resource of resources)
    results[`counter ${resource}`] = checkCounter(data, {
      resource,
      final: await world.counterValue(resource),
    });
  const overlaps = reportOverlaps(data);
  results.overlaps = overlaps;
  const verdict = combine(results);
  if (!verdict.ok && process.env.FENCED_FAULT_DUMP) await dumpHistory(history, resources[0] ?? 'run');
  return { ...verdict, overlaps: overlaps.overlaps.length };
}

/** Writes a history to `.tmp/fault-histories/` (set FENCED_FAULT_DUMP=1) for a post-mortem. */
export async function dumpHistory(history: History, name: string): Promise<string> {
  const dir = path.resolve('.tmp', 'fault-histories');
  await fs.mkdir(dir, { recursive: true });
  const file = path.join(dir, `${name.replace(/[^A-Za-z0-9_-]/g, '_')}.json`);
  await fs.writeFile(file, toJson(history), 'utf8');
  return file;
}

/** `fail` for an acquire that certainly gave the caller no lease. */
export function classifyAcquire(error: unknown): 'fail' | 'unknown' {
  return error instanceof LockedError ||
    error instanceof QuorumUnavailableError ||
    error instanceof TokenExhaustedError
    ? 'fail'
    : 'unknown';
}

/** One recorded acquire through the coordinator; `null` when not granted (recorded as `fail`). */
export async function recordedAcquire(
  history: History,
  process: string,
  coordinator: Coordinator,
  resource: string,
  options: { ttlMs: number; waitMs?: number },
): Promise<Lease | null> {
  try {
    return await history.run(
      process,
      'acquire',
      resource,
      () => coordinator.acquire(resource, options),
      (lease) => ({ token: lease.token, leaseId: leaseRef(lease.id), validityMs: lease.validityMs }),
      { classify: classifyAcquire },
    );
  } catch (error) {
    if (classifyAcquire(error) === 'fail') return null;
    throw error;
  }
}

/** A recorded release; its failure is harmless (the lease expires by itself) and recorded as `unknown`. */
export async function recordedRelease(history: History, process: string, lease: Lease): Promise<void> {
  await history
    .run(process, 'release', lease.resource, () => lease.release(), undefined, {
      fields: { leaseId: leaseRef(lease.id), token: lease.token },
    })
    .catch(() => undefined);
}

/**
 * `count` critical sections of one client, one after another: acquire (waiting), a guarded increment with op id
 * `<process><i>-<resource>`, release. Throws if an acquire is not granted.
 */
export async function guardedCriticalSections(
  world: FaultWorld,
  history: History,
  process: string,
  coordinator: Coordinator,
  resource: string,
  count: number,
): Promise<void> {
  for (let i = 0; i < count; i++) {
    const lease = await recordedAcquire(history, process, coordinator, resource, {
      ttlMs: 2_000,
      waitMs: 5_000,
    });
    if (!lease) throw new Error(`${process} did not get the lease`);
    await recordedIncrement(
      history,
      world.store,
      holderIncrement(process, lease, 'guarded', { opId: `${process}${i}-${resource}` }),
    );
    await recordedRelease(history, process, lease);
  }
}

/** Sleeps; used to *cause* faults (outlive a ttl, let a pause last), never as a pass criterion. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls a condition, bounded: sequencing, not a timing assertion. */
export async function until(
  what: string,
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 20_000,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await condition())) {
    if (performance.now() > deadline) throw new Error(`gave up waiting for ${what} after ${timeoutMs} ms`);
    await sleep(20);
  }
}
