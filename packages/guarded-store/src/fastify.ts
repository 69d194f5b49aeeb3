// `@fenced/guarded-store/fastify`: guarded writes for fastify, beside the express middleware and answering
// exactly as it does (DESIGN §5): the same headers (Fencing-Token, Fencing-Lease-Id, Fencing-Proof,
// Idempotency-Key), the same status codes (428, 400, 403, 409, 503) and error bodies.
import { FencedError, InternalError, isFencedError, toHttpError } from '@fenced/shared';
import type {
  FastifyError,
  FastifyPluginAsync,
  FastifyReply,
  FastifyRequest,
  preHandlerAsyncHookHandler,
} from 'fastify';
import type { GuardedStore } from './guarded-store.js';
import type { FencedErrorHandlerOptions } from './middleware/fenced-error-handler.js';
import { isForeignHttpError } from './middleware/fenced-error-handler.js';
import { guardedWriteFor, type GuardedWrite } from './middleware/fenced-writes.js';
import { storeHttpError } from './middleware/http-errors.js';

export type { GuardedWrite } from './middleware/fenced-writes.js';
export type { FencedErrorHandlerOptions } from './middleware/fenced-error-handler.js';

/**
 * Options of {@link fencedPlugin}: {@link FastifyFencedWritesOptions} for a store over any database type (a
 * plugin's options are not generic), and the error handler's.
 */
export interface FencedPluginOptions extends FencedErrorHandlerOptions {
  /** The store the guarded writes run in. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a GuardedStore<DB> of any DB (invariant in DB)
  store: GuardedStore<any>;
  /** The resource the request writes. */
  resource: (request: FastifyRequest) => string;
}

/** Options of {@link fencedWrites}. */
export interface FastifyFencedWritesOptions<DB> {
  store: GuardedStore<DB>;
  /** The resource the request writes, e.g. `(req) => \`document:${(req.params as { id: string }).id}\``. */
  resource: (request: FastifyRequest) => string;
}

const writes = new WeakMap<FastifyRequest, GuardedWrite<unknown>>();

/**
 * A `preHandler` for a guarded route: reads the fencing headers and answers by itself, before the handler runs
 * and so before anything is written: 428 MISSING_TOKEN without `Fencing-Token`, 400 INVALID_REQUEST for a
 * malformed or repeated header or a bad resource, 403 INVALID_PROOF (with `verifyKeys`) for a missing or invalid
 * proof. Otherwise the handler gets its {@link GuardedWrite} from `guardedWrite(request)`, and a stale token in
 * its `run` becomes 409 STALE_TOKEN through {@link fencedErrorHandler}.
 *
 * @example
 * ```ts
 * app.setErrorHandler(fencedErrorHandler());
 * app.put('/documents/:id', { preHandler: fencedWrites({ store, resource }) }, async (request) =>
 *   guardedWrite<Database>(request).run((trx) => …),
 * );
 * ```
 */
export function fencedWrites<DB>(options: FastifyFencedWritesOptions<DB>): preHandlerAsyncHookHandler {
  const { store, resource } = options;
  return async function fencedWritesPreHandler(request, reply) {
    try {
      const write = guardedWriteFor(store, request.raw.headersDistinct, () => resource(request));
      writes.set(request, write as GuardedWrite<unknown>);
    } catch (error) {
      if (!isFencedError(error)) throw error;
      const answer = storeHttpError(error);
      // Answered here: returning the reply tells fastify not to run the handler.
      return reply.code(answer.status).headers(answer.headers).send(answer.body);
    }
    return undefined;
  };
}

/**
 * The request's guarded write, set by {@link fencedWrites}.
 * @throws InternalError (500) when the route has no `fencedWrites` preHandler (a wiring mistake).
 */
export function guardedWrite<DB>(request: FastifyRequest): GuardedWrite<DB> {
  const write = writes.get(request);
  if (write === undefined) {
    throw new InternalError('route has no fencedWrites() preHandler');
  }
  return write as GuardedWrite<DB>;
}

/**
 * An error handler (`app.setErrorHandler(fencedErrorHandler())`) answering as the express one does: 409
 * STALE_TOKEN, 403 INVALID_PROOF, 503 with Retry-After for retryable storage failures, 400 INVALID_REQUEST for a
 * bad request (fastify's body parsing and schema validation included), 500 INTERNAL without details for an error
 * nobody planned for. An application's own HTTP error (a 4xx or 5xx `statusCode` that is not fastify's own
 * request error) is passed on untouched, to the parent context's error handler (fastify's default answers with
 * its status): a 422 stays a 422.
 */
export function fencedErrorHandler(
  options: FencedErrorHandlerOptions = {},
): (error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply> {
  return async (error, _request, reply) => {
    if (!(error instanceof FencedError) && !isFastifyRequestError(error) && isForeignHttpError(error)) {
      throw error;
    }
    const answer =
      error instanceof FencedError
        ? storeHttpError(error)
        : isFastifyRequestError(error)
          ? toHttpError({ status: 400, type: fastifyParsingType(error) })
          : toHttpError(error);
    if (answer.unexpected) options.logger?.error({ err: error }, 'request failed');
    return reply.code(answer.status).headers(answer.headers).send(answer.body);
  };
}

/** fastify's own request errors: a body it could not parse, a schema it could not validate (status 4xx). */
function isFastifyRequestError(error: unknown): boolean {
  const { code, statusCode, validation } = error as {
    code?: unknown;
    statusCode?: unknown;
    validation?: unknown;
  };
  if (typeof statusCode !== 'number' || statusCode < 400 || statusCode >= 500) return false;
  return validation !== undefined || (typeof code === 'string' && code.startsWith('FST_ERR_CTP_'));
}

/** The body-parser `type` whose message the shared mapping gives the same failure (one wording for both). */
function fastifyParsingType(error: unknown): string {
  const { code } = error as { code?: unknown };
  switch (code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return 'entity.parse.failed';
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return 'entity.too.large';
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return 'request.size.invalid';
    default:
      return 'malformed';
  }
}

/**
 * A fastify plugin for a scope of guarded routes: every route registered in the scope after it gets the
 * {@link fencedWrites} preHandler, and the scope gets {@link fencedErrorHandler}. Register it in the scope
 * of the guarded routes (it applies to the scope it is registered in, as fastify-plugin's plugins do):
 *
 * ```ts
 * await app.register(async (guarded) => {
 *   await guarded.register(fencedPlugin, { store, resource: (req) => `item:${(req.params as { id: string }).id}` });
 *   guarded.put('/items/:id', async (request) => guardedWrite<Database>(request).run((trx) => …));
 * });
 * ```
 */
export const fencedPlugin: FastifyPluginAsync<FencedPluginOptions> = Object.assign(
  async (scope: Parameters<FastifyPluginAsync>[0], options: FencedPluginOptions) => {
    const { logger, ...writeOptions } = options;
    scope.addHook('preHandler', fencedWrites(writeOptions));
    scope.setErrorHandler(fencedErrorHandler(logger === undefined ? {} : { logger }));
    await Promise.resolve();
  },
  // As fastify-plugin does: the hook and the error handler apply to the scope that registers the plugin.
  { [Symbol.for('skip-override')]: true, [Symbol.for('fastify.display-name')]: 'fenced-writes' },
);
