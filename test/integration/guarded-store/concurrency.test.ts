import { StaleTokenError } from '@fenced/shared';
import { sql, type Transaction } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GuardedStore } from '@fenced/guarded-store';
import { createStoreFixture, unique, type StoreFixture } from '../../fixtures/guarded-store-fixture.js';

interface Db {
  audit: { seq: string; resource: string; token: string; prev_seq: string | null };
  counter: { resource: string; value: string };
}

let f: StoreFixture<Db>;
let wide: GuardedStore<Db>;

const CONNECTIONS = 32;

beforeAll(async () => {
  f = await createStoreFixture<Db>();
  wide = f.anotherStore({ maxConnections: CONNECTIONS });
  await f.sql(`
    create table audit (seq bigserial primary key, resource text not null, token bigint not null, prev_seq bigint);
    create table counter (resource text primary key, value bigint not null);`);
});
afterAll(async () => {
  await f?.close();
});

/**
 * One link of the audit chain, written inside the transaction: the new row points at the newest row of its
 * resource visible when it was written. If the transactions of a resource ran one after another, each row
 * points at the row just before it; if two overlapped, both point at the same predecessor.
 */
async function appendAudit(trx: Transaction<Db>, resource: string, token: bigint): Promise<void> {
  await sql`
    insert into audit (resource, token, prev_seq)
    select ${resource}, ${token.toString()}::bigint, (select max(seq) from audit where resource = ${resource})`.execute(
    trx,
  );
}

interface ChainViolation {
  resource: string;
  seq: string;
  problem: string;
}

/** The checker: per resource, in commit (seq) order, tokens never decrease and every link follows the last. */
async function checkAuditChain(resources: readonly string[]): Promise<ChainViolation[]> {
  const violations: ChainViolation[] = [];
  for (const resource of resources) {
    const rows = await f.sql<{ seq: string; token: string; prev_seq: string | null }>(
      'select seq::text, token::text, prev_seq::text from audit where resource = $1 order by audit.seq',
      [resource],
    );
    let previous: { seq: string; token: bigint } | undefined;
    for (const row of rows) {
      const token = BigInt(row.token);
      if (previous !== undefined && token < previous.token) {
        violations.push({
          resource,
          seq: row.seq,
          problem: `token ${token} committed after ${previous.token}`,
        });
      }
      if (row.prev_seq !== (previous?.seq ?? null)) {
        violations.push({
          resource,
          seq: row.seq,
          problem: `overlapped: saw ${row.prev_seq}, not ${previous?.seq}`,
        });
      }
      previous = { seq: row.seq, token };
    }
  }
  return violations;
}

async function randomTokenStorm(
  resources: readonly string[],
  write: (resource: string, token: bigint, leaseId: string) => Promise<void>,
): Promise<{ accepted: number; refused: number }> {
  let accepted = 0;
  let refused = 0;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, worker) => {
      for (let i = 0; i < 8; i++) {
        const resource = resources[Math.floor(Math.random() * resources.length)]!;
        const token = BigInt(1 + Math.floor(Math.random() * 500));
        try {
          await write(resource, token, `w${worker}-${i}`);
          accepted += 1;
        } catch (error) {
          if (!(error instanceof StaleTokenError)) throw error;
          refused += 1;
        }
      }
    }),
  );
  return { accepted, refused };
}

describe('G1: guarded transactions commit in token order', () => {
  it('keeps every resource’s committed tokens non-decreasing under 32 concurrent connections', async () => {
    const resources = [unique('g1'), unique('g1'), unique('g1')];
    const { accepted, refused } = await randomTokenStorm(resources, (resource, token, leaseId) =>
      wide.run({ resource, token, leaseId }, (trx) => appendAudit(trx, resource, token)),
    );
    expect(accepted + refused).toBe(CONNECTIONS * 8);
    expect(await checkAuditChain(resources)).toEqual([]);
    const [{ n } = { n: -1 }] = await f.sql<{ n: number }>(
      'select count(*)::int as n from audit where resource = any($1)',
      [resources],
    );
    expect(n).toBe(accepted);
    for (const resource of resources) {
      const [last] = await f.sql<{ token: string }>(
        'select token::text from audit where resource = $1 order by audit.seq desc limit 1',
        [resource],
      );
      if (last) expect((await f.store.fenceOf(resource))?.token).toBe(BigInt(last.token));
    }
  });

  it('negative control: the same storm without the guard breaks the checker', async () => {
    const resources = [unique('g1-neg'), unique('g1-neg'), unique('g1-neg')];
    await randomTokenStorm(resources, (resource, token) =>
      wide.dangerouslyRunUnguarded((trx) => appendAudit(trx, resource, token)),
    );
    const violations = await checkAuditChain(resources);
    expect(violations.some((v) => v.problem.startsWith('token'))).toBe(true);
  });
});

