import { randomBytes } from 'node:crypto';

const ID_BYTES = 16;
const POOL_BYTES = ID_BYTES * 256;

let pool = Buffer.alloc(0);
let offset = 0;

/**
 * A new lease id: 16 bytes (128 bits) from the CSPRNG as base64url (22 characters, never '|'). The bytes are
 * drawn from a pool refilled 4 KiB at a time, so the hot path does not call into OpenSSL once per acquire; every
 * byte is used once.
 */
export function newLeaseId(): string {
  if (offset + ID_BYTES > pool.length) {
    pool = randomBytes(POOL_BYTES);
    offset = 0;
  }
  const id = pool.toString('base64url', offset, offset + ID_BYTES);
  offset += ID_BYTES;
  return id;
}
