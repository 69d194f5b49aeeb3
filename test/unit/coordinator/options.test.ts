import { describe, expect, it } from 'vitest';
import { Coordinator, CoordinatorClosedError, DEFAULT_COORDINATOR_OPTIONS } from '@fenced/coordinator';
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
    [{ holdRedlockKey: 'yes' }, /holdRedlockKey must be true or false/],
    [{ nodeTimeout: 5 }, /unknown coordinator option 'nodeTimeout'; did you mean 'nodeTimeoutMs'\?/],
    [{ maxttlms: 5 }, /unknown coordinator option 'maxttlms'; did you mean 'maxTtlMs'\?/],
    [{ colour: 'red' }, /unknown coordinator option 'colour' \(known: /],
  ])('refuses %o', (bad, message) => {
    expect(() => resolveOptions({ nodes, ...(bad as object) })).toThrow(InvalidRequestError);
    expect(() => resolveOptions({ nodes, ...(bad as object) })).toThrow(message);
  });

  it('refuses zero nodes, bad URLs and duplicate nodes', () => {
    expect(() => new Coordinator({ nodes: [] })).toThrow(/nodes must be a non-empty array/);
    expect(() => new Coordinator({ nodes: ['http://127.0.0.1:1'] })).toThrow(InvalidRequestError);
    expect(() => new Coordinator({ nodes: ['not a url'] })).toThrow(
      /nodes\[0\] is not a redis:\/\/ or rediss:\/\/ URL/,
    );
    expect(() => new Coordinator({ nodes: ['redis://127.0.0.1:1', 'redis://127.0.0.1:1/0'] })).toThrow(
      /nodes\[1\] duplicates nodes\[0\]/,
    );
  });
});

describe('node URLs', () => {
  it('takes a list split from FENCED_REDIS_URLS with spaces after its commas, as the service does', async () => {
    const coordinator = new Coordinator({ nodes: 'redis://127.0.0.1:1, redis://127.0.0.1:2'.split(',') });
    expect(coordinator.cachedNodeStatus().map((n) => n.address)).toEqual(['127.0.0.1:1', '127.0.0.1:2']);
    await coordinator.close();
  });

  it.each([
    ['redis://host:26371x', /^nodes\[0\] has the port '26371x': a port is a whole number from 0 to 65535/],
    ['redis://user:secret@host:70000', /^nodes\[0\] has the port '70000'/],
    ['http://host:1', /^nodes\[0\] has the scheme 'http:\/\/', not redis:\/\/ or rediss:\/\//],
    ['cluster:redis://host:1', /^nodes\[0\] is a cluster: entry.*\{ cluster: \[seed URLs\] \}/],
  ])('says what is wrong with %s', (url, message) => {
    expect(() => new Coordinator({ nodes: [url] })).toThrow(InvalidRequestError);
    expect(() => new Coordinator({ nodes: [url] })).toThrow(message);
  });

  it('never echoes a password', () => {
    expect(() => new Coordinator({ nodes: ['redis://user:secret@host:70000'] })).not.toThrow(/secret/);
    expect(() => new Coordinator({ nodes: ['redis://user:secret@host:7x/0'] })).not.toThrow(/secret/);
  });
});

describe('acquire arguments', () => {
  it.each([
    [{ ttl: 5_000 }, /^unknown acquire option 'ttl'; did you mean 'ttlMs'\?/],
    [{ ttlMs: 5_000, wait: 100 }, /^unknown acquire option 'wait'; did you mean 'waitMs'\?/],
    [{ ttlMs: 5_000, autoextend: true }, /^unknown acquire option 'autoextend'; did you mean 'autoExtend'\?/],
  ])('names the option meant for %o', async (options, message) => {
    const coordinator = new Coordinator({ nodes });
    try {
      const error = await coordinator.acquire('r', options as never).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidRequestError);
      expect((error as Error).message).toMatch(message);
    } finally {
      await coordinator.close();
    }
  });

  it('fails an acquire after close() at once with CoordinatorClosedError', async () => {
    // Nothing listens on port 1 and every node call may wait a minute: only a check before any call ends the
    // acquire before the generous bound below (whose expiry means "it waited for the nodes").
    const coordinator = new Coordinator({ nodes, nodeTimeoutMs: 60_000 });
    await coordinator.close();
    const bound = new Promise<string>((resolve) =>
      setTimeout(() => resolve('still waiting'), 15_000).unref(),
    );
    for (const attempt of [
      () => coordinator.acquire('r', { ttlMs: 5_000 }),
      () => coordinator.tryAcquire('r', { ttlMs: 5_000 }),
      () => coordinator.acquire(['a', 'b'], { ttlMs: 5_000 }),
    ]) {
      const outcome = await Promise.race([attempt().catch((e: unknown) => e), bound]);
      expect(outcome).toBeInstanceOf(CoordinatorClosedError);
    }
  });

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
