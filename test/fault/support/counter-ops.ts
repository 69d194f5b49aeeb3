// The fault suite's critical sections on the counter: an increment made by a lease's holder, run in this
// process and recorded in the history. The counter, its read-modify-write in each mode and the guard paths are
// the counter worker's (@fenced/test-utils/counter-worker), shared with the worker processes and the demo.
import type { Lease } from '@fenced/coordinator';
import { InvalidProofError, InvalidRequestError, LockedError, StaleTokenError } from '@fenced/shared';
import {
  counterStoreOf,
  increment,
  type CounterTarget,
  type Increment,
  type WriteMode,
} from '@fenced/test-utils/counter-worker/counter-store';
import { leaseRef } from '@fenced/test-utils/counter-worker/protocol';
import type { History } from '@fenced/test-utils/history';

export {
  GUARD_PATHS,
  increment,
  kyselyCounterStore,
  type CounterStore,
  type CounterTarget,
  type CounterTransaction,
  type GuardPath,
  type Increment,
  type WriteMode,
} from '@fenced/test-utils/counter-worker/counter-store';
export { readCounter, writeCounter } from '@fenced/test-utils/counter-worker/counter-tables';

/**
 * The increment a lease's holder makes: the lease's resource, token and lease, op id `<process>-<resource>`
 * unless `options.opId` says otherwise.
 */
export function holderIncrement(
  process: string,
  lease: Pick<Lease, 'resource' | 'token' | 'id'>,
  mode: WriteMode,
  options: { readonly opId?: string; readonly readBefore?: bigint } = {},
): Increment {
  return {
    resource: lease.resource,
    token: lease.token,
    leaseRef: leaseRef(lease.id),
    process,
    opId: options.opId ?? `${process}-${lease.resource}`,
    mode,
    ...(options.readBefore === undefined ? {} : { readBefore: options.readBefore }),
  };
}

/** A value read outside any guard (what `reads-outside` and the unguarded critical sections act on). */
export function readOutside(store: CounterTarget, resource: string): Promise<bigint> {
  return counterStoreOf(store).readOutside(resource);
}

/**
 * `fail` only for errors that prove nothing was done: a refused fence, a refused lock, a rejected request.
 * Anything else (a lost connection, a timeout) may have taken effect: `unknown`.
 */
export function classify(error: unknown): 'fail' | 'unknown' {
  if (
    error instanceof StaleTokenError ||
    error instanceof InvalidProofError ||
    error instanceof LockedError ||
    error instanceof InvalidRequestError
  )
    return 'fail';
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'STALE_TOKEN' || code === 'INVALID_PROOF' || code === 'LOCKED' || code === 'INVALID_REQUEST'
    ? 'fail'
    : 'unknown';
}

/** Runs one increment as a recorded `increment` operation (token, lease, op id, and the value written). */
export function recordedIncrement(
  history: History,
  store: CounterTarget,
  input: Increment,
  afterRead?: () => Promise<void>,
): Promise<number> {
  return history.run(
    input.process,
    'increment',
    input.resource,
    () => increment(store, input, afterRead),
    (value) => ({ value }),
    { fields: { token: input.token, leaseId: input.leaseRef, opId: input.opId }, classify },
  );
}
