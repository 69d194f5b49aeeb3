import { InvalidRequestError } from '@fenced/shared';
import express, { type Express } from 'express';
import type { Transaction } from 'kysely';
import { z } from 'zod';
import type { GuardedStore } from '../guarded-store.js';
import { fencedErrorHandler, type FencedErrorHandlerOptions } from '../middleware/fenced-error-handler.js';
import { fencedWrites, guardedWrite } from '../middleware/fenced-writes.js';
import type { ExampleDatabase } from './example-database.js';

/**
 * How the example protects its writes. Anything but 'guarded' is a negative control for the demo and the
 * fault tests, which must then observe the anomaly the guard prevents:
 * - 'reads-outside-guard': read-modify-write reads before the guarded transaction (lost updates, F18);
 * - 'unguarded': no fence at all (stale writes accepted, F1–F3).
 */
export type ExampleProtection = 'guarded' | 'reads-outside-guard' | 'unguarded';

/** Options of {@link createExampleApp}. */
export interface ExampleAppOptions {
  /** A store over a database migrated with `migrate` and `migrateExample` in the store's schema. */
  store: GuardedStore<ExampleDatabase>;
  /**
   * How writes are protected.
   * @defaultValue 'guarded'
   */
  protection?: ExampleProtection;
  /**
   * Logger for unexpected errors (e.g. pino).
   * @defaultValue undefined
   */
  logger?: FencedErrorHandlerOptions['logger'];
}

const ID = /^[A-Za-z0-9._~-]{1,128}$/;
const MAX_AMOUNT = 1_000_000_000_000n;

const documentBody = z.object({ content: z.string().max(65_536) });
const depositBody = z.object({ amount: z.union([z.string(), z.number()]) });

export interface DocumentView {
  id: string;
  content: string | null;
  version: string;
  token: string | null;
}

export interface AccountView {
  id: string;
  balance: string;
  deposits: string;
  token: string | null;
}

/**
 * The example service: a document store and an account ledger behind the guard. It never listens; see
 * `server.ts` for the process around it.
 *
 * - `PUT /documents/:id` `{ "content": "..." }` → 200 DocumentView. Guarded by resource `document:<id>`.
 * - `POST /accounts/:id/deposit` `{ "amount": "10" }` → 200 AccountView. Guarded by `account:<id>`; the balance
 *   is read and written in the guarded transaction (G4).
 * - `GET /documents/:id`, `GET /accounts/:id` → 200 (a document never written has `content: null`, an account
 *   never credited a zero balance). `GET /healthz` → 200 when the database answers.
 *
 * Writes need `Fencing-Token` (and `Fencing-Lease-Id` to write more than once per lease); `Idempotency-Key`
 * makes a retried write take effect once. Tokens travel as decimal strings.
 */
