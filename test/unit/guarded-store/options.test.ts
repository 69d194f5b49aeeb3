import { InvalidRequestError } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import {
  GUARDED_STORE_DEFAULTS,
  resolveGuardedStoreOptions,
} from '../../../packages/guarded-store/src/index.js';

describe('resolveGuardedStoreOptions', () => {
  it('fills in the defaults and freezes the result', () => {
    const options = resolveGuardedStoreOptions();
    expect(options).toEqual(GUARDED_STORE_DEFAULTS);
    expect(Object.isFrozen(options)).toBe(true);
    expect(Object.isFrozen(GUARDED_STORE_DEFAULTS)).toBe(true);
  });

  it('keeps the lock timeout above the idle timeout by default, so a stalled holder is cut off first', () => {
    expect(GUARDED_STORE_DEFAULTS.lockTimeoutMs).toBeGreaterThan(
      GUARDED_STORE_DEFAULTS.idleInTransactionTimeoutMs,
    );
  });

  it('merges given options and treats undefined as absent', () => {
    expect(resolveGuardedStoreOptions({ schema: 'app', lockTimeoutMs: undefined })).toEqual({
      ...GUARDED_STORE_DEFAULTS,
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
