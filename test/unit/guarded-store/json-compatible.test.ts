import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import { GuardedStore } from '@fenced/guarded-store';

interface Receipt {
  id: string;
  amount: number | null;
  tags: string[];
  note?: string;
}

/** Compile-time checks (tsc -p test): never called. */
export async function typeChecks(store: GuardedStore<Record<string, never>>): Promise<unknown[]> {
  const fence = { resource: 'r', token: 1n };
  const opId = { opId: 'o' };
  const receipt: Receipt = await store.run(
    fence,
    () => Promise.resolve<Receipt>({ id: 'x', amount: 1, tags: [] }),
    opId,
  );
  const nothing: undefined = await store.run(fence, () => Promise.resolve(undefined), opId);
  const text: string = await store.run(fence, () => Promise.resolve('s'), opId);
  // @ts-expect-error a Date does not survive a JSON replay
  await store.run(fence, () => Promise.resolve(new Date()), opId);
  // @ts-expect-error nor does a bigint
  await store.run(fence, () => Promise.resolve({ token: 1n }), opId);
  // Without an op id nothing is replayed, so any result type is fine.
  const date: Date = await store.run(fence, () => Promise.resolve(new Date()));
  return [receipt, nothing, text, date];
}

describe('operation results', () => {
  it('are typed as JSON when an op id may replay them (checked by tsc)', () => {
    expect(typeof typeChecks).toBe('function');
    expect(new GuardedStore({} as Kysely<Record<string, never>>).options.schema).toBe('public');
  });
});
