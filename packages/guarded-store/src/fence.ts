import { hash } from 'node:crypto';
import {
  InvalidRequestError,
  LeaseLostError,
  assertToken,
  validateResourceName,
  type FencedLease,
  type FencedMultiLease,
} from '@fenced/shared';

/**
 * What a guarded transaction presents for one resource: the token of the lease it acts under and, optionally,
 * the lease's id.
 */
export interface Fence {
  readonly resource: string;
  readonly token: bigint;
  /**
   * The lease this write belongs to. An equal token is accepted only from the same lease, so a lease that
   * writes more than once with its token must name itself; without a lease id an equal token is refused.
   * Only a sha256 digest is stored.
   */
  readonly leaseId?: string | undefined;
  /**
   * The lease's fencing proof (`lease.proof`, DESIGN §4b). Required, with `leaseId`, when the store has
   * `verifyKeys`; ignored otherwise.
   */
  readonly proof?: string | undefined;
}

/** A {@link Fence}, or a lease from the coordinator (anything with `resource`, `id` and `token`). */
export type FenceLike = Fence | FencedLease;

/**
 * What a guarded transaction accepts: a {@link FenceLike}, or a lease over several resources (`resources`, `id`,
 * `tokens`, optional `proofs`: a coordinator `MultiLease`), which fences every one of its resources.
 */
export type FenceTarget = FenceLike | FencedMultiLease;

/** A validated fence, ready for the fence statement. */
export interface NormalizedFence {
  /** The resource, validated. */
  readonly resource: string;
  /** The token, validated (1 … 2^63 − 1). */
  readonly token: bigint;
  /** sha256 of the lease id, or null without one. */
  readonly leaseIdHash: Buffer | null;
  /** The proof as given (checked by the store's `ProofVerifier` when it verifies). */
  readonly proof: unknown;
}

const MAX_LEASE_ID_BYTES = 1024;

/**
 * Validates one fence or several and returns them sorted by resource (UTF-8 byte order, the same in every
 * process), the order in which their fence rows are locked: two transactions over overlapping sets of
 * resources then always lock in the same order and cannot deadlock on the fences.
 * @throws InvalidRequestError for a bad resource, token or lease id, an empty list or a repeated resource.
 */
export function normalizeFences(target: FenceTarget | readonly FenceTarget[]): NormalizedFence[] {
  const list: readonly FenceTarget[] = isFenceList(target) ? target : [target];
  if (list.length === 0) throw new InvalidRequestError('a guarded transaction needs at least one fence');
  for (const fence of list) assertNotReleased(fence);
  const fences = list.flatMap(expandMultiLease).map(normalizeFence);
  fences.sort((a, b) => Buffer.compare(Buffer.from(a.resource, 'utf8'), Buffer.from(b.resource, 'utf8')));
  for (let i = 1; i < fences.length; i++) {
    if (fences[i]!.resource === fences[i - 1]!.resource) {
      throw new InvalidRequestError('each resource may appear only once in a guarded transaction');
    }
  }
  return fences;
}

/**
 * A lease its holder released writes nothing more: refused at once, before any statement, even when no later
 * lease has written yet (the fence alone would still admit it). A lease is known released when it says so
 * (`released: true`, the HTTP client's leases) or, for a coordinator lease, when `remainingMs()` reports exactly
 * 0 while its `signal` has not aborted: a coordinator lease reports 0 only once it is released or lost, and
 * aborts its signal when lost (a held lease past its validity reports a negative number).
 * @throws LeaseLostError naming the resource.
 */
function assertNotReleased(fence: FenceTarget): void {
  if (typeof fence !== 'object' || fence === null) return;
  const { released, remainingMs, signal } = fence as {
    released?: unknown;
    remainingMs?: unknown;
    signal?: unknown;
  };
  const coordinatorReleased =
    typeof remainingMs === 'function' &&
    signal instanceof AbortSignal &&
    !signal.aborted &&
    (remainingMs as () => unknown).call(fence) === 0;
  if (released === true || coordinatorReleased) {
    const resource = 'resources' in fence ? String(fence.resources[0]) : String(fence.resource);
    throw new LeaseLostError(
      resource,
      `the lease on ${JSON.stringify(resource)} was released: a released lease writes nothing more; acquire a new one`,
    );
  }
}

