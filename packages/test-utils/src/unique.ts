import { randomUUID } from 'node:crypto';

/**
 * A name no other test, test file or run uses: `<prefix>-<uuid>`. Tests isolate their resources (and rows, ids,
 * key prefixes) by name instead of wiping shared servers between tests.
 */
export function unique(prefix: string): string {
  return `${prefix}-${randomUUID()}`;
}
