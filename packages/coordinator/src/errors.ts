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
  constructor(
    operation: string,
    readonly timeoutMs: number,
  ) {
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

/** One node that failed the start-up checks (DESIGN §3): which, where, and which settings are wrong. */
export interface UnsafeNode {
  readonly node: number;
  /** host:port, never credentials. */
  readonly address: string;
  readonly problems: readonly string[];
}

/**
 * A node fails the start-up checks (`appendonly yes`, `appendfsync always`, `maxmemory-policy noeviction`, a
 * master): it could lose or evict token registers, which breaks G2. `ready()` and the service's start-up refuse to
 * run with it; the node does not vote. Fix its configuration, or set `unsafeAllowUnsafeNodes` for development.
 */
export class UnsafeNodeError extends FencedError {
  override readonly name = 'UnsafeNodeError';
  constructor(readonly nodes: readonly UnsafeNode[]) {
    super(
      ErrorCode.UNSAFE_NODE,
      `refusing ${nodes.length === 1 ? 'a node' : `${nodes.length} nodes`} that could lose fencing tokens: ` +
        nodes.map((n) => `node ${n.node} (${n.address}): ${n.problems.join('; ')}`).join('; ') +
        ' — fix the configuration (see the README, "What the promises need from your servers"), or set ' +
        'unsafeAllowUnsafeNodes for development only',
    );
  }
}

/** The coordinator was closed: it grants, extends and releases nothing more. Create a new one. */
export class CoordinatorClosedError extends FencedError {
  override readonly name = 'CoordinatorClosedError';
  constructor() {
    super(ErrorCode.QUORUM_UNAVAILABLE, 'the coordinator is closed: create a new Coordinator to go on');
  }
}
