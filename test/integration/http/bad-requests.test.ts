import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { ResponseValidator } from './response-validator.js';
import { lockPath, startTestService, uniqueResource, type TestService } from './service-harness.js';

interface BadRequest {
  name: string;
  method: 'GET' | 'POST' | 'DELETE' | 'PUT' | 'PATCH';
  /** Raw path, already encoded: the point is to send what a careless or hostile client sends. */
  path: (resource: string) => string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  status: number;
  code: string;
  /** A fragment the message must contain, naming what is allowed. */
  message?: RegExp;
  /** The `Allow` header of a 405. */
  allow?: string;
}

const json = { 'content-type': 'application/json' };
const leases = (r: string): string => `${lockPath(r, 'leases')}`;
const unknownLease = 'AAAAAAAAAAAAAAAAAAAAAA';

// A table of bad requests. Each must get its documented 4xx and error body — never a 5xx — and must leave no
// lock behind.
const TABLE: BadRequest[] = [
  {
    name: 'a body that is not JSON',
    method: 'POST',
    path: leases,
    headers: json,
    body: 'ttlMs=1000',
    status: 400,
    code: 'INVALID_REQUEST',
    message: /not valid JSON/,
  },
  {
    name: 'JSON with trailing garbage',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":1000}x',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'truncated JSON',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a JSON array',
    method: 'POST',
    path: leases,
    headers: json,
    body: '[{"ttlMs":1000}]',
    status: 400,
    code: 'INVALID_REQUEST',
    message: /must be a JSON object/,
  },
  {
    name: 'an empty JSON array',
    method: 'POST',
    path: leases,
    headers: json,
    body: '[]',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a JSON string',
    method: 'POST',
    path: leases,
    headers: json,
    body: '"ttlMs"',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'JSON null',
    method: 'POST',
    path: leases,
    headers: json,
    body: 'null',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'an empty body',
    method: 'POST',
    path: leases,
    headers: json,
    body: '',
    status: 400,
    code: 'INVALID_REQUEST',
    message: /ttlMs must be an integer/,
  },
  {
    name: 'JSON sent as text/plain',
    method: 'POST',
    path: leases,
    headers: { 'content-type': 'text/plain' },
    body: '{"ttlMs":1000}',
    status: 415,
    code: 'INVALID_REQUEST',
    message: /Content-Type: application\/json/,
  },
  {
    name: 'a form body',
    method: 'POST',
    path: leases,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'ttlMs=1000',
    status: 415,
    code: 'INVALID_REQUEST',
    message: /not application\/json/,
  },
  {
    name: 'JSON without a content type',
    method: 'POST',
    path: leases,
    body: '{"ttlMs":1000}',
    status: 415,
    code: 'INVALID_REQUEST',
    message: /needs a Content-Type/,
  },
  {
    name: 'an unsupported charset',
    method: 'POST',
    path: leases,
    headers: { 'content-type': 'application/json; charset=latin1' },
    body: '{"ttlMs":1000}',
    status: 415,
    code: 'INVALID_REQUEST',
    message: /UTF-8/,
  },
  {
    name: 'an unsupported content encoding',
    method: 'POST',
    path: leases,
    headers: { ...json, 'content-encoding': 'compress' },
    body: '{"ttlMs":1000}',
    status: 415,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'gzip that is not gzip',
    method: 'POST',
    path: leases,
    headers: { ...json, 'content-encoding': 'gzip' },
    body: '{"ttlMs":1000}',
    status: 415,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a missing ttlMs',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{}',
    status: 400,
    code: 'INVALID_REQUEST',
    message: /ttlMs must be an integer from 100 to 60000/,
  },
  {
    name: 'a string ttlMs',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":"1000"}',
    status: 400,
    code: 'INVALID_REQUEST',
    message: /ttlMs/,
  },
  {
    name: 'a boolean ttlMs',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":true}',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a null ttlMs',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":null}',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'an object ttlMs',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":{"$gt":0}}',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a fractional ttlMs',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":1000.5}',
    status: 400,
    code: 'INVALID_REQUEST',
    message: /integer/,
  },
  {
    name: 'a negative ttlMs',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":-1000}',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a zero ttlMs',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":0}',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a ttlMs below the minimum',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":99}',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a ttlMs above the maximum',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":60001}',
    status: 400,
    code: 'INVALID_REQUEST',
    message: /60000/,
  },
  {
    name: 'a huge ttlMs',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":1e308}',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a ttlMs beyond 2^53',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":9007199254740993}',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a ttlMs that overflows to Infinity',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":1e999}',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a negative waitMs',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":1000,"waitMs":-1}',
    status: 400,
    code: 'INVALID_REQUEST',
    message: /waitMs must be an integer from 0 to 5000/,
  },
  {
    name: 'a waitMs above the maximum',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":1000,"waitMs":5001}',
    status: 400,
    code: 'INVALID_REQUEST',
    message: /waitMs/,
  },
  {
    name: 'a fractional waitMs',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":1000,"waitMs":0.5}',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a string waitMs',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":1000,"waitMs":"10"}',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'an unknown field',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":1000,"ttl":5}',
    status: 400,
    code: 'INVALID_REQUEST',
    message: /Unrecognized key/,
  },
  {
    name: 'a __proto__ field',
    method: 'POST',
    path: leases,
    headers: json,
    body: '{"ttlMs":1000,"__proto__":{"waitMs":1}}',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a 1 MB body',
    method: 'POST',
    path: leases,
    headers: json,
    body: `{"ttlMs":1000,"pad":"${'x'.repeat(1024 * 1024)}"}`,
    status: 413,
    code: 'INVALID_REQUEST',
    message: /too large: at most 16384 bytes/,
  },
  {
    name: 'an empty resource name',
    method: 'POST',
    path: () => '/v1/locks//leases',
    headers: json,
    body: '{"ttlMs":1000}',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'an empty resource name on GET',
    method: 'GET',
    path: () => '/v1/locks/',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a 257-byte resource name',
    method: 'POST',
    path: () => lockPath('r'.repeat(257), 'leases'),
    headers: json,
    body: '{"ttlMs":1000}',
    status: 400,
    code: 'INVALID_REQUEST',
    message: /1 to 256 UTF-8 bytes, got 257/,
  },
  {
    name: 'a 258-byte name of 129 two-byte characters',
    method: 'GET',
    path: () => lockPath('ü'.repeat(129)),
    status: 400,
    code: 'INVALID_REQUEST',
    message: /got 258/,
  },
  {
    name: 'a NUL in the resource name',
    method: 'POST',
    path: (r) => lockPath(`${r}\u0000`, 'leases'),
    headers: json,
    body: '{"ttlMs":1000}',
    status: 400,
    code: 'INVALID_REQUEST',
    message: /control characters/,
  },
  {
    name: 'a newline in the resource name',
    method: 'GET',
    path: (r) => lockPath(`${r}\n`),
    status: 400,
    code: 'INVALID_REQUEST',
    message: /control characters/,
  },
  {
    name: 'DEL in the resource name',
    method: 'GET',
    path: (r) => lockPath(`${r}\u007f`),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a C1 control in the resource name',
    method: 'GET',
    path: (r) => lockPath(`${r}\u0085`),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'broken percent-encoding',
    method: 'GET',
    path: (r) => `${lockPath(r)}%E0%A4%A`,
    status: 400,
    code: 'INVALID_REQUEST',
    message: /percent-encoded UTF-8/,
  },
  {
    name: 'an encoded lone surrogate',
    method: 'GET',
    path: (r) => `${lockPath(r)}%ED%A0%80`,
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a stray percent sign',
    method: 'POST',
    path: (r) => `${lockPath(r)}%/leases`,
    headers: json,
    body: '{"ttlMs":1000}',
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a malformed lease id on extend',
    method: 'POST',
    path: (r) => lockPath(r, 'leases', 'not!a!lease!id!at!all', 'extend'),
    headers: json,
    body: '{"ttlMs":1000}',
    status: 400,
    code: 'INVALID_REQUEST',
    message: /leaseId/,
  },
  {
    name: 'a short lease id on release',
    method: 'DELETE',
    path: (r) => lockPath(r, 'leases', 'abc'),
    status: 400,
    code: 'INVALID_REQUEST',
    message: /leaseId/,
  },
  {
    name: 'a 129-character lease id',
    method: 'DELETE',
    path: (r) => lockPath(r, 'leases', 'a'.repeat(129)),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'an unknown lease id on extend',
    method: 'POST',
    path: (r) => lockPath(r, 'leases', unknownLease, 'extend'),
    headers: json,
    body: '{"ttlMs":1000}',
    status: 409,
    code: 'LEASE_LOST',
  },
  {
    name: 'a bad extend body',
    method: 'POST',
    path: (r) => lockPath(r, 'leases', unknownLease, 'extend'),
    headers: json,
    body: '{"ttlMs":1000,"waitMs":5}',
    status: 400,
    code: 'INVALID_REQUEST',
    message: /Unrecognized key/,
  },
  {
    name: 'an extend without a body',
    method: 'POST',
    path: (r) => lockPath(r, 'leases', unknownLease, 'extend'),
    status: 400,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'an unknown endpoint',
    method: 'GET',
    path: () => '/v1/nothing-here',
    status: 404,
    code: 'INVALID_REQUEST',
    message: /no endpoint GET/,
  },
  {
    name: 'an unknown path outside /v1',
    method: 'POST',
    path: () => '/nothing-here?x=1',
    headers: json,
    body: '{}',
    status: 404,
    code: 'INVALID_REQUEST',
  },
  {
    name: 'a wrong method on a lease',
    method: 'PUT',
    path: (r) => lockPath(r, 'leases', unknownLease),
    headers: json,
    body: '{}',
    status: 405,
    code: 'INVALID_REQUEST',
    message: /method PUT is not allowed on this path; allowed: DELETE/,
    allow: 'DELETE',
  },
  {
    name: 'GET on the leases collection',
    method: 'GET',
    path: leases,
    status: 405,
    code: 'INVALID_REQUEST',
    allow: 'POST',
  },
  {
    name: 'PATCH on a lock',
    method: 'PATCH',
    path: (r) => lockPath(r),
    headers: json,
    body: '{}',
    status: 405,
    code: 'INVALID_REQUEST',
    allow: 'GET, HEAD',
  },
  {
    name: 'POST on /healthz',
    method: 'POST',
    path: () => '/healthz',
    status: 405,
    code: 'INVALID_REQUEST',
    allow: 'GET, HEAD',
  },
];

