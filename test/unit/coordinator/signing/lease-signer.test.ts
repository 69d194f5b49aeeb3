import { generateKeyPairSync } from 'node:crypto';
import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { InvalidRequestError, leaseIdDigest, verifyProof } from '@fenced/shared';
import { Coordinator } from '@fenced/coordinator';
import { LeaseSigner, createLeaseSigner } from '../../../../packages/coordinator/src/signing/lease-signer.js';

const pair = generateKeyPairSync('ed25519');
const pem = pair.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();

describe('LeaseSigner (the coordinator signingKey option)', () => {
  it('signs proofs a store verifies with the public key, from a KeyObject or a PEM string', () => {
    for (const privateKey of [pair.privateKey, pem]) {
      const signer = new LeaseSigner({ id: 'k1', privateKey });
      const proof = signer.sign('orders/1', 42n, 'lease-abcdefghijklmnop');
      const claims = {
        resource: 'orders/1',
        token: 42n,
        leaseIdDigest: leaseIdDigest('lease-abcdefghijklmnop'),
      };
      expect(verifyProof(new Map([['k1', pair.publicKey]]), proof, claims)).toBe('k1');
    }
  });

  it('is off unless configured', () => {
    expect(createLeaseSigner(undefined)).toBeUndefined();
  });

  it('refuses bad keys with messages naming the field, the given type and what is allowed', () => {
    const cases: [unknown, RegExp][] = [
      ['k1', /signingKey must be an object \{ id, privateKey \}, got a string/],
      [null, /got null/],
      [{ id: 'k1' }, /signingKey\.privateKey must be an Ed25519 private key.*got undefined/],
      [{ id: 'k.1', privateKey: pem }, /signingKey\.id must be 1 to 64 letters/],
      [{ id: 'k1', privateKey: pair.publicKey }, /got a public KeyObject/],
      [{ id: 'k1', privateKey: pem, publicKey: 'x' }, /unknown field 'publicKey'/],
    ];
    for (const [key, pattern] of cases) {
      expect(() => new LeaseSigner(key)).toThrow(InvalidRequestError);
      expect(() => new LeaseSigner(key)).toThrow(pattern);
    }
    // Refused before any connection is made.
    expect(
      () => new Coordinator({ nodes: ['redis://127.0.0.1:1'], signingKey: { id: 'k1', privateKey: 'nope' } }),
    ).toThrow(/signingKey\.privateKey/);
  });

  it('never prints its private key', () => {
    const signer = new LeaseSigner({ id: 'k1', privateKey: pem });
    const secret = pem.split('\n')[1]!;
    expect(JSON.stringify(signer)).toBe('{"keyId":"k1"}');
    expect(inspect(signer, { depth: 5, showHidden: true })).not.toContain(secret);
    expect(inspect(signer)).toBe("LeaseSigner { keyId: 'k1' }");
  });
});
