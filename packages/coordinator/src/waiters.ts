import type { Redis } from 'ioredis';
import { withTimeout, type NodeConnection, type NodeErrorSink } from './nodes/node-connection.js';
import { quorumOf } from './redlock/quorum.js';

/**
 * Wakes waiting acquires when a lease is released (DESIGN §2.7): the release script PUBLISHes on the
 * resource's channel, and one lazily created subscriber connection per node delivers it. Subscriptions are
 * reference-counted per channel, so a thousand waiters on one resource cost one SUBSCRIBE per node.
 */
export class ReleaseNotifier {
  private readonly subscribers = new Map<number, Redis>();
  private readonly waiters = new Map<string, { set: Set<ReleaseSubscription>; ready: Promise<unknown> }>();
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
  async subscribe(channel: string, maxWaitMs: number): Promise<ReleaseSubscription> {
    const subscription = new ReleaseSubscription(() => this.unsubscribe(channel, subscription));
    let entry = this.waiters.get(channel);
    if (entry === undefined) {
      entry = { set: new Set(), ready: this.closed ? Promise.resolve() : this.subscribeEverywhere(channel) };
      this.waiters.set(channel, entry);
    }
    entry.set.add(subscription);
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

  private unsubscribe(channel: string, subscription: ReleaseSubscription): void {
    const set = this.waiters.get(channel)?.set;
    if (set === undefined || !set.delete(subscription) || set.size > 0) return;
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
      subscriber = node.client.duplicate({
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
      connection.on('message', (channel: string) => this.dispatch(channel));
      this.subscribers.set(node.index, subscriber);
    }
    return subscriber;
  }

  private dispatch(channel: string): void {
    for (const subscription of this.waiters.get(channel)?.set ?? []) subscription.notify();
  }

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

  constructor(private readonly onClose: () => void) {}

  notify(): void {
    this.pending = true;
    this.wake?.();
  }

  /**
   * Waits for a release message, at most `timeoutMs` (the timed fallback), or until any signal aborts.
   * Resolves `true` when woken by a message.
   */
  wait(timeoutMs: number, ...signals: (AbortSignal | undefined)[]): Promise<boolean> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve) => {
      const finish = (): void => {
        clearTimeout(timer);
        for (const signal of signals) signal?.removeEventListener('abort', finish);
        this.wake = undefined;
        const woken = this.pending;
        this.pending = false;
        resolve(woken);
      };
      const timer = setTimeout(finish, Math.max(0, timeoutMs));
      for (const signal of signals) {
        if (signal?.aborted) queueMicrotask(finish);
        signal?.addEventListener('abort', finish, { once: true });
      }
      this.wake = finish;
    });
  }

  close(): void {
    this.wake?.();
    this.onClose();
  }
}
