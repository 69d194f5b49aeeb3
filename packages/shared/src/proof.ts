/**
 * Fencing proofs (DESIGN §4b): the coordinator's Ed25519 signature over one lease's resource, token and lease id,
 * so that a guarded store holding only public keys can tell a token the coordinator granted from one a client
 * made up (a forged 2^63 − 1 would otherwise raise a fence for good) or carried over from another resource.
 *
 * Wire form, version 1 — `v1.<keyId>.<signature>`:
 * - `keyId`: 1–64 characters of `[A-Za-z0-9_-]` naming the signing key, so stores can hold several keys during a
 *   rotation and pick the right one without trying each;
 * - `signature`: the 64-byte Ed25519 signature, base64url without padding (always 86 characters).
 *
 * The signed message is binary and unambiguous: every variable-length field carries its length, the fixed ones
 * have fixed sizes, and a domain tag opens it so that no other signature made with the key can pass for a proof:
 *
 *     "fenced-proof-v1" 0x00                   16 bytes, domain separation and version
 *     u16be len(keyId)  keyId (ASCII)          the key id is signed: a proof cannot be relabelled to another key
 *     u16be len(resource)  resource (UTF-8)    1–256 bytes
 *     u64be token                              1 ..= 2^63 − 1
 *     sha256(lease id, UTF-8)                  32 bytes: binds the lease without putting its id in the proof
 *
 * Ed25519 signatures are deterministic, so extending a lease (same resource, token and id) yields the same proof.
 * A proof is no secret — it grants nothing without the lease id it is bound to — but it is not logged either.
 */
import { createHash, createPrivateKey, createPublicKey, KeyObject, sign, verify } from 'node:crypto';
import { InvalidProofError, InvalidRequestError } from './errors.js';
import { assertToken } from './token.js';

/** The version prefix of every proof this code writes (`v1.<keyId>.<signature>`). */
export const PROOF_VERSION = 'v1';

/** A signing key's id: what `v1.<keyId>.…` names and what a store's `verifyKeys` are keyed by. */
export const KEY_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** The whole proof, as a header or a JSON field carries it. */
export const PROOF_PATTERN = /^v1\.[A-Za-z0-9_-]{1,64}\.[A-Za-z0-9_-]{86}$/;

/** Longest proof: `v1.` + 64 + `.` + 86. */
export const MAX_PROOF_LENGTH = 154;

const DOMAIN = Buffer.from('fenced-proof-v1\0', 'latin1');
const SIGNATURE_BYTES = 64;
const DIGEST_BYTES = 32;

/** What a proof vouches for. */
export interface ProofClaims {
  readonly keyId: string;
  readonly resource: string;
  readonly token: bigint;
  /** sha256 of the lease id (UTF-8): see {@link leaseIdDigest}. */
  readonly leaseIdDigest: Buffer;
}

/** A proof split into its fields (not yet verified). */
export interface DecodedProof {
  readonly keyId: string;
  readonly signature: Buffer;
}

/** sha256 of a lease id (UTF-8): what a proof signs and what the store keeps in `fence.lease_id_hash`. */
export function leaseIdDigest(leaseId: string): Buffer {
  return createHash('sha256').update(leaseId, 'utf8').digest();
}

/**
 * The exact bytes a v1 proof signs (see the file header).
 * @throws InvalidRequestError for a bad key id, resource, token or digest.
 */
export function proofMessage(claims: ProofClaims): Buffer {
  const keyId = validateKeyId(claims.keyId, 'key id');
  const token = assertToken(claims.token, 'token');
  if (!Buffer.isBuffer(claims.leaseIdDigest) || claims.leaseIdDigest.length !== DIGEST_BYTES) {
    throw new InvalidRequestError('leaseIdDigest must be the 32-byte sha256 of the lease id');
  }
  const resource = Buffer.from(claims.resource, 'utf8');
  const message = Buffer.alloc(DOMAIN.length + 2 + keyId.length + 2 + resource.length + 8 + DIGEST_BYTES);
  let at = DOMAIN.copy(message, 0);
  at = message.writeUInt16BE(keyId.length, at);
  at += message.write(keyId, at, 'latin1');
  at = message.writeUInt16BE(resource.length, at);
  at += resource.copy(message, at);
  at = message.writeBigUInt64BE(token, at);
  claims.leaseIdDigest.copy(message, at);
  return message;
}

/** Signs the claims with an Ed25519 private key: the proof's wire form. */
export function signProof(privateKey: KeyObject, claims: ProofClaims): string {
  const signature = sign(null, proofMessage(claims), privateKey);
  return `${PROOF_VERSION}.${claims.keyId}.${signature.toString('base64url')}`;
}

/**
 * Splits a proof into key id and signature. Says nothing about whether it is valid.
 * @throws InvalidProofError `missing` for undefined or an empty string, `malformed` for anything else that is
 *   not `v1.<keyId>.<86 base64url characters>`. The message never repeats the proof.
 */
