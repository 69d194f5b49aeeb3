import {
  ErrorCode,
  HTTP_STATUS_BY_CODE,
  InternalError,
  InvalidRequestError,
  isFencedError,
  type ErrorBody,
} from '@fenced/shared';

export interface ErrorResponse {
  status: number;
  body: ErrorBody;
  /** False for errors nobody planned for: those are logged with their stack, and their details stay here. */
  expected: boolean;
}

/**
 * Turns anything thrown while serving a request into the wire error. Fenced errors keep their code and
 * message (they are written for callers and never carry lease ids); request-parsing errors from express and
 * body-parser become `INVALID_REQUEST` with a message of ours (theirs can echo the raw input); everything
 * else becomes `500 INTERNAL` without internals.
 */
export function toErrorResponse(error: unknown): ErrorResponse {
  if (isFencedError(error)) {
    const fenced = error.code === ErrorCode.INTERNAL ? new InternalError() : error;
    return {
      status: HTTP_STATUS_BY_CODE[fenced.code],
      body: fenced.toJSON(),
      expected: error.code !== ErrorCode.INTERNAL,
    };
  }
  const clientError = fromRequestParsingError(error);
  if (clientError) {
    return { status: HTTP_STATUS_BY_CODE.INVALID_REQUEST, body: clientError.toJSON(), expected: true };
  }
  return { status: HTTP_STATUS_BY_CODE.INTERNAL, body: new InternalError().toJSON(), expected: false };
}

/** body-parser and router errors carry a 4xx `status` and a `type`; their own messages may echo input. */
function fromRequestParsingError(error: unknown): InvalidRequestError | null {
  if (typeof error !== 'object' || error === null) return null;
  const { status, statusCode, type, limit } = error as {
    status?: unknown;
    statusCode?: unknown;
    type?: unknown;
    limit?: unknown;
  };
  const code = typeof status === 'number' ? status : typeof statusCode === 'number' ? statusCode : NaN;
  if (!(code >= 400 && code < 500)) return null;
  switch (type) {
    case 'entity.parse.failed':
      return new InvalidRequestError('request body is not valid JSON (a JSON object is expected)');
    case 'entity.too.large':
      return new InvalidRequestError(
        `request body is too large${typeof limit === 'number' ? `: at most ${limit} bytes are accepted` : ''}`,
      );
    case 'charset.unsupported':
    case 'encoding.unsupported':
      return new InvalidRequestError('request body must be UTF-8 JSON without content encoding');
    case 'request.aborted':
    case 'request.size.invalid':
      return new InvalidRequestError('request body ended early or did not match its Content-Length');
    default:
      if (error instanceof URIError || /decode param/i.test(String((error as Error).message))) {
        return new InvalidRequestError('a path segment is not valid percent-encoded UTF-8');
      }
      return new InvalidRequestError('malformed request');
  }
}
