// The guard paths: the counter's fenced read-modify-write through each client a user can fence (DESIGN §4) — the
// Kysely store, node-postgres with PgGuard (the guard's SQL function), Prisma with PrismaGuard, Drizzle with
// DrizzleGuard — each through the package's public entry points, as a user writes it. A fault scenario or a
// worker picks one by name; the checkers judge the commit log whatever wrote it.
import { pathToFileURL } from 'node:url';
import { eq } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { bigint, bigserial, pgTable, text } from 'drizzle-orm/pg-core';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { GuardedStore, createDatabase, type GuardedStoreOptions } from '@fenced/guarded-store';
import { DrizzleGuard } from '@fenced/guarded-store/drizzle';
import { PgGuard } from '@fenced/guarded-store/pg';
import { PrismaGuard } from '@fenced/guarded-store/prisma';
import {
  kyselyCounterStore,
  opIdOption,
  type CounterStore,
  type CounterTransaction,
  type GuardPath,
} from './counter-store.js';
import type { CounterDb } from './counter-tables.js';

/** Where and how a path's client connects. */
export interface CounterStoreOptions {
  readonly path: GuardPath;
  readonly connectionString: string;
  /** The schema of the counter tables and of the guard's own (the guard's `schema`, the clients' search path). */
  readonly schema: string;
  readonly maxConnections: number;
  /** Postgres `application_name` of the path's connections (scenarios find their sessions by it). */
  readonly applicationName: string;
  /** The guard's options (timeouts). */
  readonly guardOptions?: Omit<GuardedStoreOptions, 'schema'>;
  /** The generated client of counter.prisma (e.g. the fault suite's `prismaClientFile()`), for the `prisma` path. */
  readonly prismaClient?: string;
}

/** Opens the counter through `options.path`: its own pool (or client), closed by `close()`. */
export async function openCounterStore(options: CounterStoreOptions): Promise<CounterStore> {
  switch (options.path) {
    case 'kysely':
      return kyselyStore(options);
    case 'sql-function':
      return nodePostgresStore(options);
    case 'drizzle':
      return drizzleStore(options);
    case 'prisma':
      return prismaStore(options);
  }
}

function kyselyStore(options: CounterStoreOptions): CounterStore {
  const db = createDatabase<CounterDb>({
    connectionString: options.connectionString,
    searchPath: options.schema,
    maxConnections: options.maxConnections,
    applicationName: options.applicationName,
  });
  const store = new GuardedStore(db, { ...options.guardOptions, schema: options.schema });
  return kyselyCounterStore(store, () => db.destroy());
}

/**
 * A pg pool on the counter's schema. A session Postgres ends (F12's idle transaction) makes its client emit
 * `error`, idle or checked out; node-postgres would throw it as an uncaught exception, so every client gets a
 * listener (the query in flight, or the next one, still fails).
 */
function pool(options: CounterStoreOptions): pg.Pool {
  const created = new pg.Pool({
    connectionString: options.connectionString,
    max: options.maxConnections,
    application_name: options.applicationName,
    options: `-c search_path=${options.schema}`,
  });
  created.on('error', () => undefined);
  created.on('connect', (client) => client.on('error', () => undefined));
  return created;
}

/** `sql-function`: node-postgres, fenced by PgGuard (the guard's SQL function), plain SQL inside. */
function nodePostgresStore(options: CounterStoreOptions): CounterStore {
  const guard = new PgGuard({ ...options.guardOptions, schema: options.schema });
  const clients = pool(options);
  const inTransaction = (client: pg.PoolClient): CounterTransaction => ({
    read: async (resource) => {
      const { rows } = await client.query<{ value: string }>(
        'select value::text as value from counter where resource = $1',
        [resource],
      );
      return BigInt(rows[0]?.value ?? 0);
    },
    write: async (input, value) => {
      await client.query('update counter set value = $1::bigint where resource = $2', [
        value.toString(),
        input.resource,
      ]);
      await client.query(
        `insert into commit_log (resource, token, lease_ref, process, op_id, value, via)
         values ($1, $2::bigint, $3, $4, $5, $6::bigint, $7)`,
        [
          input.resource,
          input.token?.toString() ?? null,
          input.leaseRef,
          input.process,
          input.opId ?? null,
          value.toString(),
          input.via ?? null,
        ],
      );
    },
  });
  return {
    path: 'sql-function',
    guarded: (fence, opId, fn) =>
      guard.run<pg.PoolClient, number>(
        clients,
        fence,
        (client) => fn(inTransaction(client)),
        opIdOption(opId),
      ),
    unguarded: async (fn) => {
      const client = await clients.connect();
      let broken: Error | undefined;
      try {
        await client.query('begin');
        const value = await fn(inTransaction(client));
        await client.query('commit');
        return value;
      } catch (error) {
        await client.query('rollback').catch((e: unknown) => (broken = e as Error));
        throw error;
      } finally {
        client.release(broken);
      }
    },
    readOutside: async (resource) => {
      const { rows } = await clients.query<{ value: string }>(
        'select value::text as value from counter where resource = $1',
        [resource],
      );
      return BigInt(rows[0]?.value ?? 0);
    },
    close: () => clients.end(),
  };
}

const counter = pgTable('counter', {
  resource: text('resource').primaryKey(),
  value: bigint('value', { mode: 'bigint' }).notNull(),
});

