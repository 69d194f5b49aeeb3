import { randomUUID } from 'node:crypto';
import type { Request, RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { ServiceMetrics } from './service-metrics.js';

/** Header that carries the request id back to the client (and in from a trusted proxy, when it is sane). */
export const REQUEST_ID_HEADER = 'X-Request-Id';
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;

/**
 * The route pattern that served a request (`/v1/locks/:resource/leases/:leaseId`), never the raw path: the
 * raw path of extend and release carries the lease id, which is a capability and must not reach the logs.
 */
export function routePattern(req: Request): string {
  const route = (req as { route?: { path?: unknown } }).route;
  return typeof route?.path === 'string' ? `${req.baseUrl}${route.path}` : '(unmatched)';
}

/**
 * One log line per request (method, route pattern, status, duration, request id) and the request-duration
 * histogram. Headers, bodies and raw paths are never logged.
 */
export function requestLog(logger: Logger, metrics: ServiceMetrics): RequestHandler {
  return (req, res, next) => {
    const started = performance.now();
    const incoming = req.headers['x-request-id'];
    const requestId =
      typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    res.locals.requestId = requestId;
    res.setHeader(REQUEST_ID_HEADER, requestId);
    res.once('close', () => {
      const durationMs = performance.now() - started;
      const route = routePattern(req);
      const status = res.statusCode;
      const completed = res.writableFinished;
      metrics.requestSeconds.observe(
        { method: req.method, route, status: completed ? String(status) : 'aborted' },
        durationMs / 1000,
      );
      const line = {
        requestId,
        method: req.method,
        route,
        status,
        durationMs: Math.round(durationMs * 100) / 100,
        ...(completed ? {} : { clientAborted: true }),
      };
      if (status >= 500) logger.warn(line, 'request');
      else logger.info(line, 'request');
    });
    next();
  };
}

/**
 * A log-safe view of an unexpected error: type, message, code and stack, following `cause`. Driver errors can
 * carry the command and its arguments (which include lease ids), so no other property is copied.
 */
export function safeError(error: unknown, depth = 0): Record<string, unknown> {
  if (!(error instanceof Error)) return { type: typeof error, message: String(error) };
  const view: Record<string, unknown> = { type: error.name, message: error.message, stack: error.stack };
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' || typeof code === 'number') view.code = code;
  if (error.cause !== undefined && depth < 3) view.cause = safeError(error.cause, depth + 1);
  return view;
}
