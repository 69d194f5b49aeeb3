import { InvalidRequestError } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import { createSchemas, parseOrThrow } from '../../../packages/service/src/http/schemas.js';

const schemas = createSchemas({ minTtlMs: 100, maxTtlMs: 60_000, maxWaitMs: 5_000 });

function message(schema: Parameters<typeof parseOrThrow>[0], value: unknown, what = 'request body'): string {
  try {
    parseOrThrow(schema, value, what);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidRequestError);
    return (error as Error).message;
  }
  throw new Error('expected a validation error');
}

describe('request schemas', () => {
  it('accepts acquire and extend bodies within the bounds', () => {
    expect(parseOrThrow(schemas.acquireBody, { ttlMs: 100, waitMs: 0 }, 'body')).toEqual({
      ttlMs: 100,
      waitMs: 0,
    });
    expect(parseOrThrow(schemas.acquireBody, { ttlMs: 60_000 }, 'body')).toEqual({ ttlMs: 60_000 });
    expect(parseOrThrow(schemas.extendBody, { ttlMs: 5_000 }, 'body')).toEqual({ ttlMs: 5_000 });
  });

  it.each([
    [
      'a missing body',
      undefined,
      /request body must be a JSON object sent with Content-Type: application\/json/,
    ],
    ['an array', [{ ttlMs: 1000 }], /request body must be a JSON object/],
    ['a missing ttlMs', {}, /ttlMs must be an integer from 100 to 60000/],
    ['a string ttlMs', { ttlMs: '1000' }, /ttlMs must be an integer from 100 to 60000/],
    ['a fractional ttlMs', { ttlMs: 1000.5 }, /ttlMs must be an integer/],
    ['a negative ttlMs', { ttlMs: -1 }, /ttlMs must be an integer/],
    ['a ttlMs below the minimum', { ttlMs: 99 }, /ttlMs must be an integer from 100/],
    ['a huge ttlMs', { ttlMs: 1e300 }, /ttlMs must be an integer from 100 to 60000/],
    ['a waitMs above the maximum', { ttlMs: 1000, waitMs: 5001 }, /waitMs must be an integer from 0 to 5000/],
    ['a null waitMs', { ttlMs: 1000, waitMs: null }, /waitMs must be an integer/],
    ['an unknown field', { ttlMs: 1000, ttl: 5 }, /request body: Unrecognized key: "ttl"/],
  ])('refuses %s, naming what is allowed', (_name, body, expected) => {
    expect(message(schemas.acquireBody, body)).toMatch(expected);
  });

  it('checks resource names with the shared rule', () => {
    expect(parseOrThrow(schemas.resource, 'orders/42', 'resource')).toBe('orders/42');
    expect(message(schemas.resource, '', 'resource')).toMatch(/resource/);
    expect(message(schemas.resource, 'ü'.repeat(129), 'resource')).toMatch(/1 to 256 UTF-8 bytes, got 258/);
    expect(message(schemas.resource, 'a\u0007b', 'resource')).toMatch(/control characters/);
  });

  it('checks the form of lease ids', () => {
    expect(parseOrThrow(schemas.leaseId, 'abcdefghijklmnopqrstuv', 'leaseId')).toBe('abcdefghijklmnopqrstuv');
    expect(message(schemas.leaseId, 'short', 'leaseId')).toMatch(/leaseId must be the base64url lease id/);
    expect(message(schemas.leaseId, 'abcdefghijklmnopqrstu!', 'leaseId')).toMatch(/leaseId/);
  });
});
