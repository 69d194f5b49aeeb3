import { createHash, timingSafeEqual } from 'node:crypto';
import { UnauthorizedError } from '@fenced/shared';
import type { RequestHandler } from 'express';

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

  /** Express middleware: 401 UNAUTHORIZED unless `Authorization: Bearer <key>` carries a configured key. */
  middleware(): RequestHandler {
    return (req, res, next) => {
      if (!this.enabled) {
        next();
        return;
      }
      const header = req.headers.authorization;
      const key = header === undefined ? undefined : BEARER.exec(header)?.[1];
      if (key !== undefined && this.matches(key)) {
        next();
        return;
      }
      res.setHeader('WWW-Authenticate', 'Bearer realm="fenced"');
      next(new UnauthorizedError());
    };
  }
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}