export function createExampleApp(options: ExampleAppOptions): Express {
  const { store } = options;
  const protection: ExampleProtection = options.protection ?? 'guarded';
  const schema = store.options.schema;
  const inSchema = (trx: Transaction<ExampleDatabase>) => trx.withSchema(schema);

  const app = express();
  app.disable('x-powered-by');
  app.use(express.json({ limit: '128kb' }));

  app.get('/healthz', async (_req, res) => {
    await store.read(async (trx) => trx.selectNoFrom((eb) => eb.lit(1).as('one')).execute());
    res.json({ status: 'ok' });
  });

  app.get('/documents/:id', async (req, res) => {
    const id = idOf(req);
    const row = await store.read((trx) =>
      inSchema(trx).selectFrom('example_document').selectAll().where('id', '=', id).executeTakeFirst(),
    );
    const view: DocumentView = row
      ? { id, content: row.content, version: row.version.toString(), token: row.token.toString() }
      : { id, content: null, version: '0', token: null };
    res.json(view);
  });

  app.put(
    '/documents/:id',
    fencedWrites({ store, resource: (req) => `document:${idOf(req)}` }),
    async (req, res) => {
      const id = idOf(req);
      const { content } = parseBody(documentBody, req.body);
      const write = guardedWrite<ExampleDatabase>(res);
      const token = write.token.toString();
      // Version = number of accepted writes. In 'reads-outside-guard' it is read before the guard (lost updates).
      const versionBefore =
        protection === 'reads-outside-guard'
          ? await store.read(async (trx) => BigInt((await readDocument(inSchema(trx), id))?.version ?? 0n))
          : undefined;
      const work = async (trx: Transaction<ExampleDatabase>): Promise<DocumentView> => {
        const db = inSchema(trx);
        const before = versionBefore ?? BigInt((await readDocument(db, id))?.version ?? 0n);
        const version = (before + 1n).toString();
        await db
          .insertInto('example_document')
          .values({ id, content, version, token })
          .onConflict((oc) =>
            oc.column('id').doUpdateSet({ content, version, token, updated_at: new Date() }),
          )
          .execute();
        return { id, content, version, token };
      };
      const view =
        protection === 'unguarded' ? await store.dangerouslyRunUnguarded(work) : await write.run(work);
      res.json(view);
    },
  );

  app.get('/accounts/:id', async (req, res) => {
    const id = idOf(req);
    const row = await store.read((trx) => readAccount(inSchema(trx), id));
    res.json(accountView(id, row));
  });

  app.post(
    '/accounts/:id/deposit',
    fencedWrites({ store, resource: (req) => `account:${idOf(req)}` }),
    async (req, res) => {
      const id = idOf(req);
      const amount = parseAmount(parseBody(depositBody, req.body).amount);
      const write = guardedWrite<ExampleDatabase>(res);
      const token = write.token.toString();
      // In 'reads-outside-guard' the read happens here, before the guard (the negative control): boxed, so
      // "read outside and found no account" is not mistaken for "not read yet".
      const readOutside =
        protection === 'reads-outside-guard'
          ? { row: await store.read((trx) => readAccount(inSchema(trx), id)) }
          : undefined;
      const work = async (trx: Transaction<ExampleDatabase>): Promise<AccountView> => {
        const db = inSchema(trx);
        // The read of the read-modify-write, inside the guarded transaction: this is what G4 needs.
        // BigInt(): int8 arrives as bigint through createDatabase, as a string through a plain pg pool.
        const before = readOutside === undefined ? await readAccount(db, id) : readOutside.row;
        const balance = (BigInt(before?.balance ?? 0n) + amount).toString();
        const deposits = (BigInt(before?.deposits ?? 0n) + 1n).toString();
        await db
          .insertInto('example_account')
          .values({ id, balance, deposits, token })
          .onConflict((oc) =>
            oc.column('id').doUpdateSet({ balance, deposits, token, updated_at: new Date() }),
          )
          .execute();
        return { id, balance, deposits, token };
      };
      const view =
        protection === 'unguarded' ? await store.dangerouslyRunUnguarded(work) : await write.run(work);
      res.json(view);
    },
  );

  app.use(fencedErrorHandler(options.logger === undefined ? {} : { logger: options.logger }));
  return app;
}

type SchemaDb = ReturnType<Transaction<ExampleDatabase>['withSchema']>;

function readDocument(db: SchemaDb, id: string) {
  return db.selectFrom('example_document').select(['version']).where('id', '=', id).executeTakeFirst();
}

function readAccount(db: SchemaDb, id: string) {
  return db
    .selectFrom('example_account')
    .select(['balance', 'deposits', 'token'])
    .where('id', '=', id)
    .executeTakeFirst();
}

function accountView(
  id: string,
  row: { balance: bigint; deposits: bigint; token: bigint } | undefined,
): AccountView {
  return row
    ? { id, balance: row.balance.toString(), deposits: row.deposits.toString(), token: row.token.toString() }
    : { id, balance: '0', deposits: '0', token: null };
}

function idOf(req: { readonly params: Record<string, string | undefined> }): string {
  const id = req.params.id;
  if (typeof id !== 'string' || !ID.test(id)) {
    throw new InvalidRequestError('id must be 1 to 128 characters of A-Z a-z 0-9 . _ ~ -');
  }
  return id;
}

function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new InvalidRequestError(
      `invalid body${issue && issue.path.length > 0 ? ` at ${issue.path.join('.')}` : ''}: ${issue?.message ?? 'malformed'}`,
    );
  }
  return parsed.data;
}

/** A positive whole amount up to 10^12, as a decimal string or a safe integer. */
function parseAmount(value: string | number): bigint {
  const text = typeof value === 'number' && Number.isSafeInteger(value) ? String(value) : value;
  if (typeof text !== 'string' || !/^[1-9][0-9]{0,12}$/.test(text) || BigInt(text) > MAX_AMOUNT) {
    throw new InvalidRequestError(`amount must be a whole number from 1 to ${MAX_AMOUNT}`);
  }
  return BigInt(text);
}
