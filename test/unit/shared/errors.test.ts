import { describe, expect, it } from 'vitest';
import type { FencedError } from '@fenced/shared';
import {
  ERROR_CODES,
  ErrorCode,
  InternalError,
  InvalidProofError,
  InvalidRequestError,
  LeaseLostError,
  LockedError,
  MissingTokenError,
  QuorumUnavailableError,
  StaleTokenError,
  UnauthorizedError,
  isErrorCode,
} from '@fenced/shared';

describe('errors', () => {
  it('has one class per code, each with a name, a code and the wire body', () => {
    const errors: FencedError[] = [
      new InvalidRequestError('bad'),
      new UnauthorizedError(),
      new LockedError('r'),
      new QuorumUnavailableError('down'),
      new LeaseLostError('r'),
      new StaleTokenError('r', 3n, 7n),
      new MissingTokenError(),
      new InvalidProofError('r', 'missing', 'no proof'),
      new InternalError(),
    ];
    expect(errors.map((e) => e.code).sort()).toEqual([...ERROR_CODES].sort());
    for (const error of errors) {
      expect(error).toBeInstanceOf(Error);
      expect(error.name).toMatch(/Error$/);
      expect(error.toJSON()).toEqual({ error: { code: error.code, message: error.message } });
    }
  });

  it('keeps the facts a caller needs on a stale-token error', () => {
    const error = new StaleTokenError('doc', 3n, 7n);
    expect(error.presented).toBe(3n);
    expect(error.current).toBe(7n);
    expect(error.message).toContain('presented 3');
    expect(error.code).toBe(ErrorCode.STALE_TOKEN);
  });

  it('keeps why a proof was refused, without the proof itself', () => {
    const error = new InvalidProofError('doc', 'unknown-key', "signed by key 'old'");
    expect(error).toMatchObject({ code: 'INVALID_PROOF', name: 'InvalidProofError', reason: 'unknown-key' });
    expect(error.resource).toBe('doc');
  });

  it('keeps the cause', () => {
    const cause = new Error('driver');
    expect(new InternalError('x', { cause }).cause).toBe(cause);
  });

  it('recognises codes', () => {
    expect(isErrorCode('LOCKED')).toBe(true);
    expect(isErrorCode('NOPE')).toBe(false);
  });
});
