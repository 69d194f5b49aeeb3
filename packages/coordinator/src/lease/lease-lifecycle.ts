import { LeaseLostError } from '@fenced/shared';
import type { LeaseWatch } from './lease-watch.js';
import { monotonicNow } from '../quorum/validity.js';
import type { AttemptReportOptions } from './attempt-report.js';

/**
 * What a granted lease does the same whether it covers one resource or several: it is held, then released or
 * lost, never held again; once not held its remaining validity is 0; a released or already expired lease is not
 * extended; and release is idempotent and first stops the watch, so that no extension starts once a release
 * began. `GrantedLease` and `GrantedMultiLease` add their grants, their extension and their release calls.
 */
export abstract class LeaseLifecycle implements AsyncDisposable {
  protected state: 'held' | 'released' | 'lost' = 'held';
  #releasing: Promise<void> | undefined;

  /** The watch behind `signal` and `autoExtend`. */
  protected abstract readonly watch: LeaseWatch;
  /** The resource this lease's own errors name (the first one of a set). */
  protected abstract errorResource(): string;
  /** Monotonic time at which the lease's validity ends (the earliest of a set's grants). */
  protected abstract validUntil(): number;
  /** Compare-and-delete of every resource on every node; `options.onAttempt` gets each node's votes in it. */
  protected abstract releaseEverywhere(options?: AttemptReportOptions): Promise<void>;

  /**
   * Aborts, with a `LeaseLostError`, when the lease is lost: an extension failed for good or its validity ran out
   * first. Releasing never aborts it (a released lease was not lost).
   */
  get signal(): AbortSignal {
    return this.watch.signal;
  }

  /** Whether a keeper extends this lease in the background (`autoExtend: true`) until it is released. */
  get autoExtending(): boolean {
    return this.watch.autoExtending;
  }

  /** Milliseconds of validity left, on this process's monotonic clock; 0 once released, lost or expired. */
  remainingMs(): number {
    if (this.state !== 'held') return 0;
    return this.validUntil() - monotonicNow();
  }

  /**
   * Releases the lease everywhere (a compare-and-delete: never another holder's lease) after stopping its keeper.
   * Idempotent; also resolves when the lease had already expired. `options.onAttempt` gets each node's vote
   * (lease/attempt-report.ts) when this call sends the release; a release already sent or done reports nothing.
   */
  release(options?: AttemptReportOptions): Promise<void> {
    // No extension may start once a release began: stop the keeper and the expiry timer first.
    this.watch.stop();
    if (this.state === 'released') return Promise.resolve();
    this.#releasing ??= this.releaseEverywhere(options).then(
      () => {
        this.state = 'released';
      },
      (error: unknown) => {
        this.#releasing = undefined;
        throw error;
      },
    );
    return this.#releasing;
  }

  /** `await using`: releases the lease at the end of the block. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.release();
  }

  /**
   * Before an extension: a released lease is not extended, and one whose validity already ran out is lost.
   * @throws LeaseLostError in either case
   */
  protected assertExtendable(): void {
    if (this.state === 'released') {
      throw new LeaseLostError(this.errorResource(), 'the lease was released; acquire a new one');
    }
    if (this.remainingMs() <= 0) {
      const error = new LeaseLostError(this.errorResource(), 'the lease expired before it was extended');
      this.markLost(error);
      throw error;
    }
  }

  /** The lease is gone: the signal first, while `remainingMs()` still reports the real deadline to its listeners. */
  protected markLost(error: LeaseLostError): void {
    this.watch.lost(error);
    this.state = 'lost';
  }
}
