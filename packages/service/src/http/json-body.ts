import { InvalidRequestError } from '@fenced/shared';
import { bodyTooLarge, unsupportedMediaType, type RefusedRequestError } from './http-conventions.js';
import type { FastifyRequest } from 'fastify';

/**
 * The service's one body parser, registered for every content type (fastify's own parsers are removed), so
 * that every request body gets the same answers whatever its headers say:
 *
 * - `application/json` (charset UTF-8 or none, no content encoding): parsed; an empty body is `{}`; anything
 *   but a JSON object or array is `request body is not valid JSON`;
 * - any other content type, another charset, a content encoding, or a body without a content type: `415`
 *   (the message says what is accepted); an empty body without a content type is no body (`undefined`), and
 *   the route's validation answers when it wants one.
 *
 * fastify reads the body before calling this, up to `bodyLimit`. Messages never echo the body.
 */
export function parseJsonBody(
  request: FastifyRequest,
  body: Buffer,
  done: (error: Error | null, body?: unknown) => void,
): void {
  const { 'content-type': type, 'content-encoding': encoding } = request.headers;
  if (type === undefined) {
    done(body.length === 0 ? null : unsupportedMediaType('a request body needs a Content-Type'), undefined);
    return;
  }
  if (!isJson(type)) {
    done(unsupportedMediaType('the request body is not application/json'));
    return;
  }
  if (!utf8Charset(type) || (encoding !== undefined && encoding.toLowerCase() !== 'identity')) {
    done(unsupportedMediaType('the request body has another charset than UTF-8, or a Content-Encoding'));
    return;
  }
  if (body.length === 0) {
    done(null, {});
    return;
  }
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    value = undefined;
  }
  if (typeof value !== 'object' || value === null) {
    done(new InvalidRequestError('request body is not valid JSON (a JSON object is expected)'));
    return;
  }
  done(null, value);
}

function isJson(type: string): boolean {
  const end = type.indexOf(';');
  return (end === -1 ? type : type.slice(0, end)).trim().toLowerCase() === 'application/json';
}

const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)"?/i;

function utf8Charset(type: string): boolean {
  const charset = CHARSET.exec(type)?.[1]?.toLowerCase();
  return charset === undefined || charset === 'utf-8' || charset === 'utf8';
}

/**
 * fastify's own request errors (a body over the limit, a Content-Length that does not match, a path that is
 * not valid percent-encoding) as the `INVALID_REQUEST` errors the API documents, with messages of ours: 413 for
 * a body over the limit, 415 for an unsupported media type, 400 for the others; `undefined` for any other error.
 */
export function fromFastifyRequestError(
  error: unknown,
  bodyLimitBytes: number,
): InvalidRequestError | RefusedRequestError | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, statusCode } = error as { code?: unknown; statusCode?: unknown };
  if (typeof code !== 'string' || !code.startsWith('FST_')) return undefined;
  switch (code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return bodyTooLarge(bodyLimitBytes);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return unsupportedMediaType('the request body is not application/json');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new InvalidRequestError('request body ended early or did not match its Content-Length');
    case 'FST_ERR_BAD_URL':
      return new InvalidRequestError('a path segment is not valid percent-encoded UTF-8');
    default:
      return typeof statusCode === 'number' && statusCode >= 400 && statusCode < 500
        ? new InvalidRequestError('malformed request')
        : undefined;
  }
}
