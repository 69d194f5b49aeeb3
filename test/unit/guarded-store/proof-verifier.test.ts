import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { InvalidProofError, leaseIdDigest, signProof } from '@fenced/shared';
import { normalizeFences } from '../../../packages/guarded-store/src/fence.js';
import { ProofVerifier } from '../../../packages/guarded-store/src/proof-verifier.js';

const pair = generateKeyPairSync('ed25519');
const keys = new Map([['k1', pair.publicKey]]);

function signed(resource: string, token: bigint, leaseId: string) {
  const proof = signProof(pair.privateKey, {
    keyId: 'k1',
    resource,
    token,
    leaseIdDigest: leaseIdDigest(leaseId),
  });
  return normalizeFences({ resource, token, leaseId, proof })[0]!;
}

describe('ProofVerifier', () => {
  it('verifies a lease once and answers its repeated writes from the cache', () => {
    const verifier = new ProofVerifier(keys, 10);
    const fence = signed('r', 5n, 'lease-a');
    for (let i = 0; i < 4; i++) verifier.verify(fence);
    expect(verifier.stats).toEqual({ checks: 4, cacheHits: 3, cached: 1 });
  });

  it('never answers a different claim from the cache', () => {
    const verifier = new ProofVerifier(keys, 10);
    const fence = signed('r', 5n, 'lease-a');
    verifier.verify(fence);
    expect(() => verifier.verify({ ...fence, token: 6n })).toThrow(InvalidProofError);
    expect(() => verifier.verify({ ...fence, resource: 'other' })).toThrow(InvalidProofError);
    expect(() => verifier.verify({ ...fence, leaseIdHash: leaseIdDigest('lease-b') })).toThrow(
      InvalidProofError,
    );
    expect(verifier.stats.cached).toBe(1);
  });

  it('does not cache failures', () => {
    const verifier = new ProofVerifier(keys, 10);
    const fence = { ...signed('r', 5n, 'lease-a'), token: 9n };
    expect(() => verifier.verify(fence)).toThrow(InvalidProofError);
    expect(() => verifier.verify(fence)).toThrow(InvalidProofError);
    expect(verifier.stats).toEqual({ checks: 2, cacheHits: 0, cached: 0 });
  });

  it('is bounded: the least recently used entry goes first', () => {
    const verifier = new ProofVerifier(keys, 2);
    const [a, b, c] = [signed('a', 1n, 'la'), signed('b', 1n, 'lb'), signed('c', 1n, 'lc')];
    verifier.verify(a);
    verifier.verify(b);
    verifier.verify(a); // a is now the most recent
    verifier.verify(c); // evicts b
    expect(verifier.stats.cached).toBe(2);
    const hits = verifier.stats.cacheHits;
    verifier.verify(a);
    expect(verifier.stats.cacheHits).toBe(hits + 1);
    verifier.verify(b);
    expect(verifier.stats.cacheHits).toBe(hits + 1);
  });

  it('caches nothing with a size of 0', () => {
    const verifier = new ProofVerifier(keys, 0);
    const fence = signed('r', 5n, 'lease-a');
    verifier.verify(fence);
    verifier.verify(fence);
    expect(verifier.stats).toEqual({ checks: 2, cacheHits: 0, cached: 0 });
  });
});
