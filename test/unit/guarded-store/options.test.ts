import { InvalidRequestError } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import { DEFAULT_GUARDED_STORE_OPTIONS, resolveGuardedStoreOptions } from '@fenced/guarded-store';

describe('resolveGuardedStoreOptions', () => {
  it('fills in the defaults and freezes the result', () => {
    const options = resolveGuardedStoreOptions();
    expect(options).toEqual(DEFAULT_GUARDED_STORE_OPTIONS);
    expect(Object.isFrozen(options)).toBe(true);
    expect(Object.isFrozen(DEFAULT_GUARDED_STORE_OPTIONS)).toBe(true);
  });

  it('keeps the lock timeout above the idle timeout by default, so a stalled holder is cut off first', () => {
    expect(DEFAULT_GUARDED_STORE_OPTIONS.lockTimeoutMs).toBeGreaterThan(
      DEFAULT_GUARDED_STORE_OPTIONS.idleInTransactionTimeoutMs,
    );
  });

  it('merges given options and treats undefined as absent', () => {
    expect(resolveGuardedStoreOptions({ schema: 'app', lockTimeoutMs: undefined })).toEqual({
      ...DEFAULT_GUARDED_STORE_OPTIONS,
      schema: 'app',
    });
  });

  it.each([
    [{ schema: 'Public' }, 'schema'],
    [{ schema: 'a-b' }, 'schema'],
    [{ schema: 'x'.repeat(64) }, 'schema'],
    [{ lockTimeoutMs: -1 }, 'lockTimeoutMs'],
    [{ lockTimeoutMs: 1.5 }, 'lockTimeoutMs'],
    [{ lockTimeoutMs: 2 ** 31 }, 'lockTimeoutMs'],
    [{ idleInTransactionTimeoutMs: Number.NaN }, 'idleInTransactionTimeoutMs'],
    [{ isolationLevel: 'read uncommitted' }, 'isolationLevel'],
    [{ lockTimeout: 5 }, 'lockTimeout'],
  ])('refuses %j naming %s', (options, name) => {
    expect(() => resolveGuardedStoreOptions(options as never)).toThrow(InvalidRequestError);
    expect(() => resolveGuardedStoreOptions(options as never)).toThrow(name);
  });
});
