// `@fenced/guarded-store/express`: the write middleware and its error handler for express (DESIGN §5). Their
// types are structural (middleware/http-types.ts): nothing here needs express or @types/express installed.
export { fencedWrites, guardedWrite } from './middleware/fenced-writes.js';
export type { FencedWritesOptions, GuardedWrite } from './middleware/fenced-writes.js';
export { fencedErrorHandler, isForeignHttpError } from './middleware/fenced-error-handler.js';
export type { FencedErrorHandlerOptions } from './middleware/fenced-error-handler.js';
export type {
  FencedRequest,
  FencedResponse,
  FencedNext,
  FencedRequestHandler,
  FencedErrorRequestHandler,
} from './middleware/http-types.js';
