import type { MultiLease } from '@fenced/coordinator';
import { LeaseLostError, QuorumUnavailableError } from '@fenced/shared';

/**
 * Keeps a lock whose requested duration is longer than the maximum TTL recorded on the cluster's nodes — a cluster
 * initialized by another fenced process (one hour by default), not by a Redlock (which records
 * `REDLOCK_MAX_TTL_MS`, so every duration fits): the lease on the nodes lives at most that maximum, and this keeper
 * extends it (at half its remaining validity, each time to `min(maxTtlMs, time left)`) until the requested
 * duration is over, then releases it, as the lock would have expired.
 *
 * Why not a longer lease here: the nodes refuse an acquire or extend above the cluster's recorded maximum (a setting
 * every process of the cluster shares; nodes/cluster-settings.ts in the coordinator). No token argument rests on
 * it: extensions keep the token and mint none, so the chain is one grant and G2 is untouched. What the caller gives
 * up is only what an extension can fail to do: when the nodes cannot be reached for a whole lease, the lock is lost
 * before its requested end (`onLost`), exactly like a lock that `using()` fails to extend.
 */
export class LongLockKeeper {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly lease: MultiLease,
    /** `performance.now()` at which the requested duration is over. */
    private readonly endsAt: number,
    private readonly maxTtlMs: number,
    private readonly retryDelayMs: number,
    private readonly onLost: (error: Error) => void,
  ) {
    this.schedule();
  }

  /** Stops keeping the lease (release, or an extension that replaces this keeper). Idempotent. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(delayMs?: number): void {
    if (this.stopped) return;
    const remaining = this.lease.remainingMs();
    const left = this.endsAt - performance.now();
    if (left <= remaining) {
      // The requested duration ends within the current lease: let it go then.
      this.arm(left, () => {
        this.stopped = true;
        this.lease.release().catch(() => undefined);
      });
      return;
    }
    this.arm(delayMs ?? remaining / 2, () => void this.extend());
  }

  private arm(delayMs: number, run: () => void): void {
    // Timers hold at most 2^31 - 1 ms; a longer wait is re-armed. Unref'd: a held lock never keeps a process
    // alive by itself (redlock's locks do not either).
    const step = Math.min(Math.max(0, delayMs), 2_147_483_647);
    this.timer = setTimeout(() => (step < delayMs ? this.schedule() : run()), step);
    this.timer.unref();
  }

  private async extend(): Promise<void> {
    if (this.stopped) return;
    const left = Math.ceil(this.endsAt - performance.now());
    try {
      // Never below a second (a tiny ttl can leave no validity after drift): the release timer then ends it on time.
      await this.lease.extend(Math.min(this.maxTtlMs, Math.max(1_000, left)));
      this.schedule();
    } catch (error) {
      if (this.stopped) return;
      if (error instanceof QuorumUnavailableError && this.lease.remainingMs() > 0) {
        this.schedule(Math.min(this.retryDelayMs, this.lease.remainingMs() / 2));
        return;
      }
      this.stopped = true;
      this.onLost(error instanceof Error ? error : new LeaseLostError(this.lease.resources[0]!));
    }
  }
}
