import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { InvalidRequestError, MAX_TOKEN, formatToken, parseToken } from '@fenced/shared';

describe('token wire format', () => {
  it('round-trips every token from 1 to 2^63-1 exactly', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: MAX_TOKEN }), (token) => {
        expect(parseToken(formatToken(token))).toBe(token);
      }),
    );
  });

  it('keeps tokens around 2^53 exact, where doubles would not', () => {
    const above = (1n << 53n) + 1n;
    expect(parseToken(above.toString())).toBe(above);
    expect(formatToken(above)).toBe('9007199254740993');
  });

  it.each([
    ['empty', ''],
    ['zero', '0'],
    ['negative', '-1'],
    ['plus sign', '+5'],
    ['leading zero', '007'],
    ['spaces', ' 5'],
    ['inner space', '5 6'],
    ['exponent', '1e5'],
    ['fraction', '1.5'],
    ['hex', '0x10'],
    ['above 2^63-1', (MAX_TOKEN + 1n).toString()],
    ['twenty digits', '12345678901234567890'],
    ['two values joined', '5, 6'],
  ])('refuses a token that is %s with a message saying what is allowed', (_name, text) => {
    expect(() => parseToken(text)).toThrowError(InvalidRequestError);
    expect(() => parseToken(text)).toThrowError(/from 1 to 9223372036854775807/);
  });

  it('refuses a non-string', () => {
    expect(() => parseToken(5)).toThrowError(InvalidRequestError);
    expect(() => formatToken(0n)).toThrowError(InvalidRequestError);
  });
});
