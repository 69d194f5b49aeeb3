import { StaleTokenError } from '@fenced/shared';
import type { Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ConnectionLostError,
  GuardedStore,
  MigrationMissingError,
  createDatabase,
} from '@fenced/guarded-store';
import { freePort } from '@fenced/test-utils/free-port';
import { storePoolOf } from '../../../packages/guarded-store/src/db/guard-driver.js';
import { createStoreFixture, unique, type StoreFixture } from '../../fixtures/guarded-store-fixture.js';
import { createTestSchema, type TestSchema } from '@fenced/test-utils/postgres';

describe('guarded store errors say what happened and what to do', () => {
  let fixture: StoreFixture<unknown>;
  let unmigrated: TestSchema;
  let db: Kysely<unknown>;

  beforeAll(async () => {
    fixture = await createStoreFixture();
    unmigrated = await createTestSchema(fixture.server, 'fenced_gs_unmigrated');
    db = createDatabase<unknown>({ connectionString: fixture.server.url, maxConnections: 2 });
  });
  afterAll(async () => {
    await db?.destroy();
    await unmigrated?.drop();
    await fixture?.close();
  });

  it('throws MigrationMissingError, naming store.migrate(), when the tables were never created', async () => {
    const store = new GuardedStore(db, { schema: unmigrated.schema });
    const error = await store
      .run({ resource: 'r', token: 1n }, () => Promise.resolve())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MigrationMissingError);
    expect((error as MigrationMissingError).sqlstate).toBe('42P01');
    expect((error as MigrationMissingError).code).toBe('MIGRATION_MISSING');
    expect((error as Error).message).toBe(
      `the guarded store's tables do not exist in schema "${unmigrated.schema}" ` +
        `(relation "${unmigrated.schema}.fence" does not exist): call store.migrate() ` +
        `(or migrate(db, { schema: '${unmigrated.schema}' })) once before using the store; it is safe to run ` +
        'from every process at start-up',
    );
    await expect(store.fenceOf('r')).rejects.toBeInstanceOf(MigrationMissingError);
  });

  it('leaves a missing table of the callback alone: that is the caller’s own error', async () => {
    const error = await fixture.store
      .run({ resource: unique('r'), token: 1n }, async (trx) => {
        await trx
          .selectFrom('no_such_table' as never)
          .selectAll()
          .execute();
      })
      .catch((e: unknown) => e);
    expect(error).not.toBeInstanceOf(MigrationMissingError);
    expect((error as { code?: unknown }).code).toBe('42P01');
  });

  it('names the resource when a lower token is refused', async () => {
    const resource = unique('doc');
    await fixture.store.run({ resource, token: 7n }, () => Promise.resolve());
    const error = await fixture.store
      .run({ resource, token: 5n }, () => Promise.resolve())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StaleTokenError);
    expect((error as Error).message).toBe(
      `stale fencing token for resource ${JSON.stringify(resource)}: presented 5, but the fence is at 7 ` +
        '(a later lease has written): this holder lost the resource and must stop',
    );
  });

  it('says an equal token without a lease id is refused, and how to send the lease id', async () => {
    const resource = unique('doc');
    await fixture.store.run({ resource, token: 7n }, () => Promise.resolve());
    const error = await fixture.store
      .run({ resource, token: 7n }, () => Promise.resolve())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StaleTokenError);
    expect((error as Error).message).toContain(
      `fencing token 7 for resource ${JSON.stringify(resource)} equals the fence, and this write named no lease`,
    );
    expect((error as Error).message).toContain('Fencing-Lease-Id header, or store.run(lease, …)');
  });

  it('says an equal token from another lease is refused', async () => {
    const resource = unique('doc');
    await fixture.store.run({ resource, token: 7n, leaseId: 'lease-a' }, () => Promise.resolve());
    await fixture.store.run({ resource, token: 7n, leaseId: 'lease-a' }, () => Promise.resolve());
    const error = await fixture.store
      .run({ resource, token: 7n, leaseId: 'lease-b' }, () => Promise.resolve())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StaleTokenError);
    expect((error as Error).message).toContain(
      `fencing token 7 for resource ${JSON.stringify(resource)} equals the fence, which another lease`,
    );
  });
});

describe('a Postgres that cannot be reached', () => {
  it('gives ConnectionLostError naming the host and port it tried', async () => {
    const port = await freePort(); // nothing listens there
    const db = createDatabase<unknown>({
      connectionString: `postgres://postgres@127.0.0.1:${port}/postgres`,
    });
    try {
      const error = await new GuardedStore(db)
        .run({ resource: 'r', token: 1n }, () => Promise.resolve())
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConnectionLostError);
      expect((error as Error).message).toContain(
        `could not connect to Postgres at 127.0.0.1:${port} (ECONNREFUSED`,
      );
      expect((error as ConnectionLostError).retryable).toBe(true);
    } finally {
      await db.destroy();
    }
  });
});

describe('createDatabase', () => {
  it('closes its pool on destroy() also when only a GuardedStore used it', async () => {
    const fixture = await createStoreFixture();
    const db = createDatabase<unknown>({
      connectionString: fixture.server.url,
      searchPath: fixture.schema.schema,
    });
    try {
      const store = new GuardedStore(db, { schema: fixture.schema.schema });
      await store.run({ resource: unique('r'), token: 1n }, () => Promise.resolve());
      const pool = storePoolOf(db)!;
      expect(pool.totalCount).toBeGreaterThan(0);
      await db.destroy();
      expect(pool.ended).toBe(true);
      expect(pool.totalCount).toBe(0);
    } finally {
      await db.destroy();
      await fixture.close();
    }
  });
});
