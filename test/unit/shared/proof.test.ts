import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  InvalidProofError,
  InvalidRequestError,
  MAX_PROOF_LENGTH,
  MAX_TOKEN,
  PROOF_PATTERN,
  decodeProof,
  ed25519PrivateKey,
  ed25519PublicKey,
  leaseIdDigest,
  proofMessage,
  signProof,
  validateKeyId,
  verifyProof,
  type InvalidProofReason,
} from '@fenced/shared';

const pair = generateKeyPairSync('ed25519');
const other = generateKeyPairSync('ed25519');
const keys = new Map([['k1', pair.publicKey]]);
const lease = { resource: 'orders/42', token: 1_234_567_890_123n, leaseId: 'lease-id-aaaaaaaaaaaaaaaa' };
const claims = { resource: lease.resource, token: lease.token, leaseIdDigest: leaseIdDigest(lease.leaseId) };
const proof = signProof(pair.privateKey, { keyId: 'k1', ...claims });

function refusal(fn: () => unknown): InvalidProofReason {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidProofError);
    const e = error as InvalidProofError;
    expect(e.code).toBe('INVALID_PROOF');
    return e.reason;
  }
  throw new Error('expected an InvalidProofError');
}

/** The proof with one character of its signature changed (never to the same character). */
function flipSignature(text: string, at: number): string {
  const i = text.length - 86 + at;
  const c = text[i] === 'A' ? 'B' : 'A';
  return text.slice(0, i) + c + text.slice(i + 1);
}

describe('fencing proofs (v1)', () => {
  it('has the documented wire form and verifies for exactly its claims', () => {
    expect(proof).toMatch(PROOF_PATTERN);
    expect(proof.startsWith('v1.k1.')).toBe(true);
    expect(proof.length).toBe('v1.k1.'.length + 86);
    expect(verifyProof(keys, proof, claims)).toBe('k1');
  });

  it('is deterministic: the same lease signs to the same proof (extend keeps it)', () => {
    expect(signProof(pair.privateKey, { keyId: 'k1', ...claims })).toBe(proof);
  });

  it('is refused when any signed field is tampered with', () => {
    expect(refusal(() => verifyProof(keys, proof, { ...claims, resource: 'orders/43' }))).toBe('mismatch');
    expect(refusal(() => verifyProof(keys, proof, { ...claims, token: claims.token + 1n }))).toBe('mismatch');
    expect(refusal(() => verifyProof(keys, proof, { ...claims, token: MAX_TOKEN }))).toBe('mismatch');
    expect(
      refusal(() => verifyProof(keys, proof, { ...claims, leaseIdDigest: leaseIdDigest('another lease') })),
    ).toBe('mismatch');
    // The key id is signed: relabelling a proof to another trusted key does not verify.
    const both = new Map([...keys, ['k2', pair.publicKey]]);
    expect(refusal(() => verifyProof(both, proof.replace('v1.k1.', 'v1.k2.'), claims))).toBe('mismatch');
    for (const at of [0, 40, 84])
      expect(refusal(() => verifyProof(keys, flipSignature(proof, at), claims))).toBe('mismatch');
  });

  it('refuses a proof signed by another key under a trusted id', () => {
    const forged = signProof(other.privateKey, { keyId: 'k1', ...claims });
    expect(refusal(() => verifyProof(keys, forged, claims))).toBe('mismatch');
  });

  it('refuses an unknown key id, naming the trusted ones', () => {
    const foreign = signProof(other.privateKey, { keyId: 'k9', ...claims });
    expect(refusal(() => verifyProof(keys, foreign, claims))).toBe('unknown-key');
    expect(() => verifyProof(keys, foreign, claims)).toThrow(/key 'k9'.*known: k1/);
  });

  it('refuses missing and malformed proofs without repeating them', () => {
    expect(refusal(() => verifyProof(keys, undefined, claims))).toBe('missing');
    expect(refusal(() => verifyProof(keys, '', claims))).toBe('missing');
    const malformed: unknown[] = [
      proof.slice(0, -1), // truncated
      proof.slice(0, 20),
      `${proof}A`,
      proof.replace('v1.', 'v2.'),
      proof.replace('v1.', ''),
      `v1..${proof.slice(-86)}`,
      `v1.k1.${'A'.repeat(85)}=`,
      `v1.k.1.${proof.slice(-86)}`,
      42,
      { proof },
    ];
    for (const bad of malformed) {
      expect(refusal(() => verifyProof(keys, bad, claims))).toBe('malformed');
      try {
        verifyProof(keys, bad, claims);
      } catch (error) {
        if (typeof bad === 'string' && bad.length > 10) expect((error as Error).message).not.toContain(bad);
      }
    }
  });

  it('refuses a signature whose unused bits are set (one spelling per signature)', () => {
    const last = proof.at(-1)!;
    // The 86th character carries 2 signature bits and 4 spare bits; flip a spare bit only.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const sibling = alphabet[alphabet.indexOf(last) ^ 1]!;
    expect(refusal(() => decodeProof(proof.slice(0, -1) + sibling, 'r'))).toBe('malformed');
  });

  it('encodes the signed message unambiguously (lengths, fixed-size token and digest)', () => {
    const a = proofMessage({ keyId: 'k1', resource: 'ab', token: 1n, leaseIdDigest: claims.leaseIdDigest });
    const b = proofMessage({ keyId: 'k1a', resource: 'b', token: 1n, leaseIdDigest: claims.leaseIdDigest });
    expect(a.equals(b)).toBe(false);
    expect(a.subarray(0, 16).toString('latin1')).toBe('fenced-proof-v1\0');
    expect(a.length).toBe(16 + 2 + 2 + 2 + 2 + 8 + 32);
    expect(a.readBigUInt64BE(16 + 2 + 2 + 2 + 2)).toBe(1n);
    expect(() => proofMessage({ ...claims, keyId: 'k1', leaseIdDigest: Buffer.alloc(3) })).toThrow(
      InvalidRequestError,
    );
  });

  it('keeps proofs within the documented length', () => {
    const long = signProof(pair.privateKey, { keyId: 'k'.repeat(64), ...claims });
    expect(long.length).toBe(MAX_PROOF_LENGTH);
    expect(long).toMatch(PROOF_PATTERN);
  });
});

