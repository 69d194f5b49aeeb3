import { ErrorCode, FencedError } from '@fenced/shared';

/** A node answered a script with something outside the script's contract. The node's vote counts against. */
export class MalformedReplyError extends FencedError {
  override readonly name = 'MalformedReplyError';
  constructor(
    readonly script: string,
    readonly reply: unknown,
    detail: string,
  ) {
    super(ErrorCode.INTERNAL, `malformed reply from the ${script} script: ${detail}`);
  }
}

/**
 * A node answered one call of a batch with a Redis error (a key of the wrong type, out of memory, ...): that
 * call failed on that node and its vote counts against; the other calls of the batch are unaffected.
 */
export class NodeCallError extends FencedError {
  override readonly name = 'NodeCallError';
  constructor(
    readonly script: string,
    readonly redisError: string,
  ) {
    super(ErrorCode.QUORUM_UNAVAILABLE, `the ${script} script failed on this node: ${redisError}`);
  }
}

/** A node did not answer within `nodeTimeoutMs`. Its vote counts against; the call may still take effect. */
export class NodeTimeoutError extends FencedError {
  override readonly name = 'NodeTimeoutError';
  constructor(operation: string, timeoutMs: number) {
    super(ErrorCode.QUORUM_UNAVAILABLE, `${operation} got no reply within ${timeoutMs} ms`);
  }
}

/** Tokens are 64-bit (≤ 2^63 − 1); a register at the top leaves nothing to propose for this resource. */
export class TokenExhaustedError extends FencedError {
  override readonly name = 'TokenExhaustedError';
  constructor(readonly resource: string) {
    super(
      ErrorCode.INTERNAL,
      'fencing tokens for this resource are exhausted: a token register has reached 2^63-1, so no larger token can be granted',
    );
  }
}
