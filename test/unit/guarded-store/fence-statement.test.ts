import { MAX_TOKEN } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import { normalizeFences } from '../../../packages/guarded-store/src/fence.js';
import { LiteralFenceStatements } from '../../../packages/guarded-store/src/fence-statement.js';

const settings = { lockTimeoutMs: 10_000, idleInTransactionTimeoutMs: 5_000 };

describe('LiteralFenceStatements', () => {
  const statements = new LiteralFenceStatements('app', settings);

  it('sets the three settings locally, before the fence statement', () => {
    const { text } = statements.statement(normalizeFences({ resource: 'r', token: 5n }));
    expect(text.split(';\n').slice(0, 3)).toEqual([
      'set local lock_timeout = 10000',
      'set local idle_in_transaction_session_timeout = 5000',
      'set local synchronous_commit = on',
    ]);
  });

  it('runs one fence as a prepared UPDATE of a lower row, or after the same fence a prepared SELECT … FOR UPDATE, with a literal fallback', () => {
    const own = new LiteralFenceStatements('app', settings);
    const [fence] = normalizeFences({ resource: 'r', token: MAX_TOKEN, leaseId: 'lease' });
    const hash = String.raw` +E'\\\\x[0-9a-f]{64}'::bytea`;
    const values = String.raw`\('r'::text, 9223372036854775807::bigint,${hash}\)`;
    const first = own.statement([fence!]);
    const [lock, raise] = first.prepared!.statements;
    expect(first.prepared!.statements).toHaveLength(2);
    expect(lock!.name).toMatch(/^fenced_fence_[0-9a-f]{16}_app$/);
    expect(raise!.name).toMatch(/^fenced_fence_[0-9a-f]{16}_app$/);
    expect(lock!.name).not.toBe(raise!.name);
    expect(lock!.prepare).toBe(
      `prepare ${lock!.name} (text, bigint, bytea) as\nselect f.resource from "app".fence as f\n where f.resource = $1 and f.token = $2 and f.lease_id_hash = $3\n   for update`,
    );
    expect(raise!.prepare).toBe(
      `prepare ${raise!.name} (text, bigint, bytea) as\nupdate "app".fence as f set token = $2, lease_id_hash = $3, updated_at = now()\n where f.resource = $1 and f.token < $2`,
    );
    // Nothing fenced yet by this store: the UPDATE.
    expect(first.prepared!.execute).toMatch(new RegExp(String.raw`;\nexecute ${raise!.name}${values}$`));
    expect(first.text.split(';\n')).toHaveLength(4);
    expect(first.text.split(';\n')[3]).toMatch(
      new RegExp(
        String.raw`^update "app"\.fence as f set token = 9223372036854775807::bigint, lease_id_hash =${hash}, updated_at = now\(\)\n where f\.resource = 'r'::text and f\.token < 9223372036854775807::bigint$`,
      ),
    );
    // After this store fenced it: the SELECT … FOR UPDATE for the same token and lease, the UPDATE otherwise.
    own.fenced(fence!);
    const again = own.statement([fence!]);
    expect(again.prepared!.execute).toMatch(new RegExp(String.raw`;\nexecute ${lock!.name}${values}$`));
    expect(again.text.split(';\n')[3]).toMatch(
      new RegExp(
        String.raw`^select f\.resource from "app"\.fence as f\n where f\.resource = 'r'::text and f\.token = 9223372036854775807::bigint and f\.lease_id_hash =${hash}\n   for update$`,
      ),
    );
    for (const other of [
      { resource: 'r', token: 5n, leaseId: 'lease' },
      { resource: 'r', token: MAX_TOKEN, leaseId: 'another' },
      { resource: 'r', token: MAX_TOKEN },
      { resource: 's', token: MAX_TOKEN, leaseId: 'lease' },
    ]) {
      expect(own.statement(normalizeFences(other)).prepared!.execute).toContain(`execute ${raise!.name}(`);
    }
    for (const { text } of [first, again]) {
      expect(text).not.toMatch(/insert|on conflict|order by|\(values|returning|f\.token <=/);
    }
  });

  it('remembers a bounded number of fences, the oldest forgotten first', () => {
    const own = new LiteralFenceStatements('app', settings);
    const fenceOf = (i: number) => normalizeFences({ resource: `r${i}`, token: 1n, leaseId: 'l' })[0]!;
    const guessesEqual = (i: number) =>
      own
        .statement([fenceOf(i)])
        .prepared!.execute.includes(own.statement([fenceOf(i)]).prepared!.statements[0]!.name);
    for (let i = 0; i <= 4096; i++) own.fenced(fenceOf(i));
    expect(guessesEqual(0)).toBe(false);
    expect(guessesEqual(1)).toBe(true);
    expect(guessesEqual(4096)).toBe(true);
  });

  it('inserts or raises one fence only when lower, then selects the row at this token from this lease, as literals without the settings', () => {
    const { text, prepared } = statements.insertOrRaise(
      normalizeFences({ resource: 'r', token: 7n, leaseId: 'lease' })[0]!,
    );
    expect(prepared).toBeUndefined();
    expect(text).toMatch(
      /^insert into "app"\.fence as f \(resource, token, lease_id_hash\)\nvalues \('r'::text, 7::bigint, +E'\\\\x[0-9a-f]{64}'::bytea\)\non conflict \(resource\) do update/,
    );
    expect(text).toContain('where f.token < excluded.token\nreturning f.resource;\n');
    expect(text).not.toContain('f.token = excluded.token');
    expect(text).toMatch(
      /\nselect f\.resource from "app"\.fence as f\n {2}join \(values \('r'::text, 7::bigint, +E'\\\\x[0-9a-f]{64}'::bytea\)\) as v \(resource, token, lease_id_hash\)\n {4}on f\.resource = v\.resource and f\.token = v\.token and f\.lease_id_hash = v\.lease_id_hash$/,
    );
    expect(text).not.toContain('set local');
  });

  it('escapes resource names as literals', () => {
    const { prepared } = statements.statement(normalizeFences({ resource: `a'b\\c; --`, token: 1n }));
    expect(prepared?.execute).toContain(
      `execute ${prepared!.statements[1]!.name}( E'a''b\\\\c; --'::text, 1::bigint, null::bytea)`,
    );
  });

  it('locks several fences in the sorted order through one VALUES statement, not prepared', () => {
    const { text, prepared } = statements.statement(
      normalizeFences([
        { resource: 'b', token: 2n },
        { resource: 'a', token: 1n },
      ]),
    );
    expect(prepared).toBeUndefined();
    expect(text).toContain(
      `(values ('a'::text, 1::bigint, null::bytea, 0), ('b'::text, 2::bigint, null::bytea, 1))`,
    );
    expect(text).toContain('order by v.ord');
    expect(text).toContain('where f.token < excluded.token\nreturning f.resource;\nselect f.resource from');
    expect(text).toContain(
      `join (values ('a'::text, 1::bigint, null::bytea), ('b'::text, 2::bigint, null::bytea))`,
    );
  });

  it('names the prepared statement per schema, within 63 bytes', () => {
    const a = new LiteralFenceStatements('a', settings).statement(
      normalizeFences({ resource: 'r', token: 1n }),
    );
    const b = new LiteralFenceStatements('b', settings).statement(
      normalizeFences({ resource: 'r', token: 1n }),
    );
    expect(a.prepared?.statements[0]?.name).not.toBe(b.prepared?.statements[0]?.name);
    const long = new LiteralFenceStatements('s'.repeat(63), settings).statement(
      normalizeFences({ resource: 'r', token: 1n }),
    );
    for (const { name } of long.prepared!.statements) expect(name).toHaveLength(63);
  });
});
