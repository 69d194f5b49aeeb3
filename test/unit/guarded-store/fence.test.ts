import { createHash } from 'node:crypto';
import { InvalidRequestError, MAX_TOKEN } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import { hashLeaseId, normalizeFences, validateOpId } from '../../../packages/guarded-store/src/fence.js';

describe('normalizeFences', () => {
  it('takes one fence, a coordinator lease, or a list', () => {
    expect(normalizeFences({ resource: 'a', token: 1n })).toEqual([
      { resource: 'a', token: 1n, leaseIdHash: null },
    ]);
    const [fromLease] = normalizeFences({ resource: 'a', id: 'lease', token: 2n });
    expect(fromLease?.leaseIdHash).toEqual(createHash('sha256').update('lease').digest());
    expect(normalizeFences([{ resource: 'a', token: 1n, leaseId: 'lease' }])[0]?.leaseIdHash).toEqual(
      fromLease?.leaseIdHash,
    );
  });

  it('sorts by UTF-8 bytes, the same order in every process (no deadlocks between fences)', () => {
    const resources = ['b', 'a', '\u{1F600}', '\uFFFF', 'B', 'é'];
    const sorted = normalizeFences(resources.map((resource) => ({ resource, token: 1n }))).map(
      (f) => f.resource,
    );
    // UTF-16 code-unit order would put the emoji (a surrogate pair) before U+FFFF; byte order puts it after.
    expect(sorted).toEqual(['B', 'a', 'b', 'é', '\uFFFF', '\u{1F600}']);
  });

  it.each([
    ['an empty list', []],
    [
      'a repeated resource',
      [
        { resource: 'a', token: 1n },
        { resource: 'a', token: 2n },
      ],
    ],
    ['an empty resource', { resource: '', token: 1n }],
    ['a control character', { resource: 'a\nb', token: 1n }],
    ['token 0', { resource: 'a', token: 0n }],
    ['a token above 2^63 - 1', { resource: 'a', token: MAX_TOKEN + 1n }],
    ['a number token', { resource: 'a', token: 1 }],
    ['an empty lease id', { resource: 'a', token: 1n, leaseId: '' }],
    ['not an object', null],
  ])('refuses %s', (_name, target) => {
    expect(() => normalizeFences(target as never)).toThrow(InvalidRequestError);
  });

  it('accepts 2^63 - 1', () => {
    expect(normalizeFences({ resource: 'a', token: MAX_TOKEN })[0]?.token).toBe(MAX_TOKEN);
  });
});

describe('hashLeaseId', () => {
  it('is a 32-byte sha256 digest and refuses oversized ids', () => {
    expect(hashLeaseId('x')).toHaveLength(32);
    expect(() => hashLeaseId('x'.repeat(1025))).toThrow(InvalidRequestError);
  });
});

describe('validateOpId', () => {
  it.each(['k', 'a'.repeat(255), 'req-1:2/3', '550e8400-e29b-41d4-a716-446655440000'])('accepts %s', (id) => {
    expect(validateOpId(id)).toBe(id);
  });
  it.each(['', 'a'.repeat(256), 'has space', 'tab\t', 'é', 42])('refuses %j', (id) => {
    expect(() => validateOpId(id)).toThrow(InvalidRequestError);
  });
});