export function decodeProof(proof: unknown, resource: string): DecodedProof {
  if (proof === undefined || proof === null || proof === '') {
    throw new InvalidProofError(
      resource,
      'missing',
      "a fencing proof is required: this store verifies signed tokens (send the lease's proof, e.g. in the Fencing-Proof header)",
    );
  }
  if (typeof proof !== 'string') {
    throw new InvalidProofError(
      resource,
      'malformed',
      `fencing proof must be a string 'v1.<keyId>.<signature>', got ${typeOf(proof)}`,
    );
  }
  if (!PROOF_PATTERN.test(proof)) {
    throw new InvalidProofError(
      resource,
      'malformed',
      `fencing proof is malformed: expected 'v1.<keyId>.<86 base64url characters>', got a string of ${proof.length} characters` +
        (proof.startsWith(`${PROOF_VERSION}.`) ? '' : ` not starting with '${PROOF_VERSION}.'`),
    );
  }
  const [, keyId, signature] = proof.split('.') as [string, string, string];
  const bytes = Buffer.from(signature, 'base64url');
  // 86 base64url characters carry 64 bytes and 4 spare bits; a signature whose spare bits are set is another
  // spelling of the same bytes, refused so that each signature has exactly one wire form.
  if (bytes.length !== SIGNATURE_BYTES || bytes.toString('base64url') !== signature) {
    throw new InvalidProofError(
      resource,
      'malformed',
      'fencing proof is malformed: its signature is not the canonical base64url of 64 bytes',
    );
  }
  return { keyId, signature: bytes };
}

/**
 * Verifies a proof for exactly these claims (resource, token, lease digest) against the store's public keys.
 * @returns the id of the key that verified it.
 * @throws InvalidProofError `missing`, `malformed`, `unknown-key` or `mismatch`; never repeats the proof.
 */
export function verifyProof(
  keys: ReadonlyMap<string, KeyObject>,
  proof: unknown,
  claims: Omit<ProofClaims, 'keyId'>,
): string {
  const { keyId, signature } = decodeProof(proof, claims.resource);
  const key = keys.get(keyId);
  if (key === undefined) {
    throw new InvalidProofError(
      claims.resource,
      'unknown-key',
      `fencing proof is signed by key '${keyId}', which this store does not trust (known: ${[...keys.keys()].join(', ') || 'none'})`,
    );
  }
  if (!verify(null, proofMessage({ ...claims, keyId }), key, signature)) {
    throw new InvalidProofError(
      claims.resource,
      'mismatch',
      `fencing proof of key '${keyId}' does not match this resource, token ${claims.token} and lease: it was made for another grant, or forged`,
    );
  }
  return keyId;
}

/**
 * Checks a key id (see {@link KEY_ID_PATTERN}).
 * @throws InvalidRequestError naming `what`, the value's type and what is allowed.
 */
export function validateKeyId(id: unknown, what = 'key id'): string {
  if (typeof id !== 'string' || !KEY_ID_PATTERN.test(id)) {
    throw new InvalidRequestError(
      `${what} must be 1 to 64 letters, digits, '-' or '_', got ${typeof id === 'string' ? `"${id.slice(0, 80)}"` : typeOf(id)}`,
    );
  }
  return id;
}

/**
 * An Ed25519 private key from a `KeyObject` or a PEM string (PKCS#8, `-----BEGIN PRIVATE KEY-----`).
 * @throws InvalidRequestError naming `what`, what was given (its type, never its content) and what is allowed.
 */
export function ed25519PrivateKey(input: unknown, what = 'privateKey'): KeyObject {
  const allowed = `${what} must be an Ed25519 private key (a KeyObject, or a PEM string '-----BEGIN PRIVATE KEY-----')`;
  let key: KeyObject;
  if (input instanceof KeyObject) {
    if (input.type !== 'private') throw new InvalidRequestError(`${allowed}, got a ${input.type} KeyObject`);
    key = input;
  } else if (typeof input === 'string') {
    try {
      key = createPrivateKey({ key: input, format: 'pem' });
    } catch {
      throw new InvalidRequestError(`${allowed}, got a string of ${input.length} characters that is not one`);
    }
  } else {
    throw new InvalidRequestError(`${allowed}, got ${typeOf(input)}`);
  }
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new InvalidRequestError(`${allowed}, got an ${key.asymmetricKeyType ?? 'unknown'} key`);
  }
  return key;
}

/**
 * An Ed25519 public key from a `KeyObject` or a PEM string (SPKI, `-----BEGIN PUBLIC KEY-----`). A private key is
 * refused: a store that verifies proofs needs no signing key, and must not hold one.
 * @throws InvalidRequestError naming `what`, what was given (its type, never its content) and what is allowed.
 */
export function ed25519PublicKey(input: unknown, what = 'publicKey'): KeyObject {
  const allowed = `${what} must be an Ed25519 public key (a KeyObject, or a PEM string '-----BEGIN PUBLIC KEY-----')`;
  let key: KeyObject;
  if (input instanceof KeyObject) {
    if (input.type !== 'public') {
      throw new InvalidRequestError(
        `${allowed}, got a ${input.type} KeyObject${input.type === 'private' ? ' (give the public half only)' : ''}`,
      );
    }
    key = input;
  } else if (typeof input === 'string') {
    if (/-----BEGIN [A-Z ]*PRIVATE KEY-----/.test(input)) {
      throw new InvalidRequestError(`${allowed}, got a PEM private key (give the public half only)`);
    }
    try {
      key = createPublicKey({ key: input, format: 'pem' });
    } catch {
      throw new InvalidRequestError(`${allowed}, got a string of ${input.length} characters that is not one`);
    }
  } else {
    throw new InvalidRequestError(`${allowed}, got ${typeOf(input)}`);
  }
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new InvalidRequestError(`${allowed}, got an ${key.asymmetricKeyType ?? 'unknown'} key`);
  }
  return key;
}

function typeOf(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return 'an array';
  if (Buffer.isBuffer(value)) return `a Buffer of ${value.length} bytes`;
  const type = typeof value;
  return type === 'object' ? 'an object' : `a ${type}`;
}
