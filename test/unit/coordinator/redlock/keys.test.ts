import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeResourceTag, resourceKeys } from '../../../../packages/coordinator/src/redlock/keys.js';

/** Redis' hash tag rule: the text between the first '{' and the first '}' after it, if non-empty. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open < 0) return key;
  const close = key.indexOf('}', open + 1);
  if (close < 0 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

describe('resource keys', () => {
  it('namespaces and hash-tags every key of a resource', () => {
    expect(resourceKeys('fenced', 'orders/42')).toEqual({
      lease: 'fenced:{orders/42}:lease',
      record: 'fenced:{orders/42}:lease',
      token: 'fenced:{orders/42}:token',
      channel: 'fenced:{orders/42}:released',
    });
  });

  it('escapes braces and percent signs so the hash tag is the whole name', () => {
    expect(encodeResourceTag('a}b{c%d')).toBe('a%7Db%7Bc%25d');
    const keys = resourceKeys('fenced', '}{');
    expect(hashTag(keys.lease)).toBe('%7D%7B');
    expect(hashTag(keys.token)).toBe(hashTag(keys.lease));
  });

  it('never maps two resources to the same keys, and keeps one slot per resource', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.string({ minLength: 1 }), (a, b) => {
        const ka = resourceKeys('fenced', a);
        const kb = resourceKeys('fenced', b);
        expect(hashTag(ka.lease)).toBe(hashTag(ka.token));
        expect(hashTag(ka.lease)).toBe(hashTag(ka.channel));
        if (a !== b) {
          expect(ka.lease).not.toBe(kb.lease);
          expect(ka.token).not.toBe(kb.token);
          expect(ka.channel).not.toBe(kb.channel);
        }
      }),
    );
  });
});