describe('coordinator HTTP API: bad requests', () => {
  let redis: RedisNodes;
  let service: TestService;
  let validator: ResponseValidator;

  beforeAll(async () => {
    redis = await startRedisNodes(5, { useExisting: false });
    service = await startTestService(redis.urls, { FENCED_MAX_TTL_MS: '60000', FENCED_MAX_WAIT_MS: '5000' });
    validator = new ResponseValidator((await service.call('/openapi.json')).body as Record<string, unknown>);
  });
  afterAll(async () => {
    await service?.close();
    await redis?.stop();
  });

  it.each(TABLE.map((row) => [row.name, row] as const))(
    'answers %s with its 4xx and error body',
    async (_, row) => {
      const resource = uniqueResource('bad');
      const response = await rawRequest(
        service.url,
        row.method,
        row.path(resource),
        row.headers ?? {},
        row.body,
      );
      expect(response.status, response.text).toBe(row.status);
      expect(response.status).toBeLessThan(500);
      const body = JSON.parse(response.text) as { error: { code: string; message: string } };
      expect(body).toEqual({ error: { code: row.code, message: expect.any(String) as string } });
      expect(validator.check('GET', '/v1/locks/{resource}', 400, body)).toEqual([]);
      // 404, 405, 413 and 415 are documented responses of the operations they can answer.
      if (row.status === 413 || row.status === 415) {
        expect(validator.check('POST', '/v1/locks/{resource}/leases', row.status, body)).toEqual([]);
      }
      expect(response.allow).toBe(row.allow);
      if (row.message) expect(body.error.message).toMatch(row.message);
      // Nothing of the request is echoed: not the raw body, not a lease id from the path.
      expect(body.error.message).not.toContain('pad');
      expect(body.error.message).not.toContain(unknownLease);

      // No lock is left behind: the resource reads as free, and a fresh acquire succeeds.
      const status = await service.call(lockPath(resource));
      expect(status.body).toEqual({ resource, held: false });
      const fresh = await service.call(lockPath(resource, 'leases'), {
        method: 'POST',
        json: { ttlMs: 1000 },
      });
      expect(fresh.status).toBe(201);
      const { leaseId } = fresh.body as { leaseId: string };
      expect((await service.call(lockPath(resource, 'leases', leaseId), { method: 'DELETE' })).status).toBe(
        204,
      );
    },
  );

  it('still serves after the whole table', async () => {
    expect((await service.call('/readyz')).status).toBe(200);
    expect((await service.call('/metrics')).text).not.toMatch(/status="5\d\d"/);
  });
});

/**
 * Sends exactly these bytes with node:http (fetch would normalize the path and refuse some headers). Paths
 * with raw control characters cannot be sent at all, so the table percent-encodes them as a client would.
 */
function rawRequest(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  body: string | Buffer | undefined,
): Promise<{ status: number; text: string; allow: string | undefined }> {
  return new Promise((resolve, reject) => {
    const url = new URL(base);
    const request = http.request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path,
        headers: {
          ...headers,
          ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}),
        },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            text: Buffer.concat(chunks).toString('utf8'),
            allow: response.headers.allow,
          }),
        );
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}
