import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '@fenced/shared';
import { MAX_LEASE_RESOURCES } from '@fenced/coordinator';
import {
  validateAcquire,
  validateLeaseId,
  validateResource,
  validateResources,
  validateTtl,
} from '../../../../packages/coordinator/src/lease/validate-request.js';
import { newLeaseId } from '../../../../packages/coordinator/src/lease/lease-ids.js';
import { resolveOptions, smallestUsableTtlMs } from '../../../../packages/coordinator/src/options.js';

// The checks every Coordinator request passes before anything is sent to a node (lease/validate-request.ts): each
// refusal is an InvalidRequestError with the message callers see.

const settings = resolveOptions({ nodes: ['redis://127.0.0.1:1'], maxTtlMs: 10_000 });
const redlockLayout = resolveOptions({ nodes: ['redis://127.0.0.1:1'], keyLayout: 'redlock' });
const holdingRedlockKey = resolveOptions({ nodes: ['redis://127.0.0.1:1'], holdRedlockKey: true });

function refusal(check: () => unknown): string {
  try {
    check();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidRequestError);
    return (error as Error).message;
  }
  throw new Error('expected the check to refuse');
}

describe('validateAcquire', () => {
  it('returns the checked request with its defaults filled in', () => {
    const onAttempt = () => undefined;
    expect(validateAcquire(settings, 'orders', { ttlMs: 1_000, onAttempt }, true)).toEqual({
      resources: 'orders',
      ttlMs: 1_000,
      waitMs: 0,
      tryOnly: false,
      signal: undefined,
      watch: { autoExtend: false },
      onAttempt,
    });
  });

  it('keeps the watch options and marks a tryAcquire', () => {
    const onLost = () => undefined;
    const request = validateAcquire(settings, 'orders', { ttlMs: 1_000, autoExtend: true, onLost }, false);
    expect(request.watch).toEqual({ autoExtend: true, onLost });
    expect(request.tryOnly).toBe(true);
  });

  it('returns a set of resources in lock order, without repeats', () => {
    const request = validateAcquire(settings, ['b', 'a', 'b'], { ttlMs: 1_000, waitMs: 50 }, true);
    expect(request.resources).toEqual(['a', 'b']);
    expect(request.waitMs).toBe(50);
  });

  it.each([
    [null, 'acquire options must be an object with ttlMs'],
    [{ ttl: 1_000 }, /^unknown acquire option 'ttl'; did you mean 'ttlMs'\?/],
    [{ ttlMs: 1_000, signal: 'stop' }, 'signal must be an AbortSignal'],
    [{ ttlMs: 1_000, autoExtend: 'yes' }, 'autoExtend must be true or false'],
    [{ ttlMs: 1_000, onLost: 1 }, 'onLost must be a function'],
    [{ ttlMs: 1_000, onAttempt: 'log' }, 'onAttempt must be a function (or left out), got string'],
    [{ ttlMs: 1_000, onAttempt: null }, 'onAttempt must be a function (or left out), got null'],
    [{ ttlMs: 1_000, waitMs: -1 }, /^waitMs must be an integer from 0/],
    [{ ttlMs: 1.5 }, /^ttlMs must be an integer from /],
  ])('refuses the options %o', (options, message) => {
    const check = () => validateAcquire(settings, 'orders', options as never, true);
    if (typeof message === 'string') expect(refusal(check)).toBe(message);
    else expect(refusal(check)).toMatch(message);
  });

  it('refuses a wait in a tryAcquire', () => {
    expect(refusal(() => validateAcquire(settings, 'orders', { ttlMs: 1_000, waitMs: 0 }, false))).toBe(
      'tryAcquire does not wait: drop waitMs',
    );
  });

  it('checks the resource before the options', () => {
    expect(refusal(() => validateAcquire(settings, '', null as never, true))).toMatch(/^resource/);
  });
});

describe('validateTtl', () => {
  it('accepts the smallest usable ttl and maxTtlMs, and refuses one below or above', () => {
    const smallest = smallestUsableTtlMs(settings);
    expect(() => validateTtl(settings, smallest)).not.toThrow();
    expect(() => validateTtl(settings, settings.maxTtlMs)).not.toThrow();
    expect(refusal(() => validateTtl(settings, smallest - 1))).toMatch(/^ttlMs must be an integer from /);
    expect(refusal(() => validateTtl(settings, settings.maxTtlMs + 1))).toMatch(/ to 10000/);
  });

  it('reads the bounds from the settings it is given (a cluster maxTtlMs adopted at ready())', () => {
    const adopted = { ...settings, maxTtlMs: 2_000 };
    expect(() => validateTtl(settings, 5_000)).not.toThrow();
    expect(refusal(() => validateTtl(adopted, 5_000))).toMatch(/ to 2000/);
  });
});

describe('validateResource', () => {
  it("refuses a name inside the coordinator's own namespace under keyLayout 'redlock' only", () => {
    expect(validateResource(settings, 'fenced:orders')).toBe('fenced:orders');
    expect(refusal(() => validateResource(redlockLayout, 'fenced:orders'))).toBe(
      `resource must not start with "fenced:" under keyLayout 'redlock' (the lease key is the resource name ` +
        `itself, and that namespace holds the coordinator's own keys), got "fenced:orders" (string)`,
    );
  });

  it("refuses a name inside the namespace with holdRedlockKey too (the name is then a key of the node's)", () => {
    expect(refusal(() => validateResource(holdingRedlockKey, 'fenced:{x}:lease'))).toBe(
      `resource must not start with "fenced:" under keyLayout 'fenced' with holdRedlockKey (the lease key is the ` +
        `resource name itself, and that namespace holds the coordinator's own keys), got "fenced:{x}:lease" (string)`,
    );
  });

  it("refuses, on a Redis Cluster member only, a name whose node-redlock key is in another slot than its 'fenced' record", () => {
    const onCluster = { ...holdingRedlockKey, clusterMember: true };
    for (const name of ['{account}:frank', 'account%frank', 'a}b']) {
      expect(validateResource(holdingRedlockKey, name)).toBe(name);
      expect(validateResource({ ...settings, clusterMember: true }, name)).toBe(name);
      expect(validateResource({ ...redlockLayout, clusterMember: true }, name)).toBe(name);
      expect(refusal(() => validateResource(onCluster, name))).toContain(
        `resource "${name}" cannot be locked with holdRedlockKey on a Redis Cluster member under keyLayout 'fenced'`,
      );
    }
    expect(validateResource(onCluster, 'account:frank')).toBe('account:frank');
  });

  it('refuses a set with a bad member, an empty set and one too large', () => {
    expect(refusal(() => validateResources(redlockLayout, ['a', 'fenced:b']))).toMatch(/must not start/);
    expect(refusal(() => validateResources(settings, []))).toBe(
      'resources must be a non-empty array of resource names',
    );
    const many = Array.from({ length: MAX_LEASE_RESOURCES + 1 }, (_, i) => `r${i}`);
    expect(refusal(() => validateResources(settings, many))).toBe(
      `a lease covers at most ${MAX_LEASE_RESOURCES} resources, got ${MAX_LEASE_RESOURCES + 1}`,
    );
  });
});

describe('validateLeaseId', () => {
  it('accepts the ids the coordinator makes and refuses anything else', () => {
    expect(() => validateLeaseId(newLeaseId())).not.toThrow();
    for (const bad of ['short', 'x'.repeat(129), 'a'.repeat(15) + '/', 42]) {
      expect(refusal(() => validateLeaseId(bad))).toBe(
        'leaseId must be 16 to 128 characters of base64url (A-Z a-z 0-9 _ -)',
      );
    }
  });
});
