import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Level, Logger } from 'pino';
import type { ServiceMetrics } from './service-metrics.js';

/** Header that carries the request id back to the client (and in from a trusted proxy, when it is sane). */
export const REQUEST_ID_HEADER = 'X-Request-Id';
const SANE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,64}$/;
const UNMATCHED = '(unmatched)';

/** Request ids of this process: a random prefix (telling replicas and restarts apart) and a sequence number. */
const REQUEST_ID_PREFIX = randomBytes(9).toString('base64url');
let requestSequence = 0;

/**
 * fastify's `genReqId`: the caller's `X-Request-Id` when it is sane, else the next id of this process (a
 * counter costs nothing per request, where a random UUID each time was measurable).
 */
export function requestId(req: IncomingMessage): string {
  const incoming = req.headers['x-request-id'];
  if (typeof incoming === 'string' && SANE_REQUEST_ID.test(incoming)) return incoming;
  requestSequence += 1;
  return `${REQUEST_ID_PREFIX}-${requestSequence.toString(36)}`;
}

/**
 * The route pattern that served a request (`/v1/locks/:resource/leases/:leaseId`), never the raw path: the
 * raw path of extend and release carries the lease id, which is a capability and must not reach the logs.
 * A request refused by authentication (401) counts as unmatched: it is refused before its route runs, and an
 * unauthenticated caller must not learn, or spread across metric series, which routes exist.
 */
export function routePattern(request: FastifyRequest, status: number): string {
  return status === 401 ? UNMATCHED : (request.routeOptions.url ?? UNMATCHED);
}

/**
 * The access log and the request-duration histogram. One line per request: method, route pattern, status,
 * duration and request id; headers, bodies and raw paths are never logged. A success (status below 400) is
 * logged at `successLevel` and, when that level is off, costs no more than a level check; client errors are
 * logged at `info`, server errors at `warn`.
 */
export class RequestLog {
  constructor(
    private readonly logger: Logger,
    private readonly metrics: ServiceMetrics,
    private readonly successLevel: Level | 'silent',
  ) {}

  /** fastify `onResponse` hook: the response went out in full. */
  readonly onResponse = (request: FastifyRequest, reply: FastifyReply, done: () => void): void => {
    this.record(request, reply.statusCode, reply.elapsedTime, false);
    done();
  };

  /** A request whose client went away before its response (a waiting acquire): no `onResponse` follows. */
  aborted(request: FastifyRequest, reply: FastifyReply): void {
    this.record(request, reply.statusCode, reply.elapsedTime, true);
  }

  private record(request: FastifyRequest, status: number, durationMs: number, aborted: boolean): void {
    const route = routePattern(request, status);
    this.metrics.requestSeconds.observe(
      { method: request.method, route, status: aborted ? 'aborted' : String(status) },
      durationMs / 1000,
    );
    const level: Level | 'silent' =
      status >= 500 ? 'warn' : status >= 400 || aborted ? 'info' : this.successLevel;
    if (level === 'silent' || !this.logger.isLevelEnabled(level)) return;
    this.logger[level](
      {
        requestId: request.id,
        method: request.method,
        route,
        status,
        durationMs: Math.round(durationMs * 100) / 100,
        ...(aborted ? { clientAborted: true } : {}),
      },
      'request',
    );
  }
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
