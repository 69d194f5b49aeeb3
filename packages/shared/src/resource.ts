import { InvalidRequestError } from './errors.js';
import { invalidValue } from './validation.js';

/** Longest resource name, in UTF-8 bytes. */
export const MAX_RESOURCE_BYTES = 256;

// C0 controls, DEL and C1 controls.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * A resource name is 1–256 bytes of UTF-8 without control characters (DESIGN §5).
 * @throws InvalidRequestError naming what is allowed.
 */
export function validateResourceName(resource: unknown): string {
  if (typeof resource !== 'string') {
    throw invalidValue('resource', `a string of 1 to ${MAX_RESOURCE_BYTES} UTF-8 bytes`, resource);
  }
  const bytes = Buffer.byteLength(resource, 'utf8');
  if (bytes === 0 || bytes > MAX_RESOURCE_BYTES) {
    throw new InvalidRequestError(`resource must be 1 to ${MAX_RESOURCE_BYTES} UTF-8 bytes, got ${bytes}`);
  }
  if (CONTROL.test(resource)) {
    throw new InvalidRequestError('resource must not contain control characters');
  }
  if (!isWellFormed(resource)) {
    throw new InvalidRequestError('resource must be well-formed UTF-16 (no lone surrogates)');
  }
  return resource;
}

function isWellFormed(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return false;
    }
  }
  return true;
}
