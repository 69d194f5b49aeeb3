// The names the bench gives the commands of the nodes' slow logs (bench/suite/environment.ts `slowCommandName`):
// what ran, never its values.
import { describe, expect, it } from 'vitest';
import { slowCommandName } from '../../../../bench/suite/environment.js';

describe('slowCommandName', () => {
  it('names a script by its key count and first key, not its arguments', () => {
    expect(
      slowCommandName([
        'evalsha',
        'a'.repeat(40),
        '7',
        'bench:node:incarnation',
        'bench:node:floor',
        'lease-id',
      ]),
    ).toBe('EVALSHA (7 keys, first bench:node:incarnation)');
    expect(slowCommandName(['EVAL', 'return 1', '0'])).toBe('EVAL (0 keys, first none)');
    expect(
      slowCommandName(['EVALSHA', 'f'.repeat(40), '256', 'fenced:{sc:1000000:0:303488}:lease', 'x']),
    ).toBe('EVALSHA (256 keys, first fenced:{…}:lease)');
  });

  it('names any other command by its first argument without values, cut to 48 characters', () => {
    expect(slowCommandName(['set', 'k', 'secret-value'])).toBe('SET k');
    expect(slowCommandName(['FLUSHALL'])).toBe('FLUSHALL');
    expect(slowCommandName(['scan', '768865', 'MATCH', '*'])).toBe('SCAN N');
    expect(slowCommandName(['DEL', 'fenced:{sc:1000000:0:361333}:lease'])).toBe('DEL fenced:{…}:lease');
    expect(slowCommandName(['get', 'x'.repeat(60)])).toBe(`GET ${'x'.repeat(47)}…`);
  });
});
