import type { Redis } from 'ioredis';
import { withTimeout, type NodeConnection, type NodeErrorSink } from '../nodes/node-connection.js';
import { quorumOf } from '../quorum/quorum.js';

/** The waiters of one channel, in arrival order, and which of them the latest release was handed to. */
interface ChannelWaiters {
  readonly set: Set<ReleaseSubscription>;
  readonly ready: Promise<unknown>;
  /** The lease id of the latest release heard (each node that releases it publishes it once). */
  announced?: string;
  /** The waiter that release went to. */
  target?: ReleaseSubscription;
}

/**
 * Wakes waiting acquires when a lease is released (DESIGN §2.7): the release script PUBLISHes the released
 * lease id on the resource's channel, and one lazily created subscriber connection per node delivers it.
 * Subscriptions are reference-counted per channel, so a thousand waiters on one resource cost one SUBSCRIBE per
 * node.
 *
 * One release wakes one waiter per process — the one waiting longest — not all of them: only one can win, and
 * waking K waiters for it would send K acquires to every node, K − 1 of them bound to fail (and, racing one
 * another, possibly all of them: a split vote). The other nodes' messages for the same lease go to the same
 * waiter, so an attempt that raced ahead of the release on some nodes retries when they confirm it. A waiter
 * that leaves without the lease (its wait ran out, or another process won) passes the release it was handed to the next. Waiters in other
 * processes are woken by their own process; every waiter keeps its timed fallback.
 *
 * A release of a waiter's own lease id never wakes that waiter: a failed round undoes its partial grants, and the
 * nodes publish that undo like any release. It frees nothing the waiter lacks (the nodes that refused it still
 * refuse), so waking on it only ran another round that failed and undid again — a loop of round trips until the
 * wait ran out (measured: 479 rounds in a 1 s wait on three local nodes, test/integration/coordinator/protocol/
 * waiters.test.ts). It may free what another waiter lacks, so it is handed to the longest-waiting *other* waiter.
 */
export class ReleaseNotifier {
  private readonly subscribers = new Map<number, Redis>();
  private readonly waiters = new Map<string, ChannelWaiters>();
  private closed = false;

  constructor(
    private readonly nodes: readonly NodeConnection[],
    private readonly subscribeTimeoutMs: number,
    private readonly reportError: NodeErrorSink,
  ) {}

  /**
   * Subscribes to a channel on every node. Resolves once `N − quorum + 1` nodes confirmed — any release is
   * published by a majority, so one of them hears it — or after `maxWaitMs` (a node that did not confirm only
   * costs the timed fallback). Release messages published after enough confirmations are not missed.
   */
  async subscribe(channel: string, maxWaitMs: number, leaseId: string): Promise<ReleaseSubscription> {
    const subscription = new ReleaseSubscription(
      (granted) => this.unsubscribe(channel, subscription, granted),
      leaseId,
    );
    let entry = this.waiters.get(channel);
    if (entry === undefined) {
      entry = { set: new Set(), ready: this.closed ? Promise.resolve() : this.subscribeEverywhere(channel) };
      this.waiters.set(channel, entry);
    }
    entry.set.add(subscription);
    // Closed: wake at once, so the caller finds the coordinator closed instead of waiting out its fallback.
    if (this.closed) subscription.notify();
    // Later waiters on the same channel wait for the same confirmations.
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([entry.ready, new Promise((resolve) => (timer = setTimeout(resolve, maxWaitMs)))]);
    clearTimeout(timer);
    return subscription;
  }

  private subscribeEverywhere(channel: string): Promise<void> {
    const needed = Math.min(this.nodes.length, this.nodes.length - quorumOf(this.nodes.length) + 1);
    return new Promise<void>((resolve) => {
      let confirmed = 0;
      let settled = 0;
      for (const node of this.nodes) {
        withTimeout(this.subscriber(node).subscribe(channel), this.subscribeTimeoutMs, 'subscribe')
          .then(
            () => void confirmed++,
            (error: unknown) => this.reportError(node.index, 'subscribe', error),
          )
          .finally(() => {
            settled++;
            if (confirmed >= needed || settled === this.nodes.length) resolve();
          });
      }
    });
  }

  private unsubscribe(channel: string, subscription: ReleaseSubscription, granted: boolean): void {
    const entry = this.waiters.get(channel);
    if (entry === undefined || !entry.set.delete(subscription)) return;
    if (entry.target === subscription) {
      entry.target = undefined;
      if (!granted) this.handOver(entry);
    }
    if (entry.set.size > 0) return;
    this.waiters.delete(channel);
    for (const subscriber of this.subscribers.values()) {
      subscriber.unsubscribe(channel).catch(() => undefined);
    }
  }

