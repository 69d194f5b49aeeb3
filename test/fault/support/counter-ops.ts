import { sql, type Transaction } from 'kysely';
import type { GuardedStore } from '@fenced/guarded-store';
import { InvalidProofError, InvalidRequestError, LockedError, StaleTokenError } from '@fenced/shared';
import type { History } from '@fenced/test-utils/history';
import type { Lease } from '@fenced/coordinator';
import { leaseRef, type CounterDb } from './fault-world.js';

/**
 * How a critical section writes the counter:
 * - `guarded`: read and write in one guarded transaction (DESIGN §4, G4) — the protected way;
 * - `reads-outside`: the read in its own transaction before the guarded write (F18's negative control);
 * - `unguarded`: a plain transaction, no fence at all (the "no guard" negative control).
 */
export type WriteMode = 'guarded' | 'reads-outside' | 'unguarded';

export interface Increment {
  readonly resource: string;
  readonly token: bigint;
  /** Digest of the lease id: the fence's lease, and the commit log's grant name. */
  readonly leaseRef: string;
  readonly process: string;
  /** Operation id (G5); the guarded modes pass it to the store, the unguarded one only logs it. */
  readonly opId: string;
  readonly mode: WriteMode;
  /** A value read earlier, e.g. before a pause (reads-outside and unguarded only). */
  readonly readBefore?: bigint;
  /**
   * For stores that verify proofs (F20): the lease id and proof the fence presents. Without it the fence names
   * `leaseRef` as its lease and carries no proof.
   */
  readonly signed?: { readonly leaseId: string; readonly proof: string | undefined };
}

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

export async function readCounter(trx: Transaction<CounterDb>, resource: string): Promise<bigint> {
  const row = await trx
    .selectFrom('counter')
    .select('value')
    .where('resource', '=', resource)
    .executeTakeFirst();
  return BigInt(row?.value ?? 0n);
}

/** Writes `value`, then appends the commit log row (after the UPDATE: the row lock orders the log). */
export async function writeCounter(
  trx: Transaction<CounterDb>,
  input: Pick<Increment, 'resource' | 'token' | 'leaseRef' | 'process' | 'opId'>,
  value: bigint,
): Promise<void> {
  await sql`update counter set value = ${value.toString()}::bigint where resource = ${input.resource}`.execute(
    trx,
  );
  await sql`
    insert into commit_log (resource, token, lease_ref, process, op_id, value)
    values (${input.resource}, ${input.token.toString()}::bigint, ${input.leaseRef}, ${input.process},
            ${input.opId}, ${value.toString()}::bigint)`.execute(trx);
}

/** A value read outside any guard (what `reads-outside` and the unguarded critical sections act on). */
export function readOutside(store: GuardedStore<CounterDb>, resource: string): Promise<bigint> {
  return store.read((trx) => readCounter(trx, resource));
}

/**
 * One read-modify-write increment in the given mode; resolves with the value written. `afterRead` runs between
 * the read and the write — inside the open transaction in the `guarded` and `unguarded` modes — so a test can
 * pause the client right there (F12) or hold it in a critical section.
 */
export async function increment(
  store: GuardedStore<CounterDb>,
  input: Increment,
  afterRead: () => Promise<void> = () => Promise.resolve(),
): Promise<number> {
  const fence = input.signed
    ? { resource: input.resource, token: input.token, ...input.signed }
    : { resource: input.resource, token: input.token, leaseId: input.leaseRef };
  switch (input.mode) {
    case 'guarded':
      return store.run(
        fence,
        async (trx) => {
          const next = (await readCounter(trx, input.resource)) + 1n;
          await afterRead();
          await writeCounter(trx, input, next);
          return Number(next);
        },
        { opId: input.opId },
      );
    case 'reads-outside': {
      const before = input.readBefore ?? (await readOutside(store, input.resource));
      await afterRead();
      return store.run(
        fence,
        async (trx) => {
          await writeCounter(trx, input, before + 1n);
          return Number(before + 1n);
        },
        { opId: input.opId },
      );
    }
    case 'unguarded':
      return store.dangerouslyRunUnguarded(async (trx) => {
        const next = (input.readBefore ?? (await readCounter(trx, input.resource))) + 1n;
        await afterRead();
        await writeCounter(trx, input, next);
        return Number(next);
      });
  }
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
  store: GuardedStore<CounterDb>,
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
