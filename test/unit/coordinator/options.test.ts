import { describe, expect, it } from 'vitest';
import { Coordinator, DEFAULT_COORDINATOR_OPTIONS } from '@fenced/coordinator';
import { InvalidRequestError } from '@fenced/shared';
import { resolveOptions } from '../../../packages/coordinator/src/options.js';

const nodes = ['redis://127.0.0.1:1'];

describe('coordinator options', () => {
  it('merges over frozen defaults and freezes the result', () => {
    expect(Object.isFrozen(DEFAULT_COORDINATOR_OPTIONS)).toBe(true);
    const settings = resolveOptions({ nodes, nodeTimeoutMs: 75, driftFactor: undefined });
    expect(settings).toEqual({
      ...DEFAULT_COORDINATOR_OPTIONS,
      nodeTimeoutMs: 75,
      tokenRetentionMs: 2 * DEFAULT_COORDINATOR_OPTIONS.maxTtlMs,
      explicit: { maxTtlMs: false, keyLayout: false },
    });
    expect(Object.isFrozen(settings)).toBe(true);
  });

  it.each([
    [{ driftFactor: -0.1 }, /driftFactor must be a number from 0 to 0.5/],
    [{ driftFactor: Number.NaN }, /driftFactor/],
    [{ nodeTimeoutMs: 0 }, /nodeTimeoutMs must be an integer from 1/],
    [{ nodeTimeoutMs: 2.5 }, /nodeTimeoutMs/],
    [{ retryDelayMs: -1 }, /retryDelayMs/],
    [{ retryJitterMs: Infinity }, /retryJitterMs/],
    [{ minValidityMs: -1 }, /minValidityMs/],
    [{ maxTtlMs: 0 }, /maxTtlMs/],
    [{ maxTtlMs: 2_000, tokenRetentionMs: 1_999 }, /tokenRetentionMs must be an integer from 2000/],
    [{ tokenRetentionMs: 1.5 }, /tokenRetentionMs/],
    [{ maxTtlMs: 5 }, /maxTtlMs must be at least/],
    [{ keyPrefix: '' }, /keyPrefix/],
    [{ keyPrefix: 'a{b' }, /keyPrefix/],
    [{ keyPrefix: 'a b' }, /keyPrefix/],
    [{ unsafeAllowUnsafeNodes: 'yes' }, /unsafeAllowUnsafeNodes must be true or false/],
    [{ nodeTimeout: 5 }, /unknown coordinator option 'nodeTimeout'/],
  ])('refuses %o', (bad, message) => {
    expect(() => resolveOptions({ nodes, ...(bad as object) })).toThrow(InvalidRequestError);
    expect(() => resolveOptions({ nodes, ...(bad as object) })).toThrow(message);
  });

  it('refuses zero nodes, bad URLs and duplicate nodes', () => {
    expect(() => new Coordinator({ nodes: [] })).toThrow(/nodes must be a non-empty array/);
    expect(() => new Coordinator({ nodes: ['http://127.0.0.1:1'] })).toThrow(InvalidRequestError);
    expect(() => new Coordinator({ nodes: ['not a url'] })).toThrow(/nodes\[0\] must be a redis/);
    expect(() => new Coordinator({ nodes: ['redis://127.0.0.1:1', 'redis://127.0.0.1:1/0'] })).toThrow(
      /nodes\[1\] duplicates nodes\[0\]/,
    );
  });
});

describe('acquire arguments', () => {
  it('quotes a ttlMs of the wrong type with its type', async () => {
    const coordinator = new Coordinator({ nodes });
    try {
      const error = await coordinator
        .acquire('r', { ttlMs: '1000' as unknown as number })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidRequestError);
      expect((error as Error).message).toMatch(
        /^ttlMs must be an integer from \d+ to 3600000, got "1000" \(string\)$/,
      );
    } finally {
      await coordinator.close();
    }
  });
});
