import { describe, expect, it } from 'vitest';
import { ApiKeyCheck } from '../../../packages/service/src/http/api-key-auth.js';

describe('API key check', () => {
  const check = new ApiKeyCheck(['first-key-0123456789', 'second-key-0123456789']);

  it('accepts every configured key', () => {
    expect(check.enabled).toBe(true);
    expect(check.matches('first-key-0123456789')).toBe(true);
    expect(check.matches('second-key-0123456789')).toBe(true);
  });

  it('refuses prefixes, extensions, case changes and empty keys', () => {
    for (const key of [
      'first-key-012345678',
      'first-key-01234567890',
      'FIRST-KEY-0123456789',
      '',
      ' first-key-0123456789',
    ]) {
      expect(check.matches(key), key).toBe(false);
    }
  });

  it('is off without keys', () => {
    expect(new ApiKeyCheck([]).enabled).toBe(false);
  });
});
