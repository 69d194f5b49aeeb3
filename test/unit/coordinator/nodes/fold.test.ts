// The fold pass's pacing (nodes/fold.ts): after each step it waits until its steps have taken at most
// FOLD_TIME_SHARE of its time on that node, never longer than a quarter of the pass interval, and it stops between
// steps when its owner closes. Virtual time: each fake node step advances a clock, and a pause records its length and
// advances the clock by it, so nothing here waits.
import { describe, expect, it } from 'vitest';
import {
  FOLD_BATCH,
  FOLD_TIME_SHARE,
  foldIdleRegisters,
  foldIntervalMs,
  foldPauseMs,
  type FoldNode,
  type FoldPass,
} from '../../../../packages/coordinator/src/nodes/fold.js';
import type { FoldReply } from '../../../../packages/coordinator/src/scripts/script-results.js';

interface Step {
  /** How long the node takes to answer this step, in virtual milliseconds. */
  readonly ms: number;
  readonly reply: FoldReply;
}

interface Rig {
  readonly pass: FoldPass;
  /** Every pause the pass asked for, in order. */
  readonly pauses: number[];
  /** Every call made to a node: its index and the cursor it was given. */
  readonly calls: { node: number; cursor: string }[];
  readonly closing: AbortController;
}

function rig(stepsByNode: readonly (readonly Step[])[], tokenRetentionMs = 40_000): Rig {
  let now = 0;
  const pauses: number[] = [];
  const calls: Rig['calls'] = [];
  const closing = new AbortController();
  const nodes: FoldNode[] = stepsByNode.map((steps, index) => {
    let next = 0;
    return {
      index,
      fold: (_timeoutMs, cursor, count) => {
        expect(count).toBe(FOLD_BATCH);
        calls.push({ node: index, cursor });
        const step = steps[next++];
        if (step === undefined) throw new Error(`node ${index}: no step ${next - 1} scripted`);
        now += step.ms;
        return Promise.resolve(step.reply);
      },
    };
  });
  const pass: FoldPass = {
    nodes,
    isVoting: () => true,
    tokenRetentionMs,
    callTimeoutMs: 1_000,
    signal: closing.signal,
    now: () => now,
    pause: (ms) => {
      pauses.push(ms);
      now += ms;
      return Promise.resolve();
    },
  };
  return { pass, pauses, calls, closing };
}

const folded = (cursor: string, count = 0): FoldReply => ({ kind: 'folded', cursor, folded: count });

describe('foldPauseMs', () => {
  it('keeps the steps at the time share: a step of t ms buys t × (1 − share) / share ms', () => {
    expect(FOLD_TIME_SHARE).toBe(0.1);
    expect(foldPauseMs(1, 20_000)).toBeCloseTo(9, 9);
    expect(foldPauseMs(3.5, 20_000)).toBeCloseTo(31.5, 9);
    // The step's share of step + pause is the time share.
    const step = 7;
    expect(step / (step + foldPauseMs(step, 20_000))).toBeCloseTo(FOLD_TIME_SHARE, 9);
  });

  it('never pauses longer than a quarter of the pass interval, and never less than nothing', () => {
    expect(foldPauseMs(10_000, 20_000)).toBe(5_000);
    expect(foldPauseMs(1_000, 1_000)).toBe(250);
    expect(foldPauseMs(-3, 20_000)).toBe(0);
  });
});

describe('a fold pass, paced', () => {
  it('pauses after every step but the last, by what each step took', async () => {
    const { pass, pauses, calls } = rig([
      [
        { ms: 2, reply: folded('17', 3) },
        { ms: 5, reply: folded('42', 1) },
        { ms: 1, reply: folded('0', 2) },
      ],
    ]);
    expect(await foldIdleRegisters(pass)).toBe(6);
    expect(calls.map((c) => c.cursor)).toEqual(['0', '17', '42']);
    expect(pauses).toEqual([foldPauseMs(2, foldIntervalMs(40_000)), foldPauseMs(5, foldIntervalMs(40_000))]);
    expect(pauses[0]).toBeCloseTo(18, 9);
  });

  it('caps each pause at a quarter of the interval, so the lock a step renews cannot lapse in a pause', async () => {
    // Retention 4 s: passes every 2 s; a step of 1 s would buy 9 s.
    const { pass, pauses } = rig(
      [
        [
          { ms: 1_000, reply: folded('5') },
          { ms: 1, reply: folded('0') },
        ],
      ],
      4_000,
    );
    await foldIdleRegisters(pass);
    expect(pauses).toEqual([500]);
  });

  it('does not pause after a node answers busy, empty or corrupt: that node is done for this pass', async () => {
    const { pass, pauses, calls } = rig([
      [{ ms: 3, reply: { kind: 'busy' } }],
      [{ ms: 3, reply: { kind: 'not-initialized' } }],
      [{ ms: 3, reply: { kind: 'corrupt' } }],
    ]);
    expect(await foldIdleRegisters(pass)).toBe(0);
    expect(calls).toHaveLength(3);
    expect(pauses).toEqual([]);
  });

  it('stops between steps once its owner closes', async () => {
    const { pass, pauses, calls, closing } = rig([
      [
        { ms: 1, reply: folded('8') },
        { ms: 1, reply: folded('9') },
      ],
    ]);
    await foldIdleRegisters({
      ...pass,
      pause: async (ms) => {
        await pass.pause(ms);
        closing.abort();
      },
    });
    expect(calls.map((c) => c.cursor)).toEqual(['0']);
    expect(pauses).toHaveLength(1);
  });
});
