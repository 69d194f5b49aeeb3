// votingCalls (nodes/protocol-node.ts) is where "a node that may not vote is not asked" is kept: every fan-out of the
// protocol (acquire, promise, extend) builds its calls through it, and fanOut counts a `null` as a vote against.
import { describe, expect, it } from 'vitest';
import { votingCalls, type ProtocolNode } from '../../../../packages/coordinator/src/nodes/protocol-node.js';

/** Nodes that only carry their index: votingCalls never calls a node method itself. */
const nodes = [0, 1, 2, 3, 4].map(
  (index) => ({ index, address: `127.0.0.1:${7000 + index}` }) as ProtocolNode,
);

describe('votingCalls', () => {
  it('has one entry per node in node order, null for each node that may not vote', async () => {
    const asked: number[] = [];
    const calls = votingCalls({ nodes, isVoting: (i) => i !== 1 && i !== 3 }, (node) => {
      asked.push(node.index);
      return Promise.resolve(node.index * 10);
    });
    expect(calls.map((call) => call === null)).toEqual([false, true, false, true, false]);
    // Nothing is sent while the calls are built: fanOut starts them.
    expect(asked).toEqual([]);
    expect(await Promise.all(calls.map((call) => call?.() ?? Promise.resolve(undefined)))).toEqual([
      0,
      undefined,
      20,
      undefined,
      40,
    ]);
    expect(asked).toEqual([0, 2, 4]);
  });

  it('reads whether a node votes when the calls are built, not when they are sent', async () => {
    let voting = new Set([0, 1, 2, 3, 4]);
    const calls = votingCalls({ nodes, isVoting: (i) => voting.has(i) }, (node) =>
      Promise.resolve(node.index),
    );
    voting = new Set();
    expect(await Promise.all(calls.map((call) => call?.() ?? Promise.resolve(undefined)))).toEqual([
      0, 1, 2, 3, 4,
    ]);
  });
});