function isFenceList(target: FenceTarget | readonly FenceTarget[]): target is readonly FenceTarget[] {
  return Array.isArray(target);
}

/**
 * A multi-resource lease becomes one fence per resource (same lease id, each resource's own token and proof);
 * anything else is passed through. Its resources are then sorted with every other fence's.
 */
function expandMultiLease(fence: FenceTarget): FenceLike[] {
  if (typeof fence !== 'object' || fence === null || !('tokens' in fence)) return [fence];
  const { resources, id, tokens, proofs } = fence;
  if (!Array.isArray(resources) || resources.length === 0 || !(tokens instanceof Map)) {
    throw new InvalidRequestError(
      'a multi-resource lease needs resources (a non-empty array) and tokens (a Map)',
    );
  }
  if (proofs !== undefined && !(proofs instanceof Map)) {
    throw new InvalidRequestError(
      'the proofs of a multi-resource lease must be a Map from resource to proof',
    );
  }
  const list: readonly unknown[] = resources;
  const tokenOf: ReadonlyMap<unknown, unknown> = tokens;
  const proofOf: ReadonlyMap<unknown, unknown> | undefined = proofs;
  return list.map((resource) => {
    const token = tokenOf.get(resource);
    if (token === undefined) {
      throw new InvalidRequestError('a multi-resource lease has no token for one of its resources');
    }
    // Resource, token and lease id are validated by normalizeFence like any other fence's.
    return { resource, leaseId: id, token, proof: proofOf?.get(resource) } as Fence;
  });
}

function normalizeFence(fence: FenceLike): NormalizedFence {
  if (typeof fence !== 'object' || fence === null) {
    throw new InvalidRequestError('a fence must be an object with resource and token');
  }
  const resource = validateResourceName(fence.resource);
  const token = assertToken(fence.token);
  const leaseId = 'leaseId' in fence ? fence.leaseId : 'id' in fence ? fence.id : undefined;
  return {
    resource,
    token,
    leaseIdHash: leaseId === undefined ? null : hashLeaseId(leaseId),
    proof: 'proof' in fence ? fence.proof : undefined,
  };
}

/** The digest stored in `fence.lease_id_hash`. */
export function hashLeaseId(leaseId: unknown): Buffer {
  if (
    typeof leaseId !== 'string' ||
    leaseId.length === 0 ||
    Buffer.byteLength(leaseId) > MAX_LEASE_ID_BYTES
  ) {
    throw new InvalidRequestError(`lease id must be a string of 1 to ${MAX_LEASE_ID_BYTES} bytes`);
  }
  // One-shot: no Hash object (a native handle the collector must finalize) per guarded transaction.
  return hash('sha256', leaseId, 'buffer');
}

/**
 * The lease digest the guard's SQL function `fence(resource, token, lease_hash)` takes: sha256 of the lease id,
 * 64 lower-case hex digits. Pass the lease id itself (`lease.id`), never log it.
 * @throws InvalidRequestError for a lease id that is not a string of 1 to 1024 bytes.
 */
export function leaseIdHash(leaseId: string): string {
  return hashLeaseId(leaseId).toString('hex');
}

const OP_ID = /^[\x21-\x7e]{1,255}$/;

/**
 * An operation id is 1–255 visible ASCII characters (what an `Idempotency-Key` header can carry).
 * @throws InvalidRequestError otherwise.
 */
export function validateOpId(opId: unknown): string {
  if (typeof opId !== 'string' || !OP_ID.test(opId)) {
    throw new InvalidRequestError('operation id must be 1 to 255 visible ASCII characters (no spaces)');
  }
  return opId;
}
