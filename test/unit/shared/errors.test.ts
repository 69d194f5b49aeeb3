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
  ServiceUnreachableError,
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
      new ServiceUnreachableError('down', 'http://127.0.0.1:1', 1),
      new InternalError(),
    ];
    // UNSAFE_NODE and MIGRATION_MISSING have their classes where they are raised: UnsafeNodeError in
    // @fenced/coordinator, MigrationMissingError in @fenced/guarded-store.
    expect([...errors.map((e) => e.code), 'UNSAFE_NODE', 'MIGRATION_MISSING'].sort()).toEqual(
      [...ERROR_CODES].sort(),
    );
    for (const error of errors) {
      expect(error).toBeInstanceOf(Error);
      expect(error.name).toMatch(/Error$/);
      expect(error.toJSON()).toEqual({ error: { code: error.code, message: error.message } });
    }
  });

  it('keeps the facts a caller needs on a stale-token error', () => {
    const error = new StaleTokenError('doc', 3n, 7n);
    expect(error.resource).toBe('doc');
    expect(error.presented).toBe(3n);
    expect(error.current).toBe(7n);
    expect(error.code).toBe(ErrorCode.STALE_TOKEN);
  });

  it('keeps why a proof was refused, without the proof itself', () => {
    const error = new InvalidProofError('doc', 'unknown-key', "signed by key 'old'");
    expect(error).toMatchObject({ code: 'INVALID_PROOF', name: 'InvalidProofError', reason: 'unknown-key' });
    expect(error.resource).toBe('doc');
  });

  it('names the resource and says a lower token lost to a later lease', () => {
    const error = new StaleTokenError('doc:1', 3n, 7n, { namedLease: true });
    expect(error).toBeInstanceOf(StaleTokenError);
    expect(error.message).toBe(
      'stale fencing token for resource "doc:1": presented 3, but the fence is at 7 (a later lease has written): ' +
        'this holder lost the resource and must stop',
    );
  });

  it('says why an equal token from a write that named no lease is refused, and how to name it', () => {
    const error = new StaleTokenError('doc:1', 7n, 7n, { namedLease: false });
    expect(error).toBeInstanceOf(StaleTokenError);
    expect(error.message).toBe(
      'fencing token 7 for resource "doc:1" equals the fence, and this write named no lease: an equal token is ' +
        'accepted only from the lease that set the fence, so every write of a lease must name it (the ' +
        'Fencing-Lease-Id header, or store.run(lease, …) with the lease itself)',
    );
  });

  it('says an equal token from a named lease came from another lease than the fence', () => {
    const error = new StaleTokenError('doc:1', 7n, 7n, { namedLease: true });
    expect(error.message).toMatch(
      /^fencing token 7 for resource "doc:1" equals the fence, which another lease \(or a write naming no lease\) set: /,
    );
    expect(error.message).toContain('Fencing-Lease-Id header');
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
