import { fencesOf, InvalidRequestError, LeaseLostError, type FencedLease } from '@fenced/shared';
import type { LeaseGrant, LeaseOperations } from './lease.js';
import { LeaseLifecycle } from './lease-lifecycle.js';
import { LeaseWatch, type LeaseWatchContext, type LeaseWatchOptions } from './lease-watch.js';
import { monotonicNow } from '../quorum/validity.js';
import { reportAttempt, type AttemptReportOptions, type NodeVote } from './attempt-report.js';

/** Most resources one multi-resource lease may cover. */
export const MAX_LEASE_RESOURCES = 64;

/**
 * A lease over several resources, granted all or nothing (`coordinator.acquire([...])`). Each resource has its
 * own grant and fencing token, all under one lease id; the set is extended and released as one.
 *
 * There is deliberately no `token` or `resource`: a single token cannot fence several resources (tokens are per
 * resource), so code written for one-resource leases fails to compile instead of fencing the wrong thing. Pass
 * the lease itself to `store.run(lease, …)`: it fences every resource, in the guard's lock order.
 */
export interface MultiLease extends AsyncDisposable {
  /** Every resource, sorted (UTF-8 byte order) and without repeats: the order they were acquired in. */
  readonly resources: readonly string[];
  /** At least 128 random bits, base64url, shared by every resource's grant. Never log it. */
  readonly id: string;
  /** The fencing token of each resource; extending keeps them. */
  readonly tokens: ReadonlyMap<string, bigint>;
  /** The fencing proof of each resource when the coordinator signs (DESIGN §4b), else `undefined`. */
  readonly proofs: ReadonlyMap<string, string> | undefined;
  /** The ttl asked for at grant time or at the last extension. */
  readonly ttlMs: number;
  /** Validity of the whole set at grant or extension time: the smallest validity of its resources. */
  readonly validityMs: number;
  /** Wall-clock estimate of the end of validity, for people; code should use `remainingMs()`. */
  readonly expiresAt: Date;
  /** Remaining validity of the whole set on the monotonic clock; `<= 0` once expired, released or lost. */
  remainingMs(): number;
  /** As `Lease.signal`, for the whole set: any resource lost means the set is lost. */
  readonly signal: AbortSignal;
  /** Whether the coordinator is extending this lease in the background (`autoExtend`, until release or loss). */
  readonly autoExtending: boolean;
  /** One lease per resource (same id), e.g. for APIs that take a single-resource fence. */
  fences(): FencedLease[];
  /**
   * Compare-and-extend every resource on a majority within the remaining validity; same tokens.
   * `options.onAttempt` gets each node's vote in the extension (lease/attempt-report.ts).
   * @throws LeaseLostError (naming the resource) when any resource was lost: the whole set is then released
   */
  extend(ttlMs?: number, options?: AttemptReportOptions): Promise<void>;
  /**
   * Compare-and-delete every resource on every node. Idempotent; an expired lease is released without error.
   * `options.onAttempt` gets each node's vote when this call sends the release (not when one was already sent).
   */
  release(options?: AttemptReportOptions): Promise<void>;
}

/**
 * Sorts and deduplicates resource names in UTF-8 byte order: the acquire order of a multi-resource lease, and the
 * order in which the guarded store locks fence rows, the same in every process.
 */
