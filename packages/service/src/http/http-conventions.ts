import { InvalidRequestError } from '@fenced/shared';

/**
 * A request the service refuses before any route runs, with the HTTP status the convention gives it (404 for
 * a path no route serves, 405 for a method the path does not serve, 413 for a body over the limit, 415 for a
 * body that is not `application/json` in UTF-8 without content encoding). Its code stays `INVALID_REQUEST`: the
 * one code of a request the caller must change, whatever the status (the client maps it to
 * `InvalidRequestError`); the status says which convention it broke. The body is the usual
 * `{ "error": { "code", "message" } }`.
 */
export class RefusedRequestError extends InvalidRequestError {
  constructor(
    readonly status: 404 | 405 | 413 | 415,
    message: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }
}

/** 404: no route serves this path, with any method. The message does not echo the path (it may carry a lease id). */
export function notFound(method: string): RefusedRequestError {
  return new RefusedRequestError(
    404,
    `no endpoint ${method} for this path; the endpoints are listed in GET /openapi.json`,
  );
}

/** 405: the path is served, but not with `method`; `Allow` lists the methods it is served with. */
export function methodNotAllowed(method: string, allowed: readonly string[]): RefusedRequestError {
  const allow = allowed.join(', ');
  return new RefusedRequestError(405, `method ${method} is not allowed on this path; allowed: ${allow}`, {
    Allow: allow,
  });
}

/** 413: the body is larger than the service accepts. */
export function bodyTooLarge(bodyLimitBytes: number): RefusedRequestError {
  return new RefusedRequestError(
    413,
    `request body is too large: at most ${bodyLimitBytes} bytes are accepted`,
  );
}

/** 415: the body is not UTF-8 JSON sent as `Content-Type: application/json` without content encoding. */
export function unsupportedMediaType(what: string): RefusedRequestError {
  return new RefusedRequestError(
    415,
    `${what}: send a JSON object as UTF-8 with Content-Type: application/json and no Content-Encoding`,
  );
}

/**
 * The routes' paths and methods, to tell a path no route serves (404) from a method a path is not served with
 * (405), and both from a path whose parameter is empty (`/v1/locks//leases`: a bad resource name, 400). Fed by
 * fastify's `onRoute` hook, so it lists exactly the registered routes (with the HEAD routes fastify adds).
 */
export class RouteTable {
  private readonly routes: { pattern: RegExp; method: string }[] = [];

  /** Records a route: `url` is its fastify pattern (`/v1/locks/:resource`). */
  add(method: string | readonly string[], url: string): void {
    // A parameter matches any segment, the empty one too (then the route's validation names the parameter).
    const source = url
      .split('/')
      .map((segment) => (segment.startsWith(':') ? '[^/]*' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('/');
    const pattern = new RegExp(`^${source}/?$`);
    for (const m of typeof method === 'string' ? [method] : method) this.routes.push({ pattern, method: m });
  }

  /** The methods the path of `url` (query string ignored) is served with, in registration order. */
  methodsOf(url: string): string[] {
    const end = url.search(/[?#]/);
    const path = end === -1 ? url : url.slice(0, end);
    const methods = this.routes.filter((route) => route.pattern.test(path)).map((route) => route.method);
    return [...new Set(methods)];
  }
}
