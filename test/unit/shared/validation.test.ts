import { describe, expect, it } from 'vitest';
import {
  InvalidRequestError,
  assertBoolean,
  assertInteger,
  assertMatches,
  assertNumber,
  assertOneOf,
  describeValue,
  mergeOptions,
} from '@fenced/shared';

describe('describeValue', () => {
  it.each([
    ['1000', '"1000" (string)'],
    [1000, '1000 (number)'],
    [1.5, '1.5 (number)'],
    [Number.NaN, 'NaN (number)'],
    [-0, '-0 (number)'],
    [5n, '5n (bigint)'],
    [true, 'true (boolean)'],
    [undefined, 'undefined'],
    [null, 'null'],
    [[1, 2], 'an array of 2'],
    [{ a: 1 }, 'an object'],
    [new Date(0), 'a Date object'],
    [() => 1, 'a function'],
  ])('quotes %o with its type as %s', (value, text) => {
    expect(describeValue(value)).toBe(text);
  });

  it('cuts long strings', () => {
    expect(describeValue('x'.repeat(100))).toBe(`"${'x'.repeat(64)}…" (string)`);
  });
});

describe('the validators', () => {
  it('quote the value with its type: a string is never mistaken for a number', () => {
    const attempt = () => assertInteger('ttlMs', '1000', { min: 10, max: 600_000 });
    expect(attempt).toThrow(InvalidRequestError);
    expect(attempt).toThrow('ttlMs must be an integer from 10 to 600000, got "1000" (string)');
  });

  it('return the value when it is allowed', () => {
    expect(assertInteger('n', 5, { min: 0, max: 5 })).toBe(5);
    expect(assertNumber('f', 0.5, { min: 0, max: 0.5 })).toBe(0.5);
    expect(assertBoolean('b', false)).toBe(false);
    expect(assertOneOf('level', 'a', ['a', 'b'])).toBe('a');
    expect(assertMatches('name', 'ab', /^[a-z]+$/, 'letters')).toBe('ab');
  });

  it.each([
    [() => assertInteger('n', 1.5, { min: 0, max: 5 }), 'n must be an integer from 0 to 5, got 1.5 (number)'],
    [
      () => assertNumber('f', Number.NaN, { min: 0, max: 1 }),
      'f must be a number from 0 to 1, got NaN (number)',
    ],
    [() => assertBoolean('b', 'yes'), 'b must be true or false, got "yes" (string)'],
    [() => assertOneOf('level', 'c', ['a', 'b']), "level must be one of 'a', 'b', got \"c\" (string)"],
    [() => assertMatches('name', 42, /^[a-z]+$/, 'letters'), 'name must be letters, got 42 (number)'],
  ])('refuse with the name, the rule and the value (%#)', (attempt, message) => {
    expect(attempt).toThrow(InvalidRequestError);
    expect(attempt).toThrow(message);
  });
});

describe('mergeOptions', () => {
  const defaults = Object.freeze({ a: 1, b: 'x' });

  it('takes undefined as "use the default" and keeps required options', () => {
    expect(mergeOptions('thing', defaults, { a: undefined, b: 'y', need: 3 }, ['need'])).toEqual({
      a: 1,
      b: 'y',
      need: 3,
    });
  });

  it('refuses unknown options, naming the known ones, and non-objects', () => {
    expect(() => mergeOptions('thing', defaults, { c: 1 })).toThrow("unknown thing option 'c' (known: a, b)");
    expect(() => mergeOptions('thing', defaults, 'a')).toThrow(
      'thing options must be an object, got "a" (string)',
    );
  });
});