describe('signing and verification keys', () => {
  const pem = {
    private: pair.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    public: pair.publicKey.export({ format: 'pem', type: 'spki' }).toString(),
  };

  it('accepts KeyObjects and PEM strings of Ed25519 keys', () => {
    expect(ed25519PrivateKey(pair.privateKey).asymmetricKeyType).toBe('ed25519');
    expect(ed25519PrivateKey(pem.private).type).toBe('private');
    expect(ed25519PublicKey(pair.publicKey).type).toBe('public');
    expect(ed25519PublicKey(pem.public).type).toBe('public');
  });

  it('refuses other keys and values, saying what was given and never echoing key material', () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 });
    expect(() => ed25519PrivateKey(rsa.privateKey, 'signingKey.privateKey')).toThrow(
      /signingKey\.privateKey must be an Ed25519 private key.*got an rsa key/,
    );
    expect(() => ed25519PrivateKey(pair.publicKey)).toThrow(/got a public KeyObject/);
    expect(() => ed25519PrivateKey(42)).toThrow(/got a number/);
    expect(() => ed25519PublicKey(pair.privateKey)).toThrow(/got a private KeyObject \(give the public half/);
    expect(() => ed25519PublicKey(undefined, 'verifyKeys.k1')).toThrow(/verifyKeys\.k1 .*got undefined/);
    let message = '';
    try {
      ed25519PublicKey(pem.private);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/got a PEM private key/);
    expect(message).not.toContain(pem.private.split('\n')[1]!);
    try {
      ed25519PrivateKey(pem.private.replace('MC4', 'XX4'));
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/got a string of \d+ characters that is not one/);
    expect(message).not.toContain('PRIVATE KEY-----\n');
  });

  it('checks key ids', () => {
    expect(validateKeyId('2025-01_a')).toBe('2025-01_a');
    for (const bad of ['', 'a.b', 'a b', 'k'.repeat(65), 7])
      expect(() => validateKeyId(bad, 'signingKey.id')).toThrow(/signingKey\.id must be 1 to 64/);
  });
});
