import type { Transaction } from 'kysely';
import type { FenceTarget, GuardedStore } from '@fenced/guarded-store';
import { readCounter, writeCounter, type CounterDb, type CounterWrite } from './counter-tables.js';

/**
 * How a critical section writes the counter:
 * - `guarded`: read and write in one guarded transaction (DESIGN §4, G4) — the protected way;
 * - `reads-outside`: the read in its own transaction before the guarded write (F18's negative control);
 * - `unguarded`: a plain transaction, no fence at all (the "no guard" negative control).
 */
export type WriteMode = 'guarded' | 'reads-outside' | 'unguarded';

/**
 * The client a worker writes the counter through (guard-paths.ts opens each):
 * - `kysely`: the store itself (`GuardedStore.run`);
 * - `sql-function`: node-postgres transactions fenced by `PgGuard` (`@fenced/guarded-store/pg`), which calls
 *   the guard's SQL function;
 * - `prisma`: Prisma interactive transactions fenced by `PrismaGuard` (`@fenced/guarded-store/prisma`), over
 *   `@prisma/adapter-pg`, reading and writing through the client's models;
 * - `drizzle`: Drizzle transactions fenced by `DrizzleGuard` (`@fenced/guarded-store/drizzle`), over
 *   node-postgres, through Drizzle's query builder.
 */
export type GuardPath = 'kysely' | 'sql-function' | 'prisma' | 'drizzle';

/** Every guard path, the store's own first. */
export const GUARD_PATHS: readonly GuardPath[] = ['kysely', 'sql-function', 'prisma', 'drizzle'];

/** The counter's read and write inside one transaction, in a path's own client. */
export interface CounterTransaction {
  read(resource: string): Promise<bigint>;
  /** Writes `value`, then appends the commit log row (after the UPDATE: the row lock orders the log). */
  write(input: CounterWrite, value: bigint): Promise<void>;
}

/** The counter through one guard path: a fenced transaction, a plain one, and a read outside both. */
export interface CounterStore {
  readonly path: GuardPath;
  /** One transaction fenced by the path's guard, with operation id `opId` (G5) when given. */
  guarded(
    fence: FenceTarget,
    opId: string | undefined,
    fn: (tx: CounterTransaction) => Promise<number>,
  ): Promise<number>;
  /** A plain transaction of the same client: no fence at all (the negative controls). */
  unguarded(fn: (tx: CounterTransaction) => Promise<number>): Promise<number>;
  /** The counter read outside any transaction of the guard. */
  readOutside(resource: string): Promise<bigint>;
  /** Closes what the path opened (its pool, its client). */
  close(): Promise<void>;
}

/** `{ opId }` when there is one: the guards' options. */
export function opIdOption(opId: string | undefined): { opId?: string } {
  return opId === undefined ? {} : { opId };
}

/** The `kysely` path over `store`; `close` also runs `onClose` (e.g. destroys the store's pool). */
export function kyselyCounterStore(
  store: GuardedStore<CounterDb>,
  onClose: () => Promise<void> = () => Promise.resolve(),
): CounterStore {
  const inTransaction = (trx: Transaction<CounterDb>): CounterTransaction => ({
    read: (resource) => readCounter(trx, resource),
    write: (input, value) => writeCounter(trx, input, value),
  });
  return {
    path: 'kysely',
    guarded: (fence, opId, fn) => store.run(fence, (trx) => fn(inTransaction(trx)), opIdOption(opId)),
    unguarded: (fn) => store.dangerouslyRunUnguarded((trx) => fn(inTransaction(trx))),
    readOutside: (resource) => store.read((trx) => readCounter(trx, resource)),
    close: onClose,
  };
}

/** Where a critical section writes: the Kysely store itself, or a counter store of any path. */
export type CounterTarget = GuardedStore<CounterDb> | CounterStore;

export function counterStoreOf(target: CounterTarget): CounterStore {
  return 'path' in target ? target : kyselyCounterStore(target);
}

/** One increment of the counter under a token. */
export interface Increment extends CounterWrite {
  readonly token: bigint;
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
 * One read-modify-write increment in the given mode; resolves with the value written. `afterRead` runs between
 * the read and the write — inside the open transaction in the `guarded` and `unguarded` modes — so a test can
 * pause the client right there (F12) or hold it in a critical section.
 */
export async function increment(
  target: CounterTarget,
  input: Increment,
  afterRead: () => Promise<void> = () => Promise.resolve(),
): Promise<number> {
  const store = counterStoreOf(target);
  const fence = input.signed
    ? { resource: input.resource, token: input.token, ...input.signed }
    : { resource: input.resource, token: input.token, leaseId: input.leaseRef };
  switch (input.mode) {
    case 'guarded':
      return store.guarded(fence, input.opId, async (tx) => {
        const next = (await tx.read(input.resource)) + 1n;
        await afterRead();
        await tx.write(input, next);
        return Number(next);
      });
    case 'reads-outside': {
      const before = input.readBefore ?? (await store.readOutside(input.resource));
      await afterRead();
      return store.guarded(fence, input.opId, async (tx) => {
        await tx.write(input, before + 1n);
        return Number(before + 1n);
      });
    }
    case 'unguarded':
      return store.unguarded(async (tx) => {
        const next = (input.readBefore ?? (await tx.read(input.resource))) + 1n;
        await afterRead();
        await tx.write(input, next);
        return Number(next);
      });
  }
}
