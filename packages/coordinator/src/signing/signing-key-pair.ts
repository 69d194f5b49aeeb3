import { generateKeyPairSync } from 'node:crypto';
import { chmod, mkdir, open, rm } from 'node:fs/promises';
import path from 'node:path';
import { ErrorCode, FencedError, InvalidRequestError, KEY_ID_PATTERN } from '@fenced/shared';

/** An Ed25519 key pair for signed leases (DESIGN §4b), as PEM text. */
export interface SigningKeyPair {
  /** The key id stores verify proofs by (`verifyKeys: { [id]: publicKeyPem }`). */
  readonly id: string;
  /** PKCS#8 PEM: the coordinator's `signingKey` (`FENCED_SIGNING_KEY_FILE`). Keep it secret. */
  readonly privateKeyPem: string;
  /** SPKI PEM: for the guarded stores. */
  readonly publicKeyPem: string;
}

/** Where {@link writeSigningKeyPair} put the pair. */
export interface SigningKeyFiles {
  /** `<dir>/<id>.private.pem`, mode 0600. */
  readonly privateKeyFile: string;
  /** `<dir>/<id>.public.pem`, mode 0644. */
  readonly publicKeyFile: string;
}

/** A default key id: `k` and today's UTC date, e.g. `k20261124`. */
export function defaultKeyId(now = new Date()): string {
  return `k${now.toISOString().slice(0, 10).replaceAll('-', '')}`;
}

/**
 * Generates an Ed25519 key pair named `id`.
 * @throws InvalidRequestError when `id` is not 1 to 64 letters, digits, '-' or '_'
 */
export function generateSigningKeyPair(id: string): SigningKeyPair {
  if (!KEY_ID_PATTERN.test(id)) {
    throw new InvalidRequestError(
      `the key id must be 1 to 64 letters, digits, '-' or '_', got ${JSON.stringify(id.slice(0, 80))}`,
    );
  }
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return Object.freeze({
    id,
    privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    publicKeyPem: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
  });
}

/** Thrown when a key of that id already exists in the directory: a key pair is never replaced by accident. */
export class KeyExistsError extends FencedError {
  override readonly name: string = 'KeyExistsError';
  constructor(readonly file: string) {
    super(
      ErrorCode.INVALID_REQUEST,
      `${file} already exists: a key pair is never overwritten; choose another key id`,
    );
  }
}

/**
 * Writes `<dir>/<id>.private.pem` (mode 0600, whatever the umask) and `<dir>/<id>.public.pem` (0644), creating
 * `dir`. Never overwrites: a file of that name fails with {@link KeyExistsError} (and, when the public file is
 * the one that exists, the private file just written is removed again).
 */
export async function writeSigningKeyPair(dir: string, pair: SigningKeyPair): Promise<SigningKeyFiles> {
  const directory = path.resolve(dir);
  await mkdir(directory, { recursive: true });
  const privateKeyFile = path.join(directory, `${pair.id}.private.pem`);
  const publicKeyFile = path.join(directory, `${pair.id}.public.pem`);
  await writeNew(privateKeyFile, pair.privateKeyPem, 0o600);
  try {
    await writeNew(publicKeyFile, pair.publicKeyPem, 0o644);
  } catch (error) {
    await rm(privateKeyFile, { force: true });
    throw error;
  }
  return { privateKeyFile, publicKeyFile };
}

async function writeNew(file: string, text: string, mode: number): Promise<void> {
  let handle;
  try {
    // 'wx' fails if the file exists.
    handle = await open(file, 'wx', mode);
  } catch (error) {
    if ((error as { code?: unknown }).code === 'EEXIST') throw new KeyExistsError(file);
    throw error;
  }
  try {
    await handle.writeFile(text, 'utf8');
  } finally {
    await handle.close();
  }
  await chmod(file, mode);
}
