/**
 * A worker that protects a read-modify-write with a lease and the guard, using the libraries directly.
 * Run: FENCED_REDIS_URLS=redis://…,redis://…,redis://… FENCED_DATABASE_URL=postgres://… FENCED_SCHEMA=app \
 *      node --conditions=@fenced/source --import tsx examples/library-worker.ts
 */
import { Coordinator } from '@fenced/coordinator';
import { GuardedStore, createDatabase } from '@fenced/guarded-store';
import { sql } from 'kysely';

interface Tables {
  invoice: { id: number; total: number };
}

const redisUrls = process.env.FENCED_REDIS_URLS?.split(',') ?? [];
const databaseUrl = process.env.FENCED_DATABASE_URL;
const schema = process.env.FENCED_SCHEMA ?? 'public';
if (redisUrls.length === 0 || databaseUrl === undefined) {
  throw new Error('set FENCED_REDIS_URLS (comma-separated redis:// URLs) and FENCED_DATABASE_URL');
}

const coordinator = new Coordinator({ nodes: redisUrls });
const db = createDatabase<Tables>({ connectionString: databaseUrl, searchPath: schema });
const store = new GuardedStore(db, { schema });
await store.migrate(); // the fence tables; safe from many processes at once
await sql`create table if not exists invoice (id int primary key, total int not null)`.execute(db);
await sql`insert into invoice values (42, 0) on conflict do nothing`.execute(db);

// using(): acquires, keeps the lease extended, aborts `signal` when the lease is lost, always releases.
await coordinator.using('invoice:42', { ttlMs: 10_000, waitMs: 5_000 }, async (lease, signal) => {
  await store.fenceIn(lease); // from here on, every older holder is locked out (G3)
  signal.throwIfAborted();
  // Reads and writes in ONE guarded transaction: the fence is checked and raised first (G1, G4).
  await store.run(lease, async (trx) => {
    const row = await trx
      .selectFrom('invoice')
      .select('total')
      .where('id', '=', 42)
      .forUpdate()
      .executeTakeFirstOrThrow();
    await trx
      .updateTable('invoice')
      .set({ total: row.total + 10 })
      .where('id', '=', 42)
      .execute();
  });
});

// By hand, with explicit resource management: released at the end of the block.
{
  await using lease = await coordinator.acquire('invoice:42', { ttlMs: 10_000 });
  console.log(`token ${lease.token}, valid for ${Math.round(lease.remainingMs())} ms`);
  await lease.extend(10_000); // same token; LeaseLostError if the lease was lost meanwhile
}

await coordinator.close();
await db.destroy();
