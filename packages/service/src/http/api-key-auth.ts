import { createHash, timingSafeEqual } from 'node:crypto';
import { UnauthorizedError } from '@fenced/shared';
import type { FastifyReply, FastifyRequest } from 'fastify';

const BEARER = /^Bearer[ ]+([^\s]+)[ ]*$/i;

/**
 * Checks presented API keys against the configured ones in constant time: both sides are hashed to 32 bytes
 * first (so neither the length nor a matching prefix of a key leaks through timing), and every configured
 * key is compared, without stopping at the first match.
 */
export class ApiKeyCheck {
  private readonly digests: readonly Buffer[];

  constructor(keys: readonly string[]) {
    this.digests = keys.map(digest);
  }

  get enabled(): boolean {
    return this.digests.length > 0;
  }

  matches(presented: string): boolean {
    const candidate = digest(presented);
    let ok = false;
    for (const known of this.digests) ok = timingSafeEqual(candidate, known) || ok;
    return ok;
  }

  /** Whether `Authorization: Bearer <key>` carries a configured key (always, when no keys are configured). */
  authorized(authorization: string | undefined): boolean {
    if (!this.enabled) return true;
    const key = authorization === undefined ? undefined : BEARER.exec(authorization)?.[1];
    return key !== undefined && this.matches(key);
  }

  /**
   * fastify `onRequest` hook: 401 UNAUTHORIZED unless the request carries a configured key. It runs before the
   * body is read, so an unauthenticated caller cannot make the service buffer a body.
   */
  readonly onRequest = (
    request: FastifyRequest,
    reply: FastifyReply,
    done: (error?: Error) => void,
  ): void => {
    if (this.authorized(request.headers.authorization)) {
      done();
      return;
    }
    done(unauthorized(reply));
  };
}

/** The 401 error, with the `WWW-Authenticate` challenge set on `reply`. */
export function unauthorized(reply: FastifyReply): UnauthorizedError {
  void reply.header('WWW-Authenticate', 'Bearer realm="fenced"');
  return new UnauthorizedError();
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}