  private subscriber(node: NodeConnection): Redis {
    let subscriber = this.subscribers.get(node.index);
    if (subscriber === undefined) {
      // A connection of its own: a subscribed connection can run nothing else. It queues while connecting.
      // After a reconnect it resubscribes here rather than through ioredis' autoResubscribe, whose SUBSCRIBE
      // promise has no handler: a connection that drops again before the reply (a node restarting) would raise
      // an unhandled rejection in the host process. A release published while reconnecting is covered by the
      // waiters' timed fallback.
      subscriber = node.duplicateSubscriber({
        enableAutoPipelining: false,
        enableOfflineQueue: true,
        autoResubscribe: false,
        lazyConnect: false,
      });
      const connection = subscriber;
      let connectedBefore = false;
      connection.on('ready', () => {
        const channels = [...this.waiters.keys()];
        if (connectedBefore && channels.length > 0) {
          connection
            .subscribe(...channels)
            .catch((error: unknown) => this.reportError(node.index, 'subscribe', error));
        }
        connectedBefore = true;
      });
      connection.on('error', (error: unknown) => this.reportError(node.index, 'subscriber', error));
      connection.on('message', (channel: string, message: string) => this.dispatch(channel, message));
      this.subscribers.set(node.index, subscriber);
    }
    return subscriber;
  }

  /**
   * This process is releasing `leaseId` (its release calls are already queued): hands the release at once to
   * the longest-waiting waiter here, whose acquire then reaches every node right behind the release, in the same
   * write (see `NodeConnection`'s flush), instead of a round trip later when the nodes' messages arrive. Those
   * messages then go to the same waiter. A release that turns out not to hold the lease costs that waiter one
   * failed attempt, no more.
   */
  released(channel: string, leaseId: string): void {
    this.dispatch(channel, leaseId);
  }

  private dispatch(channel: string, leaseId: string): void {
    const entry = this.waiters.get(channel);
    if (entry === undefined) return;
    if (entry.announced === leaseId) {
      // Another node confirming the same release: tell the same waiter (a retry if its attempt came too early);
      // nobody, if it has left with the lease.
      entry.target?.notify();
      return;
    }
    entry.announced = leaseId;
    this.handOver(entry);
  }

  /** Gives the latest release to the waiter that has waited longest, unless the released lease is its own. */
  private handOver(entry: ChannelWaiters): void {
    let next: ReleaseSubscription | undefined;
    for (const waiter of entry.set) {
      if (waiter.leaseId !== entry.announced) {
        next = waiter;
        break;
      }
    }
    entry.target = next;
    next?.notify();
  }

  /** Wakes every waiter (they then find the coordinator closed), unsubscribes and disconnects. */
  async close(): Promise<void> {
    this.closed = true;
    for (const { set } of this.waiters.values()) for (const s of set) s.notify();
    this.waiters.clear();
    await Promise.all(
      [...this.subscribers.values()].map((s) =>
        withTimeout(s.quit(), 1_000, 'quit').catch(() => s.disconnect()),
      ),
    );
    this.subscribers.clear();
  }
}

/** One waiter's interest in a channel. A message that arrives while not waiting is kept for the next wait. */
export class ReleaseSubscription {
  private pending = false;
  private wake: (() => void) | undefined;

  /**
   * @param onClose told whether the waiter leaves with a lease (else a release handed to it goes to the next).
   * @param leaseId the lease this waiter is acquiring: its release (the undo of a failed round) is not handed to it.
   */
  constructor(
    private readonly onClose: (granted: boolean) => void,
    readonly leaseId: string,
  ) {}

  notify(): void {
    this.pending = true;
    this.wake?.();
  }

  /**
   * Waits for a release message, at most `timeoutMs` (the timed fallback), or until the caller's `signal`
   * aborts. Resolves `true` when woken by a message. Closing the notifier wakes every waiter (`close()`), so no
   * waiter listens on a signal that outlives it: a listener per waiter on the coordinator's long-lived closing
   * signal was the MaxListenersExceededWarning of more than ten waiters (test: http/many-waiters.test.ts).
   */
  wait(timeoutMs: number, signal: AbortSignal | undefined): Promise<boolean> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve) => {
      const finish = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', finish);
        this.wake = undefined;
        const woken = this.pending;
        this.pending = false;
        resolve(woken);
      };
      const timer = setTimeout(finish, Math.max(0, timeoutMs));
      if (signal?.aborted) queueMicrotask(finish);
      signal?.addEventListener('abort', finish, { once: true });
      this.wake = finish;
    });
  }

  /** Ends the interest; `granted` says whether the waiter got the lease. */
  close(granted: boolean): void {
    this.wake?.();
    this.onClose(granted);
  }
}
