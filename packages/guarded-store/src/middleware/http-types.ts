// The parts of an HTTP framework's request and response the write middleware uses, as plain structural types: its
// declarations then name no framework's types, so a project that never installed express (or its @types) can
// typecheck the package strictly (skipLibCheck: false). express's Request, Response and NextFunction fit them.

/** What the middleware reads of a request: the headers (Node's `headersDistinct`) and the route's parameters. */
export interface FencedRequest {
  readonly headersDistinct: NodeJS.Dict<string[]>;
  readonly params: Record<string, string>;
}

/** What the middleware and the error handler use of a response. */
export interface FencedResponse {
  readonly headersSent: boolean;
  readonly locals: Record<string, unknown>;
  /** Sets the status code. */
  status(code: number): FencedResponse;
  /** Sets response headers. */
  set(headers: Record<string, string>): FencedResponse;
  /** Sends `body` as JSON. */
  json(body: unknown): unknown;
}

/** Hands the request (or an error) on. */
export type FencedNext = (error?: unknown) => void;

/** A request handler, as express calls it. */
export type FencedRequestHandler = (req: FencedRequest, res: FencedResponse, next: FencedNext) => void;

/** An error handler (four parameters), as express calls it. */
export type FencedErrorRequestHandler = (
  error: unknown,
  req: unknown,
  res: FencedResponse,
  next: FencedNext,
) => void;