export function lockOrder(resources: readonly string[]): string[] {
  const unique = [...new Set(resources)];
  return unique.sort((a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
}

/** Validates a list of resources for a multi-resource lease and returns it in lock order. */
export function validateResourceList(
  resources: unknown,
  validateName: (resource: unknown) => string,
): string[] {
  if (!Array.isArray(resources) || resources.length === 0) {
    throw new InvalidRequestError('resources must be a non-empty array of resource names');
  }
  const names = lockOrder(resources.map((r) => validateName(r)));
  if (names.length > MAX_LEASE_RESOURCES) {
    throw new InvalidRequestError(
      `a lease covers at most ${MAX_LEASE_RESOURCES} resources, got ${names.length}`,
    );
  }
  return names;
}

export class GrantedMultiLease extends LeaseLifecycle implements MultiLease {
  readonly resources: readonly string[];
  readonly tokens: ReadonlyMap<string, bigint>;
  private grants: Map<string, LeaseGrant>;
  private validity: number;
  protected readonly watch: LeaseWatch;

  constructor(
    private readonly operations: LeaseOperations,
    readonly id: string,
    grants: ReadonlyMap<string, LeaseGrant>,
    /** Signed once per resource at grant time; nothing they sign changes on extension. */
    readonly proofs: ReadonlyMap<string, string> | undefined = undefined,
    watching: { context: LeaseWatchContext; options?: LeaseWatchOptions } = {
      context: { retryDelayMs: 100, live: new Set() },
    },
  ) {
    super();
    this.resources = [...grants.keys()];
    this.grants = new Map(grants);
    this.tokens = new Map([...grants].map(([resource, grant]) => [resource, grant.token]));
    this.validity = Math.floor(this.validUntil() - monotonicNow());
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the watch reads the set's current validity
    const lease = this;
    this.watch = new LeaseWatch(
      {
        // Errors of the watch name the first resource; an extension's own LeaseLostError names the lost one.
        resource: this.resources[0]!,
        get validityMs() {
          return lease.validityMs;
        },
        remainingMs: () => this.remainingMs(),
        extend: (ttlMs?: number) => this.extend(ttlMs),
      },
      watching.context,
      watching.options,
    );
    this.watch.start();
  }

  get ttlMs(): number {
    return this.firstGrant().ttlMs;
  }

  get validityMs(): number {
    return this.validity;
  }

  get expiresAt(): Date {
    return new Date(Date.now() + (this.validUntil() - monotonicNow()));
  }

  fences(): FencedLease[] {
    return fencesOf(this);
  }

  async extend(ttlMs: number = this.ttlMs, options?: AttemptReportOptions): Promise<void> {
    this.assertExtendable();
    // Every resource against the same deadline: the set is valid only while all of them are.
    const validUntil = this.validUntil();
    const votes: (Promise<readonly NodeVote[]> | undefined)[] = this.resources.map(() => undefined);
    const sink = (i: number) =>
      options?.onAttempt && ((v: Promise<readonly NodeVote[]>) => void (votes[i] = v));
    const results = await Promise.allSettled(
      this.resources.map((resource, i) =>
        this.operations.extendLease(resource, this.id, ttlMs, validUntil, sink(i)),
      ),
    );
    const extended = results.every((r) => r.status === 'fulfilled');
    reportAttempt(options?.onAttempt, 'extend', this.resources, votes, extended);
    results.forEach((result, i) => {
      const resource = this.resources[i]!;
      // A resource that extended keeps its token (DESIGN §3); one that did not keeps its old, earlier deadline,
      // so the set's validity stays the smallest of its members.
      if (result.status === 'fulfilled') {
        this.grants.set(resource, { ...result.value, token: this.grants.get(resource)!.token });
      }
    });
    const lost = results.find(
      (r): r is PromiseRejectedResult => r.status === 'rejected' && r.reason instanceof LeaseLostError,
    );
    if (lost !== undefined && this.state === 'held') {
      // One resource gone means the set is gone: let the others go too rather than block them until their ttl.
      this.markLost(lost.reason as LeaseLostError);
      this.releaseEverywhere().catch(() => undefined);
      throw lost.reason;
    }
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    this.validity = Math.floor(this.validUntil() - monotonicNow());
    this.watch.extended();
  }

  /** Never prints the lease id. */
  toJSON(): { resources: string[]; tokens: Record<string, string>; validityMs: number; expiresAt: string } {
    return {
      resources: [...this.resources],
      tokens: Object.fromEntries([...this.tokens].map(([r, t]) => [r, t.toString()])),
      validityMs: this.validityMs,
      expiresAt: this.expiresAt.toISOString(),
    };
  }

  protected errorResource(): string {
    return this.resources[0]!;
  }

  /** Releases every resource (in parallel: nothing is waited for while holding); the first failure is thrown. */
  protected async releaseEverywhere(options?: AttemptReportOptions): Promise<void> {
    const votes: (Promise<readonly NodeVote[]> | undefined)[] = this.resources.map(() => undefined);
    const sink = (i: number) =>
      options?.onAttempt && ((v: Promise<readonly NodeVote[]>) => void (votes[i] = v));
    const results = await Promise.allSettled(
      this.resources.map((resource, i) => this.operations.releaseLease(resource, this.id, sink(i))),
    );
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    reportAttempt(options?.onAttempt, 'release', this.resources, votes, failed === undefined);
    if (failed !== undefined) throw failed.reason;
  }

  protected validUntil(): number {
    let earliest = Infinity;
    for (const grant of this.grants.values()) earliest = Math.min(earliest, grant.validUntil);
    return earliest;
  }

  private firstGrant(): LeaseGrant {
    return this.grants.get(this.resources[0]!)!;
  }
}
