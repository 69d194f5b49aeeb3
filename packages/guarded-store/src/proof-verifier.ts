/**
 * The guard's check of fencing proofs (DESIGN §4b), run before a guarded transaction begins.
 *
 * Invariant: with verification on, a fence row is raised only to a (resource, token, lease) that the
 * coordinator signed. `GuardedStore.run` calls `verify` for every fence before it opens the transaction, so a
 * forged token (2^63 − 1), another resource's token, another lease's proof, a proof of an unknown key or no
 * proof at all never reaches the fence statement: no row is locked or raised, and the callback does not run.
 * test/integration/guarded-store/signed-fences.test.ts and test/fault/forged-tokens.test.ts (F20) fail when
 * this check is skipped.
 *
 * Verification is memoised: a successful check is remembered under (proof — which names its key id —, resource,
 * token, lease digest) in a bounded LRU, so a holder's second and later writes cost a map lookup instead of an
 * Ed25519 verify. Only successes are cached: a cached entry is exactly a fact the keys proved, and the set of keys
 * is fixed for the store's life, so an entry never goes stale. Failures are not cached (caching them would let
 * a flood of bad proofs evict the good ones).
 */
import type { KeyObject } from 'node:crypto';
import { InvalidProofError, verifyProof } from '@fenced/shared';
import type { NormalizedFence } from './fence.js';

export class ProofVerifier {
  readonly #keys: ReadonlyMap<string, KeyObject>;
  readonly #capacity: number;
  /** Insertion order is recency order: a hit is moved to the end, the oldest entry is evicted first. */
  readonly #verified = new Map<string, true>();
  #checks = 0;
  #hits = 0;

  constructor(keys: ReadonlyMap<string, KeyObject>, capacity: number) {
    this.#keys = keys;
    this.#capacity = capacity;
  }

  /** The key ids this store trusts. */
  get keyIds(): readonly string[] {
    return [...this.#keys.keys()];
  }

  /** How many checks ran, and how many of them the cache answered (for tests and metrics). */
  get stats(): { readonly checks: number; readonly cacheHits: number; readonly cached: number } {
    return { checks: this.#checks, cacheHits: this.#hits, cached: this.#verified.size };
  }

  /**
   * @throws InvalidProofError (`missing`, `missing-lease-id`, `malformed`, `unknown-key` or `mismatch`) unless the
   *   fence carries a proof one of the keys made for exactly its resource, token and lease id.
   */
  verify(fence: NormalizedFence): void {
    this.#checks++;
    const { resource, token, proof, leaseIdHash } = fence;
    if (typeof proof === 'string' && leaseIdHash !== null) {
      // Proofs and resources hold no control characters, so '\n' separates the parts unambiguously.
      const key = `${proof}\n${resource}\n${token}\n${leaseIdHash.toString('hex')}`;
      if (this.#verified.delete(key)) {
        this.#verified.set(key, true);
        this.#hits++;
        return;
      }
      verifyProof(this.#keys, proof, { resource, token, leaseIdDigest: leaseIdHash });
      this.#remember(key);
      return;
    }
    if (proof !== undefined && leaseIdHash === null) {
      throw new InvalidProofError(
        resource,
        'missing-lease-id',
        'a signed fence needs its lease id: the proof signs the lease, so send the lease id (Fencing-Lease-Id) exactly as granted',
      );
    }
    // Missing or not a string: the codec names which.
    verifyProof(this.#keys, proof, { resource, token, leaseIdDigest: Buffer.alloc(32) });
  }

  #remember(key: string): void {
    if (this.#capacity === 0) return;
    if (this.#verified.size >= this.#capacity) {
      const oldest = this.#verified.keys().next();
      if (!oldest.done) this.#verified.delete(oldest.value);
    }
    this.#verified.set(key, true);
  }
}
