import { describe, expect, it } from 'vitest';
import { MalformedReplyError, NodeCallError, NodeTimeoutError } from '@fenced/coordinator';
import { MAX_BATCH_SIZE, ScriptBatcher } from '../../../packages/coordinator/src/scripts/script-batcher.js';
import { newLeaseId } from '../../../packages/coordinator/src/lease/lease-ids.js';

/** A sender that records each batch and answers it as told (no Redis: this is the batching logic alone). */
function recordingSender(answer: (keys: string[], args: (string | number)[]) => Promise<unknown>) {
  const batches: Array<{ keys: string[]; args: (string | number)[] }> = [];
  const send = (keys: string[], args: (string | number)[]) => {
    batches.push({ keys, args });
    return answer(keys, args);
  };
  return { batches, send };
}

/** A batcher flushed the way NodeConnection does it: once per event-loop turn. */
function batcherOf<S extends 'acquire' | 'release'>(
  script: S,
  sharedKeys: string[],
  send: (keys: string[], args: (string | number)[]) => Promise<unknown>,
  operation: string,
  reportError: (error: unknown) => void,
): ScriptBatcher<S> {
  const batcher: ScriptBatcher<S> = new ScriptBatcher(script, sharedKeys, send, operation, reportError, () =>
    setImmediate(() => batcher.flush()),
  );
  return batcher;
}

const releaseReplies = (args: (string | number)[]) => args.filter((_, i) => i % 2 === 0).map(() => [1]);

describe('ScriptBatcher', () => {
  it('sends every call of one event-loop turn as one batch, in order, and gives each call its own reply', async () => {
    const { batches, send } = recordingSender((keys) =>
      Promise.resolve(keys.map((k) => (k.endsWith('held') ? [2] : [1]))),
    );
    const errors: unknown[] = [];
    const batcher = batcherOf('release', [], send, 'node 0 release', (e) => errors.push(e));
    const replies = await Promise.all([
      batcher.call(100, ['a'], ['id-a', 'ch-a']),
      batcher.call(100, ['b-held'], ['id-b', 'ch-b']),
      batcher.call(100, ['c'], ['id-c', 'ch-c']),
    ]);
    expect(batches).toEqual([
      { keys: ['a', 'b-held', 'c'], args: ['id-a', 'ch-a', 'id-b', 'ch-b', 'id-c', 'ch-c'] },
    ]);
    expect(replies).toEqual([{ kind: 'released' }, { kind: 'not-held' }, { kind: 'released' }]);
    expect(errors).toEqual([]);
  });

  it('puts the shared keys first, groups calls by timeout, and splits at the maximum batch size', async () => {
    const { batches, send } = recordingSender((_keys, args) =>
      Promise.resolve(args.filter((_, i) => i % 3 === 0).map(() => [1, 1])),
    );
    const batcher = batcherOf('acquire', ['inc'], send, 'node 0 acquire', () => undefined);
    const calls = Array.from({ length: MAX_BATCH_SIZE + 1 }, (_, i) =>
      batcher.call(100, [`l${i}`, `t${i}`], [`id${i}`, 1000, '5']),
    );
    calls.push(batcher.call(50, ['short', 'short-t'], ['id-short', 60, '5']));
    await Promise.all(calls);
    expect(batches.map((b) => (b.keys.length - 1) / 2).sort((a, b) => a - b)).toEqual([1, 1, MAX_BATCH_SIZE]);
    for (const batch of batches) expect(batch.keys[0]).toBe('inc');
  });

  it('fails every call of a batch that times out, once, with a NodeTimeoutError', async () => {
    const { send } = recordingSender(() => new Promise(() => undefined));
    const errors: unknown[] = [];
    const batcher = batcherOf('release', [], send, 'node 3 release', (e) => errors.push(e));
    const results = await Promise.allSettled([
      batcher.call(20, ['a'], ['x', 'y']),
      batcher.call(20, ['b'], ['x', 'y']),
    ]);
    for (const r of results) expect((r as PromiseRejectedResult).reason).toBeInstanceOf(NodeTimeoutError);
    expect(errors).toHaveLength(1);
    expect((errors[0] as Error).message).toMatch(/node 3 release/);
  });

  it('fails every call when the node errs or the batch reply has the wrong shape', async () => {
    for (const answer of [
      () => Promise.reject(new Error('connection reset')),
      () => Promise.resolve([[1]]), // one reply for two calls
      () => Promise.resolve('OK'),
    ]) {
      const batcher = batcherOf('release', [], recordingSender(answer).send, 'r', () => undefined);
      const results = await Promise.allSettled([
        batcher.call(100, ['a'], ['x', 'y']),
        batcher.call(100, ['b'], ['x', 'y']),
      ]);
      expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    }
    const batcher = batcherOf(
      'release',
      [],
      recordingSender(() => Promise.resolve([[1]])).send,
      'r',
      () => undefined,
    );
    const [a, b] = await Promise.allSettled([
      batcher.call(100, ['a'], ['x', 'y']),
      batcher.call(100, ['b'], ['x', 'y']),
    ]);
    expect((a as PromiseRejectedResult).reason).toBeInstanceOf(MalformedReplyError);
    expect(b.status).toBe('rejected');
  });

  it('fails only the call whose own reply is an error or malformed', async () => {
    const { send } = recordingSender((_keys, args) => {
      const replies: unknown[] = releaseReplies(args);
      replies[1] = [7, 'WRONGTYPE Operation against a key holding the wrong kind of value'];
      replies[2] = [9];
      return Promise.resolve(replies);
    });
    const errors: unknown[] = [];
    const batcher = batcherOf('release', [], send, 'r', (e) => errors.push(e));
    const results = await Promise.allSettled(
      ['a', 'b', 'c', 'd'].map((k) => batcher.call(100, [k], ['x', 'y'])),
    );
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(NodeCallError);
    expect((results[2] as PromiseRejectedResult).reason).toBeInstanceOf(MalformedReplyError);
    expect(errors).toHaveLength(2);
  });
});

describe('newLeaseId', () => {
  it('gives 22 base64url characters (128 random bits), never the same twice, never a "|"', () => {
    const ids = Array.from({ length: 5_000 }, newLeaseId);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
