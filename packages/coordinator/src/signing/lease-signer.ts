/**
 * Signs every lease the coordinator grants (DESIGN §4b): the proof is the coordinator's Ed25519 signature over
 * the key id, the resource, the token and the sha256 of the lease id, in the v1 format of `@fenced/shared`
 * (`proof.ts`), which the guarded store verifies with the same codec.
 *
 * Why it is safe to sign here: a proof is made only for a grant a majority promised (`sign` is called in one
 * place, where protocol/lease-protocol.ts builds the lease, after the quorum), so a store that verifies proofs
 * accepts exactly the (resource, token, lease) triples the coordinator handed out. A client can no longer raise a
 * fence with a token it made up (test/fault/forged-tokens.test.ts fails when the store skips verification).
 */
import type { KeyObject } from 'node:crypto';
import { inspect } from 'node:util';
import {
  InvalidRequestError,
  ed25519PrivateKey,
  leaseIdDigest,
  signProof,
  validateKeyId,
} from '@fenced/shared';

/** The coordinator's `signingKey` option: an Ed25519 private key and the id stores know its public half by. */
export interface SigningKey {
  /** 1–64 letters, digits, `-` or `_`; appears in every proof (`v1.<id>.…`). */
  readonly id: string;
  /** A `KeyObject` or a PKCS#8 PEM string (`-----BEGIN PRIVATE KEY-----`), e.g. from `fenced-coordinator keygen`. */
  readonly privateKey: KeyObject | string;
}

/** Holds the private key and signs leases. Prints as its key id only, never the key. */
export class LeaseSigner {
  readonly keyId: string;
  readonly #privateKey: KeyObject;

  /** @throws InvalidRequestError naming the bad field, what was given (its type) and what is allowed. */
  constructor(key: unknown) {
    if (typeof key !== 'object' || key === null || Array.isArray(key)) {
      throw new InvalidRequestError(
        `signingKey must be an object { id, privateKey }, got ${key === null ? 'null' : Array.isArray(key) ? 'an array' : `a ${typeof key}`}`,
      );
    }
    const { id, privateKey, ...rest } = key as Record<string, unknown>;
    const unknown = Object.keys(rest);
    if (unknown.length > 0) {
      throw new InvalidRequestError(
        `signingKey has unknown field ${unknown.map((k) => `'${k}'`).join(', ')}: only id and privateKey are allowed`,
      );
    }
    this.keyId = validateKeyId(id, 'signingKey.id');
    this.#privateKey = ed25519PrivateKey(privateKey, 'signingKey.privateKey');
  }

  /** The proof of one grant; the same lease always signs to the same proof (Ed25519 is deterministic). */
  sign(resource: string, token: bigint, leaseId: string): string {
    return signProof(this.#privateKey, {
      keyId: this.keyId,
      resource,
      token,
      leaseIdDigest: leaseIdDigest(leaseId),
    });
  }

  toJSON(): { keyId: string } {
    return { keyId: this.keyId };
  }

  [inspect.custom](): string {
    return `LeaseSigner { keyId: '${this.keyId}' }`;
  }
}

/** A signer for the option, or `undefined` when leases are not signed (the default). */
export function createLeaseSigner(key: unknown): LeaseSigner | undefined {
  return key === undefined ? undefined : new LeaseSigner(key);
}
