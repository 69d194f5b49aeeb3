import { describe, expect, it } from 'vitest';
import {
  fanOut,
  maxAgainst,
  quorumOf,
  VoteTally,
} from '../../../../packages/coordinator/src/quorum/quorum.js';

const never = (): Promise<boolean> => new Promise(() => undefined);
const vote = (value: boolean) => (): Promise<boolean> => Promise.resolve(value);
const fail = (): Promise<boolean> => Promise.reject(new Error('down'));

describe('quorum arithmetic', () => {
  it('is a strict majority: floor(N/2) + 1', () => {
    expect([1, 2, 3, 4, 5, 6, 7].map(quorumOf)).toEqual([1, 2, 2, 3, 3, 4, 4]);
  });

  it('makes any two majorities share a node', () => {
    for (let n = 1; n <= 15; n++) expect(2 * quorumOf(n)).toBeGreaterThan(n);
  });

  it('tolerates N - quorum votes against and no more', () => {
    expect([1, 2, 3, 4, 5].map(maxAgainst)).toEqual([0, 0, 1, 1, 2]);
  });

  it('decides an even split as lost instead of waiting', () => {
    const tally = new VoteTally(4);
    tally.recordFor();
    tally.recordFor();
    expect(tally.recordAgainst()).toBe('open');
    expect(tally.recordAgainst()).toBe('lost');
  });

  it('wins at quorum', () => {
    const tally = new VoteTally(5);
    tally.recordAgainst();
    tally.recordFor();
    tally.recordFor();
    expect(tally.outcome).toBe('open');
    expect(tally.recordFor()).toBe('won');
  });
});

describe('fanOut', () => {
  it('wins without waiting for hung nodes', async () => {
    const result = await fanOut([vote(true), never, vote(true), never, vote(true)], (v) => v);
    expect(result.outcome).toBe('won');
    expect(result.indeterminate).toBe(true);
    expect(result.replies.map((r) => r.state)).toEqual(['ok', 'pending', 'ok', 'pending', 'ok']);
  });

  it('loses as soon as a majority is out of reach, counting errors and non-voters against', async () => {
    const result = await fanOut([vote(true), fail, null, vote(false), never], (v) => v);
    expect(result.outcome).toBe('lost');
    expect(result.indeterminate).toBe(true);
  });

  it('is determinate when every node replied', async () => {
    const result = await fanOut([vote(false), vote(true), vote(true)], (v) => v);
    expect(result.outcome).toBe('won');
    expect(result.indeterminate).toBe(false);
  });

  it('loses with no nodes at all', async () => {
    expect((await fanOut<boolean>([], (v) => v)).outcome).toBe('lost');
  });

  it('reports every final reply once all calls finish, after deciding early', async () => {
    let answerLate: (value: boolean) => void = () => undefined;
    const late = () => new Promise<boolean>((resolve) => (answerLate = resolve));
    const result = await fanOut([vote(false), vote(false), late], (v) => v);
    expect(result.outcome).toBe('lost');
    expect(result.replies[2]).toEqual({ state: 'pending' });
    answerLate(true);
    const settled = await result.settled;
    expect(settled[2]).toEqual({ state: 'ok', value: true });
  });
});
