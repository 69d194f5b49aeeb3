import {
  InternalError,
  PROOF_PATTERN,
  parseToken,
  type LeaseResponseBody,
  type MultiLeaseResponseBody,
} from '@fenced/shared';
import type { ReportedGrant } from './client-lease.js';
import type { ReportedMultiGrant } from './client-multi-lease.js';

// The service's lease responses, read and checked field by field: a proxy's page or a malformed body becomes an
// InternalError naming the status, never a half-filled lease.

/** The response body as JSON, or null when it is empty or not JSON. */
export async function readBody(response: Response): Promise<unknown> {
  const text = await response.text();
  if (text === '') return null;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}

/** A single-resource lease from a 200/201 body. @throws InternalError when a field is missing or malformed */
export function toGrant(body: unknown, validFrom: number, status: number): ReportedGrant {
  const lease = body as Partial<LeaseResponseBody> | null;
  if (
    typeof lease?.resource !== 'string' ||
    typeof lease.leaseId !== 'string' ||
    typeof lease.ttlMs !== 'number' ||
    typeof lease.validityMs !== 'number' ||
    typeof lease.expiresAt !== 'string' ||
    (lease.proof !== undefined && (typeof lease.proof !== 'string' || !PROOF_PATTERN.test(lease.proof)))
  ) {
    throw new InternalError(`malformed lease in the coordinator's ${status} response`);
  }
  return {
    resource: lease.resource,
    id: lease.leaseId,
    token: parseToken(lease.token, 'token'),
    proof: lease.proof,
    ttlMs: lease.ttlMs,
    validityMs: lease.validityMs,
    expiresAt: new Date(lease.expiresAt),
    validFrom,
  };
}

/** A multi-resource lease from a 200/201 body. @throws InternalError when a field is missing or malformed */
export function toMultiGrant(body: unknown, validFrom: number, status: number): ReportedMultiGrant {
  const lease = body as Partial<MultiLeaseResponseBody> | null;
  const malformed = (): InternalError =>
    new InternalError(`malformed multi-resource lease in the coordinator's ${status} response`);
  if (
    !Array.isArray(lease?.resources) ||
    lease.resources.length === 0 ||
    !lease.resources.every((r) => typeof r === 'string') ||
    typeof lease.leaseId !== 'string' ||
    typeof lease.tokens !== 'object' ||
    lease.tokens === null ||
    typeof lease.ttlMs !== 'number' ||
    typeof lease.validityMs !== 'number' ||
    typeof lease.expiresAt !== 'string' ||
    (lease.proofs !== undefined && (typeof lease.proofs !== 'object' || lease.proofs === null))
  ) {
    throw malformed();
  }
  const tokens = new Map<string, bigint>();
  const proofs = lease.proofs === undefined ? undefined : new Map<string, string>();
  for (const resource of lease.resources) {
    // Own properties only: a resource may be called `__proto__` or `constructor`.
    if (!Object.hasOwn(lease.tokens, resource)) throw malformed();
    tokens.set(resource, parseToken(lease.tokens[resource], 'token'));
    if (proofs !== undefined) {
      const proof: unknown = Object.hasOwn(lease.proofs!, resource) ? lease.proofs![resource] : undefined;
      if (typeof proof !== 'string' || !PROOF_PATTERN.test(proof)) throw malformed();
      proofs.set(resource, proof);
    }
  }
  return {
    resources: [...lease.resources],
    id: lease.leaseId,
    tokens,
    proofs,
    ttlMs: lease.ttlMs,
    validityMs: lease.validityMs,
    expiresAt: new Date(lease.expiresAt),
    validFrom,
  };
}
