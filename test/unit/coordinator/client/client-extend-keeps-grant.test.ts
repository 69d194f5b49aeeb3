// The HTTP client's leases keep their grant's token and proof across extends (issue 18): an extension renews the
// timing only. The service reports the token the nodes' lease keys carry; a node that refused the grant's final
// promise round still carries the first round's proposal, so an extend answered by such a majority reports another
// token — which the lease must not take (its guarded writes would carry a token and proof that are not its grant's).
// The calls are stand-ins that answer an extend with a different token and proof.
import { describe, expect, it } from 'vitest';
import { ClientLease, type ReportedGrant } from '../../../../packages/coordinator/src/client/client-lease.js';
import {
  ClientMultiLease,
  type ReportedMultiGrant,
} from '../../../../packages/coordinator/src/client/client-multi-lease.js';

const watching = { context: { retryDelayMs: 100, live: new Set<never>() } };

function grant(overrides: Partial<ReportedGrant> = {}): ReportedGrant {
  return {
    resource: 'acct',
    id: 'lease-id-0123456789',
    token: 42n,
    proof: 'v1.key.original-proof',
    ttlMs: 1_000,
    validityMs: 980,
    expiresAt: new Date(Date.now() + 1_000),
    validFrom: performance.now(),
    ...overrides,
  };
}

describe('the HTTP client keeps a lease’s token and proof across extends', () => {
  it('single resource: the extension’s timing is taken, its token and proof are not', async () => {
    const lease = new ClientLease(
      {
        extendById: (_resource, _id, ttlMs) =>
          Promise.resolve(grant({ token: 7n, proof: 'v1.key.other-proof', ttlMs, validityMs: ttlMs - 20 })),
        releaseById: () => Promise.resolve(),
      },
      grant(),
      watching,
    );
    await lease.extend(5_000);
    expect(lease.token).toBe(42n);
    expect(lease.proof).toBe('v1.key.original-proof');
    expect(lease.ttlMs).toBe(5_000);
    expect(lease.validityMs).toBe(4_980);
    await lease.release();
  });

  it('several resources: every token and proof stays the grant’s', async () => {
    const original: ReportedMultiGrant = {
      resources: ['a', 'b'],
      id: 'lease-id-0123456789',
      tokens: new Map([
        ['a', 10n],
        ['b', 11n],
      ]),
      proofs: new Map([
        ['a', 'v1.key.proof-a'],
        ['b', 'v1.key.proof-b'],
      ]),
      ttlMs: 1_000,
      validityMs: 980,
      expiresAt: new Date(Date.now() + 1_000),
      validFrom: performance.now(),
    };
    const lease = new ClientMultiLease(
      {
        extendManyById: (_resources, _id, ttlMs) =>
          Promise.resolve({
            ...original,
            tokens: new Map([
              ['a', 1n],
              ['b', 2n],
            ]),
            proofs: new Map([
              ['a', 'v1.key.x'],
              ['b', 'v1.key.y'],
            ]),
            ttlMs,
            validityMs: ttlMs - 20,
          }),
        releaseManyById: () => Promise.resolve(),
      },
      original,
      watching,
    );
    await lease.extend(3_000);
    expect([...lease.tokens]).toEqual([
      ['a', 10n],
      ['b', 11n],
    ]);
    expect([...lease.proofs!]).toEqual([
      ['a', 'v1.key.proof-a'],
      ['b', 'v1.key.proof-b'],
    ]);
    expect(lease.ttlMs).toBe(3_000);
    await lease.release();
  });
});
