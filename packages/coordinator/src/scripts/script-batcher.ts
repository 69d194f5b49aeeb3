import { NodeTimeoutError } from '../errors.js';
import {
  interpretReply,
  splitBatchReply,
  type BatchScriptName,
  type ScriptReplies,
} from './script-results.js';

/** The most calls one script invocation carries: bounds how long a node runs one script (and blocks). */
export const MAX_BATCH_SIZE = 128;

/** Sends one batch: the shared keys first, then each call's keys and arguments, in queue order, then the shared arguments. */
export type BatchSender = (keys: string[], args: (string | number)[]) => Promise<unknown>;

interface QueuedCall<R> {
  readonly keys: readonly string[];
  readonly args: readonly (string | number)[];
  readonly resolve: (reply: R) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Combines the calls of one batch script to one node into one EVALSHA: the calls queued during one event-loop
 * turn's I/O callbacks and the promise continuations they set off go out together when the node flushes
 * (`NodeConnection` schedules the flush with `setImmediate`, right after those callbacks, so a lone call waits
 * for nothing but them), at most {@link MAX_BATCH_SIZE} at a time. Each call keeps its own reply and its own failure; the node runs them in
 * queue order, each exactly as if it ran alone, and fsyncs their writes once.
 *
 * Calls with different timeouts go in different batches; each batch has one timer, started when it is sent
 * (a call waits only for the current callback to finish before that, and the caller's clock started before it
 * queued, so validity only ever errs short). A batch that times out or fails fails every call in it: they were one
 * command, so the node answered all of them or none.
 */
export class ScriptBatcher<S extends BatchScriptName> {
  private readonly queues = new Map<number, QueuedCall<ScriptReplies[S]>[]>();

  constructor(
    private readonly script: S,
    /** Keys every invocation starts with (the incarnation key for `acquire`). */
    private readonly sharedKeys: readonly string[],
    private readonly send: BatchSender,
    /** What to name a timeout after, e.g. `node 2 acquire`. */
    private readonly operation: string,
    /** Told of every failure once per batch (a batch failure) or once per call (a malformed item). */
    private readonly reportError: (error: unknown) => void,
    /** Asks for a `flush()` once the current callback is done; called when the first call is queued. */
    private readonly scheduleFlush: () => void,
    /** Arguments every invocation ends with, read when it is sent (the node count for `acquire`). */
    private readonly sharedArgs: () => readonly (string | number)[] = () => [],
  ) {}

  /** Queues one call; resolves with its typed reply. */
  call(
    timeoutMs: number,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<ScriptReplies[S]> {
    return new Promise<ScriptReplies[S]>((resolve, reject) => {
      let queue = this.queues.get(timeoutMs);
      if (queue === undefined) {
        queue = [];
        this.queues.set(timeoutMs, queue);
      }
      queue.push({ keys, args, resolve, reject });
      if (queue.length >= MAX_BATCH_SIZE) {
        this.queues.delete(timeoutMs);
        this.dispatch(timeoutMs, queue);
      } else if (queue.length === 1) {
        this.scheduleFlush();
      }
    });
  }

  /** Whether calls are queued and not yet sent. */
  get pending(): boolean {
    return this.queues.size > 0;
  }

  /** Sends every queued call. */
  flush(): void {
    if (this.queues.size === 0) return;
    const queues = [...this.queues];
    this.queues.clear();
    for (const [timeoutMs, queue] of queues) this.dispatch(timeoutMs, queue);
  }

  private dispatch(timeoutMs: number, calls: readonly QueuedCall<ScriptReplies[S]>[]): void {
    const keys = [...this.sharedKeys];
    const args: (string | number)[] = [];
    for (const call of calls) {
      for (const key of call.keys) keys.push(key);
      for (const arg of call.args) args.push(arg);
    }
    for (const arg of this.sharedArgs()) args.push(arg);
    let done = false;
    const failAll = (error: unknown): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      this.reportError(error);
      for (const call of calls) call.reject(error);
    };
    const timer = setTimeout(() => failAll(new NodeTimeoutError(this.operation, timeoutMs)), timeoutMs);
    timer.unref?.();
    this.send(keys, args).then(
      (reply) => {
        if (done) return;
        let items: readonly unknown[];
        try {
          items = splitBatchReply(this.script, reply, calls.length);
        } catch (error) {
          failAll(error);
          return;
        }
        done = true;
        clearTimeout(timer);
        calls.forEach((call, index) => {
          try {
            call.resolve(interpretReply(this.script, items[index]));
          } catch (error) {
            this.reportError(error);
            call.reject(error);
          }
        });
      },
      (error: unknown) => failAll(error instanceof Error ? error : new Error(String(error))),
    );
  }
}