const commitLog = pgTable('commit_log', {
  seq: bigserial('seq', { mode: 'bigint' }).primaryKey(),
  resource: text('resource').notNull(),
  token: bigint('token', { mode: 'bigint' }),
  leaseRef: text('lease_ref'),
  process: text('process'),
  opId: text('op_id'),
  value: bigint('value', { mode: 'bigint' }).notNull(),
  via: text('via'),
});

/** `drizzle`: Drizzle over node-postgres, fenced by DrizzleGuard, its query builder inside. */
function drizzleStore(options: CounterStoreOptions): CounterStore {
  const guard = new DrizzleGuard({ ...options.guardOptions, schema: options.schema });
  const clients = pool(options);
  const db = drizzle(clients);
  type Tx = Parameters<Parameters<typeof db.transaction>[0]>[0];
  const read = async (q: typeof db | Tx, resource: string): Promise<bigint> => {
    const rows = await q.select({ value: counter.value }).from(counter).where(eq(counter.resource, resource));
    return rows[0]?.value ?? 0n;
  };
  const inTransaction = (tx: Tx): CounterTransaction => ({
    read: (resource) => read(tx, resource),
    write: async (input, value) => {
      await tx.update(counter).set({ value }).where(eq(counter.resource, input.resource));
      await tx.insert(commitLog).values({
        resource: input.resource,
        token: input.token,
        leaseRef: input.leaseRef,
        process: input.process,
        opId: input.opId ?? null,
        value,
        via: input.via ?? null,
      });
    },
  });
  return {
    path: 'drizzle',
    guarded: (fence, opId, fn) => guard.run(db, fence, (tx) => fn(inTransaction(tx)), opIdOption(opId)),
    unguarded: (fn) => db.transaction((tx) => fn(inTransaction(tx))),
    readOutside: (resource) => read(db, resource),
    close: () => clients.end(),
  };
}

/** What the counter's generated Prisma client offers (counter.prisma), typed here structurally. */
interface PrismaCounterTx {
  counter: {
    findUnique(args: { where: { resource: string } }): Promise<{ value: bigint } | null>;
    update(args: { where: { resource: string }; data: { value: bigint } }): Promise<unknown>;
  };
  commitLog: {
    create(args: {
      data: {
        resource: string;
        token: bigint | null;
        leaseRef: string;
        process: string;
        opId: string | null;
        value: bigint;
        via: string | null;
      };
    }): Promise<unknown>;
  };
  $queryRawUnsafe<R = unknown>(query: string, ...values: unknown[]): Promise<R>;
}

interface PrismaCounterClient extends PrismaCounterTx {
  $transaction<R>(
    fn: (tx: PrismaCounterTx) => Promise<R>,
    options?: { isolationLevel?: 'ReadCommitted' | 'RepeatableRead' | 'Serializable'; timeout?: number },
  ): Promise<R>;
  $disconnect(): Promise<void>;
}

type PrismaCounterClientClass = new (options: {
  adapter: PrismaPg;
  transactionOptions?: { maxWait?: number; timeout?: number };
}) => PrismaCounterClient;

/**
 * How long a Prisma interactive transaction may wait to start and to run: longer than any pause or held link of
 * a scenario, so that only the guard (or Postgres) ends a stalled writer, never Prisma's own timers.
 */
const PRISMA_TRANSACTION_MS = 60_000;

/** `prisma`: Prisma 7 over @prisma/adapter-pg, fenced by PrismaGuard, the client's models inside. */
async function prismaStore(options: CounterStoreOptions): Promise<CounterStore> {
  if (options.prismaClient === undefined)
    throw new Error('the prisma path needs prismaClient (the generated client of counter.prisma)');
  const { PrismaClient } = (await import(pathToFileURL(options.prismaClient).href)) as {
    PrismaClient: PrismaCounterClientClass;
  };
  const adapter = new PrismaPg(
    {
      connectionString: options.connectionString,
      max: options.maxConnections,
      application_name: options.applicationName,
    },
    { schema: options.schema },
  );
  const prisma = new PrismaClient({
    adapter,
    transactionOptions: { maxWait: PRISMA_TRANSACTION_MS, timeout: PRISMA_TRANSACTION_MS },
  });
  const guard = new PrismaGuard({
    ...options.guardOptions,
    schema: options.schema,
    transactionTimeoutMs: PRISMA_TRANSACTION_MS,
  });
  const read = async (q: PrismaCounterTx, resource: string): Promise<bigint> =>
    (await q.counter.findUnique({ where: { resource } }))?.value ?? 0n;
  const inTransaction = (tx: PrismaCounterTx): CounterTransaction => ({
    read: (resource) => read(tx, resource),
    write: async (input, value) => {
      await tx.counter.update({ where: { resource: input.resource }, data: { value } });
      await tx.commitLog.create({
        data: {
          resource: input.resource,
          token: input.token,
          leaseRef: input.leaseRef,
          process: input.process,
          opId: input.opId ?? null,
          value,
          via: input.via ?? null,
        },
      });
    },
  });
  return {
    path: 'prisma',
    guarded: (fence, opId, fn) => guard.run(prisma, fence, (tx) => fn(inTransaction(tx)), opIdOption(opId)),
    unguarded: (fn) => prisma.$transaction((tx) => fn(inTransaction(tx))),
    readOutside: (resource) => read(prisma, resource),
    close: () => prisma.$disconnect(),
  };
}
