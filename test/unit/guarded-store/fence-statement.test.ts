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

  it('runs one fence as a prepared UPDATE of the existing row, with a literal fallback', () => {
    const { text, prepared } = statements.statement(
      normalizeFences({ resource: 'r', token: MAX_TOKEN, leaseId: 'lease' }),
    );
    const hash = String.raw` +E'\\\\x[0-9a-f]{64}'::bytea`;
    expect(text).toMatch(
      new RegExp(
        String.raw`;\nupdate "app"\.fence as f set token = 9223372036854775807::bigint, lease_id_hash =${hash}, updated_at = now\(\)\n`,
      ),
    );
    expect(text).toMatch(/\n where f\.resource = 'r'::text\n/);
    expect(text).toMatch(
      new RegExp(
        String.raw`\n   and \(f\.token < 9223372036854775807::bigint or \(f\.token = 9223372036854775807::bigint and f\.lease_id_hash =${hash}\)\)$`,
      ),
    );
    expect(text).not.toMatch(/insert|on conflict|order by|\(values|returning/);
    expect(prepared?.name).toMatch(/^fenced_fence_[0-9a-f]{16}_app$/);
    expect(prepared?.prepare).toMatch(
      /^prepare fenced_fence_[0-9a-f]{16}_app \(text, bigint, bytea\) as\nupdate "app"\.fence as f set token = \$2, lease_id_hash = \$3, /,
    );
    expect(prepared?.prepare).toContain('and (f.token < $2 or (f.token = $2 and f.lease_id_hash = $3))');
    expect(prepared?.prepare).not.toMatch(/insert|on conflict|returning/);
    expect(prepared?.execute).toMatch(
      /;\nexecute fenced_fence_[0-9a-f]{16}_app\('r'::text, 9223372036854775807::bigint, +E'\\\\x[0-9a-f]{64}'::bytea\)$/,
    );
  });

  it('inserts or raises one fence under the same condition, as literals without the settings', () => {
    const { text, prepared } = statements.insertOrRaise(
      normalizeFences({ resource: 'r', token: 7n, leaseId: 'lease' })[0]!,
    );
    expect(prepared).toBeUndefined();
    expect(text).toMatch(
      /^insert into "app"\.fence as f \(resource, token, lease_id_hash\)\nvalues \('r'::text, 7::bigint, +E'\\\\x[0-9a-f]{64}'::bytea\)\non conflict \(resource\) do update/,
    );
    expect(text).toContain(
      'where f.token < excluded.token\n    or (f.token = excluded.token and f.lease_id_hash = excluded.lease_id_hash)',
    );
    expect(text).toMatch(/returning f\.resource$/);
    expect(text).not.toContain('set local');
  });

  it('escapes resource names as literals', () => {
    const { prepared } = statements.statement(normalizeFences({ resource: `a'b\\c; --`, token: 1n }));
    expect(prepared?.execute).toContain(
      `execute ${prepared!.name}( E'a''b\\\\c; --'::text, 1::bigint, null::bytea)`,
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
  });

  it('names the prepared statement per schema, within 63 bytes', () => {
    const a = new LiteralFenceStatements('a', settings).statement(
      normalizeFences({ resource: 'r', token: 1n }),
    );
    const b = new LiteralFenceStatements('b', settings).statement(
      normalizeFences({ resource: 'r', token: 1n }),
    );
    expect(a.prepared?.name).not.toBe(b.prepared?.name);
    const long = new LiteralFenceStatements('s'.repeat(63), settings).statement(
      normalizeFences({ resource: 'r', token: 1n }),
    );
    expect(long.prepared?.name).toHaveLength(63);
  });
});
