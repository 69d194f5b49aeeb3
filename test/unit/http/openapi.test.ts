import { Validator } from '@seriousme/openapi-schema-validator';
import { describe, expect, it } from 'vitest';
import { createOpenApiDocument } from '../../../packages/service/src/http/openapi.js';
import { createSchemas } from '../../../packages/service/src/http/schemas.js';
import { ResponseValidator } from '../../integration/http/response-validator.js';

const limits = { minTtlMs: 100, maxTtlMs: 60_000, maxWaitMs: 5_000 };

function document(authEnabled = true, healthAuthRequired = false): Record<string, unknown> {
  return createOpenApiDocument(createSchemas(limits), { authEnabled, healthAuthRequired, version: '1.2.3' });
}

describe('OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    for (const [auth, health] of [
      [true, false],
      [true, true],
      [false, false],
    ] as const) {
      const validator = new Validator();
      const result = await validator.validate(document(auth, health));
      expect(result.errors, JSON.stringify(result.errors, null, 2)).toBeUndefined();
      expect(result.valid).toBe(true);
      expect(validator.version).toBe('3.1');
    }
  });

  it('has component schemas that compile as JSON Schema 2020-12 in strict mode', () => {
    const validator = new ResponseValidator(document());
    const lease = {
      resource: 'r',
      leaseId: 'AAAAAAAAAAAAAAAAAAAAAA',
      token: '9223372036854775807',
      ttlMs: 1000,
      validityMs: 980,
      expiresAt: new Date().toISOString(),
    };
    expect(validator.check('POST', '/v1/locks/{resource}/leases', 201, lease)).toEqual([]);
    expect(validator.check('POST', '/v1/locks/{resource}/leases', 201, { ...lease, token: 12 })).not.toEqual(
      [],
    );
    expect(validator.check('POST', '/v1/locks/{resource}/leases', 201, { ...lease, extra: 1 })).not.toEqual(
      [],
    );
    expect(
      validator.check('GET', '/readyz', 200, {
        ready: true,
        quorum: 2,
        nodeCount: 3,
        votingNodes: 3,
        nodes: [{ node: 0, address: 'h:1', reachable: true, configOk: true, problems: [], voting: true }],
      }),
    ).toEqual([]);
    expect(
      validator.check('GET', '/v1/locks/{resource}', 401, { error: { code: 'NOPE', message: '' } }),
    ).not.toEqual([]);
  });

  it('documents the bounds that the request schemas enforce', () => {
    const schemas = (
      document().components as { schemas: Record<string, { properties: Record<string, unknown> }> }
    ).schemas;
    expect(schemas.AcquireRequest?.properties.ttlMs).toMatchObject({
      type: 'integer',
      minimum: 100,
      maximum: 60_000,
    });
    expect(schemas.AcquireRequest?.properties.waitMs).toMatchObject({
      type: 'integer',
      minimum: 0,
      maximum: 5_000,
    });
    expect(schemas.AcquireRequest).toMatchObject({ required: ['ttlMs'], additionalProperties: false });
    expect(schemas.ExtendRequest?.properties.ttlMs).toMatchObject({ minimum: 100, maximum: 60_000 });
  });

  it('declares bearer auth only when keys are configured, and public health endpoints', () => {
    const on = document(true, false) as {
      security?: unknown;
      paths: Record<string, { get?: { security?: unknown } }>;
    };
    expect(on.security).toEqual([{ bearerAuth: [] }]);
    expect(on.paths['/readyz']?.get?.security).toEqual([]);
    const healthToo = document(true, true) as typeof on;
    expect(healthToo.paths['/readyz']?.get?.security).toBeUndefined();
    // Without keys every operation is open: the empty requirement says so (and lint tools see security defined).
    expect((document(false) as typeof on).security).toEqual([{}]);
    expect((document(false) as { components: object }).components).not.toHaveProperty('securitySchemes');
  });
});