/** Overlapping lease holders: tokens handed out in increasing order, as the coordinator does (G2). */
function tokenSource(): () => bigint {
  let next = 0n;
  return () => (next += 1n);
}

async function counterValue(resource: string): Promise<bigint> {
  const [row] = await f.sql<{ value: string }>('select value::text from counter where resource = $1', [
    resource,
  ]);
  return BigInt(row?.value ?? 0);
}

async function readCounter(trx: Transaction<Db>, resource: string): Promise<bigint> {
  const row = await trx
    .selectFrom('counter')
    .select('value')
    .where('resource', '=', resource)
    .executeTakeFirst();
  return BigInt(row?.value ?? 0);
}

async function writeCounter(trx: Transaction<Db>, resource: string, value: bigint): Promise<void> {
  await trx
    .insertInto('counter')
    .values({ resource, value: value.toString() })
    .onConflict((oc) => oc.column('resource').doUpdateSet({ value: value.toString() }))
    .execute();
}

describe('G4: read-modify-write inside the guard loses no update', () => {
  it('counts exactly the accepted transactions when many holders overlap', async () => {
    const resource = unique('g4');
    const grant = tokenSource();
    let accepted = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (let i = 0; i < 10; i++) {
          const token = grant();
          try {
            await wide.run({ resource, token }, async (trx) => {
              const value = await readCounter(trx, resource);
              await new Promise((resolve) => setImmediate(resolve)); // let the others interleave
              await writeCounter(trx, resource, value + 1n);
            });
            accepted += 1;
          } catch (error) {
            if (!(error instanceof StaleTokenError)) throw error;
          }
        }
      }),
    );
    expect(accepted).toBeGreaterThan(0);
    expect(await counterValue(resource)).toBe(BigInt(accepted));
  });

  /** Two holders overlap: A (older token) is inside its critical section when B starts. */
  async function overlap(readOutside: boolean): Promise<{ accepted: number; final: bigint }> {
    const resource = unique('g4-pair');
    const grant = tokenSource();
    const a = grant();
    const b = grant();
    let aInside!: () => void;
    const aEntered = new Promise<void>((resolve) => (aInside = resolve));
    let bReadDone!: () => void;
    const bRead = new Promise<void>((resolve) => (bReadDone = resolve));
    const readA = readOutside ? await f.store.read((trx) => readCounter(trx, resource)) : undefined;
    const first = f.store.run({ resource, token: a }, async (trx) => {
      const value = readA ?? (await readCounter(trx, resource));
      aInside();
      await bRead; // B has made its read (or is blocked on A's fence) before A writes
      await writeCounter(trx, resource, value + 1n);
    });
    await aEntered;
    const readB = readOutside ? await f.store.read((trx) => readCounter(trx, resource)) : undefined;
    if (readOutside) bReadDone();
    const second = f.store.run({ resource, token: b }, async (trx) => {
      const value = readB ?? (await readCounter(trx, resource));
      await writeCounter(trx, resource, value + 1n);
    });
    if (!readOutside) bReadDone(); // B reads inside its transaction, which waits for A's fence row
    await first;
    await second;
    return { accepted: 2, final: await counterValue(resource) };
  }

  it('serializes two overlapping holders whose reads are inside the guard', async () => {
    const { accepted, final } = await overlap(false);
    expect(final).toBe(BigInt(accepted));
  });

  it('negative control: reading outside the guard and writing inside loses an update', async () => {
    const { accepted, final } = await overlap(true);
    expect(final).toBeLessThan(BigInt(accepted));
    expect(final).toBe(1n);
  });
});
