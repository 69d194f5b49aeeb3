import { describe, expect, it } from 'vitest';
import { InvalidRequestError, validateResourceName } from '@fenced/shared';

describe('resource names', () => {
  it('accepts 1 to 256 bytes of UTF-8', () => {
    expect(validateResourceName('a')).toBe('a');
    expect(validateResourceName('x'.repeat(256))).toHaveLength(256);
    expect(validateResourceName('über/документ:{1}')).toBe('über/документ:{1}');
  });

  it.each([
    ['empty', ''],
    ['257 bytes', 'x'.repeat(257)],
    ['129 two-byte characters (258 bytes)', 'ü'.repeat(129)],
    ['a NUL', 'a\u0000b'],
    ['a newline', 'a\nb'],
    ['DEL', 'a\u007fb'],
    ['a C1 control', 'a\u0085b'],
    ['a lone surrogate', 'a\ud800b'],
  ])('refuses %s, saying what is allowed', (_name, name) => {
    expect(() => validateResourceName(name)).toThrowError(InvalidRequestError);
  });

  it('refuses a non-string', () => {
    expect(() => validateResourceName(42)).toThrowError(/1 to 256 UTF-8 bytes/);
  });
});
