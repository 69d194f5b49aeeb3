import { describe, expect, it } from 'vitest';
import { driftMs, validityMs } from '../../../../packages/coordinator/src/quorum/validity.js';
import {
  DEFAULT_COORDINATOR_OPTIONS,
  smallestUsableTtlMs,
} from '../../../../packages/coordinator/src/options.js';

describe('validity', () => {
  it('allows round(ttl × driftFactor) + 2 ms of drift', () => {
    expect(driftMs(10_000, 0.01)).toBe(102);
    expect(driftMs(30, 0.01)).toBe(2);
    expect(driftMs(150, 0.01)).toBe(4); // round(1.5) = 2
  });

  it('subtracts the elapsed time and the drift from the ttl', () => {
    expect(validityMs(10_000, 0, 0.01)).toBe(9_898);
    expect(validityMs(10_000, 500.4, 0.01)).toBe(9_397);
  });

  it('goes to zero or below once the attempt took longer than the ttl allows', () => {
    expect(validityMs(100, 97, 0.01)).toBeLessThanOrEqual(0);
    expect(validityMs(100, 500, 0.01)).toBeLessThan(0);
  });

  it('knows the smallest ttl that can ever leave more than minValidityMs', () => {
    const ttl = smallestUsableTtlMs(DEFAULT_COORDINATOR_OPTIONS);
    expect(validityMs(ttl, 0, DEFAULT_COORDINATOR_OPTIONS.driftFactor)).toBeGreaterThan(
      DEFAULT_COORDINATOR_OPTIONS.minValidityMs,
    );
    expect(validityMs(ttl - 1, 0, DEFAULT_COORDINATOR_OPTIONS.driftFactor)).toBeLessThanOrEqual(
      DEFAULT_COORDINATOR_OPTIONS.minValidityMs,
    );
    for (const settings of [
      { driftFactor: 0, minValidityMs: 0 },
      { driftFactor: 0.5, minValidityMs: 100 },
      { driftFactor: 0.1, minValidityMs: 7 },
    ]) {
      const t = smallestUsableTtlMs(settings);
      expect(validityMs(t, 0, settings.driftFactor)).toBeGreaterThan(settings.minValidityMs);
      expect(validityMs(t - 1, 0, settings.driftFactor)).toBeLessThanOrEqual(settings.minValidityMs);
    }
  });
});
