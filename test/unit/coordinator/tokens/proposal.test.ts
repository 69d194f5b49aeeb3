import { describe, expect, it } from 'vitest';
import { MAX_TOKEN } from '@fenced/shared';
import { TokenProposer } from '../../../../packages/coordinator/src/tokens/proposal.js';

describe('token proposals', () => {
  it('proposes at least the time floor, above everything seen and proposed', () => {
    const proposer = new TokenProposer(() => 1_000);
    const floor = 1_000n << 20n;
    expect(proposer.firstProposal('r')).toBe(floor);
    expect(proposer.firstProposal('r')).toBe(floor + 1n);
    proposer.observe('r', floor + 100n);
    expect(proposer.firstProposal('r')).toBe(floor + 101n);
    expect(proposer.firstProposal('other')).toBe(floor);
  });

  it('proposes above the refused value and every register seen', () => {
    const proposer = new TokenProposer(() => 0);
    proposer.observe('r', 50n);
    expect(proposer.nextAbove('r', 10n)).toBe(51n);
    expect(proposer.nextAbove('r', 80n)).toBe(81n);
  });

  it('never proposes above 2^63 - 1, and exhaustion of one resource leaves the others alone', () => {
    const proposer = new TokenProposer(() => 0);
    proposer.observe('full', MAX_TOKEN - 1n);
    expect(proposer.firstProposal('full')).toBe(MAX_TOKEN);
    expect(proposer.firstProposal('full')).toBeNull();
    expect(proposer.nextAbove('full', MAX_TOKEN)).toBeNull();
    expect(proposer.firstProposal('other')).toBe(1n);
  });

  it('ignores a time floor beyond 64 bits', () => {
    const proposer = new TokenProposer(() => 2 ** 45);
    expect(proposer.firstProposal('r')).toBe(1n);
  });

  it('remembers the resources used most recently and forgets the long unused ones, within a bounded memory', () => {
    const proposer = new TokenProposer(() => 0);
    proposer.observe('kept', 41n);
    proposer.observe('dropped', 7n);
    for (let i = 0; i < 20_000; i++) {
      proposer.observe(`r${i}`, 1n);
      // Used again and again: it never goes stale, however many other resources pass.
      if (i % 1_000 === 0) proposer.observe('kept', 41n);
    }
    expect(proposer.lastSeen('kept')).toBe(41n);
    expect(proposer.lastSeen('r19999')).toBe(1n);
    // Forgotten: its next proposal starts from the time floor again (a second round at worst, never a lower token
    // accepted: the nodes refuse it).
    expect(proposer.lastSeen('dropped')).toBe(0n);
    expect(proposer.lastSeen('r0')).toBe(0n);
  });
});
