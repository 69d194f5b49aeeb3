import {
  describeValue,
  ERROR_CODES,
  InvalidRequestError,
  MAX_RESOURCE_BYTES,
  PROOF_PATTERN,
  validateResourceName,
} from '@fenced/shared';
import { z } from 'zod';
import { lockOrder, MAX_LEASE_RESOURCES } from '@fenced/coordinator';
import type { RequestLimits } from '../service-options.js';

/** Lease ids are base64url strings of at least 128 random bits (`newLeaseId`). */
const LEASE_ID_PATTERN = /^[A-Za-z0-9_-]{16,128}$/;
const DECIMAL_TOKEN_PATTERN = /^[1-9][0-9]{0,18}$/;

function boundedInt(name: string, min: number, max: number, description: string) {
  const error = (issue: { input?: unknown }): string =>
    `${name} must be an integer from ${min} to ${max} (milliseconds), got ${describeValue(issue.input)}`;
  return z.int({ error }).min(min, { error }).max(max, { error }).meta({ description });
}

/**
 * The zod schemas that validate requests and describe responses. The OpenAPI document is generated from the
 * same objects, so the two cannot drift apart.
 */
export function createSchemas(limits: RequestLimits) {
  /** Named schemas: they become `components.schemas` of the OpenAPI document. */
  const components = z.registry<{ id: string }>();
  const ttlMs = boundedInt(
    'ttlMs',
    limits.minTtlMs,
    limits.maxTtlMs,
    'Time to live of the lease on every Redis node, in milliseconds.',
  );
  const waitMs = boundedInt(
    'waitMs',
    0,
    limits.maxWaitMs,
    'How long the server may wait for the lock to become free before answering 409 LOCKED, in milliseconds.',
  );

  const acquireBody = z
    .strictObject({ ttlMs, waitMs: waitMs.optional() })
    .meta({ examples: [{ ttlMs: 10_000, waitMs: 0 }] })
    .register(components, { id: 'AcquireRequest' });
  const extendBody = z
    .strictObject({ ttlMs })
    .meta({ examples: [{ ttlMs: 10_000 }] })
    .register(components, { id: 'ExtendRequest' });

  const resource = z
    .string()
    .min(1)
    .max(MAX_RESOURCE_BYTES)
    .superRefine((value, ctx) => {
      try {
        validateResourceName(value);
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message });
      }
    })
    .meta({
      description: `Resource name: 1 to ${MAX_RESOURCE_BYTES} bytes of UTF-8 without control characters, percent-encoded as one path segment (encodeURIComponent).`,
      examples: ['orders/42'],
    });
  const resourceListError = `resources must be an array of 1 to ${MAX_LEASE_RESOURCES} resource names without repeats`;
  const resources = z
    .array(resource, { error: resourceListError })
    .min(1, { error: resourceListError })
    .max(MAX_LEASE_RESOURCES, { error: resourceListError })
    .superRefine((names, ctx) => {
      if (lockOrder(names).length !== names.length) {
        ctx.addIssue({ code: 'custom', message: `${resourceListError}: a name appears twice` });
      }
    })
    .meta({
      description: `The resources of one lease, 1 to ${MAX_LEASE_RESOURCES}, each named as on the single-resource routes, without repeats. They are acquired all or nothing, in sorted (UTF-8 byte) order.`,
      examples: [['acct:1', 'acct:2']],
    });
  const multiAcquireBody = z
    .strictObject({ resources, ttlMs, waitMs: waitMs.optional() })
    .meta({ examples: [{ resources: ['acct:1', 'acct:2'], ttlMs: 10_000, waitMs: 0 }] })
    .register(components, { id: 'MultiAcquireRequest' });
  const multiExtendBody = z
    .strictObject({ resources, ttlMs })
    .meta({ examples: [{ resources: ['acct:1', 'acct:2'], ttlMs: 10_000 }] })
    .register(components, { id: 'MultiExtendRequest' });
  const multiReleaseBody = z
    .strictObject({ resources })
    .meta({ examples: [{ resources: ['acct:1', 'acct:2'] }] })
    .register(components, { id: 'MultiReleaseRequest' });

  const leaseId = z
    .string()
    .regex(LEASE_ID_PATTERN, { error: 'leaseId must be the base64url lease id returned by the acquire call' })
    .meta({ description: 'The lease id from the acquire response: the capability to extend or release.' });

  const token = z
    .string()
    .regex(DECIMAL_TOKEN_PATTERN)
    .meta({ description: 'Fencing token: a decimal integer from 1 to 2^63-1 (a string: it exceeds 2^53).' });

  const leaseResponse = z
    .strictObject({
      resource: z.string(),
      leaseId: z.string().meta({ description: 'Unguessable lease id: keep it secret, never log it.' }),
      token,
      ttlMs: z.int(),
      validityMs: z.int().min(1).meta({
        description:
          'How long the lease is valid, counted from the grant: ttlMs minus elapsed time and drift.',
      }),
      expiresAt: z.iso.datetime().meta({ description: 'Wall-clock estimate of the end of validity.' }),
      proof: z
        .string()
        .regex(PROOF_PATTERN)
        .optional()
        .meta({
          description:
            'Fencing proof, present when the service signs leases (FENCED_SIGNING_KEY_FILE): v1.<keyId>.<Ed25519 ' +
            'signature, base64url> over the key id, resource, token and sha256 of the lease id. Send it to a ' +
            'guarded store in the Fencing-Proof header, with the lease id in Fencing-Lease-Id. Extending keeps it.',
        }),
    })
    .register(components, { id: 'LeaseResponse' });
  const multiLeaseResponse = z
    .strictObject({
      resources: z.array(z.string()).meta({ description: 'Every resource of the lease, sorted.' }),
      leaseId: z
        .string()
        .meta({ description: 'Unguessable lease id shared by every resource: never log it.' }),
      tokens: z
        .record(z.string(), token)
        .meta({ description: 'The fencing token of each resource (its own grant), by resource name.' }),
      proofs: z
        .record(z.string(), z.string().regex(PROOF_PATTERN))
        .optional()
        .meta({ description: 'The fencing proof of each resource, when the service signs leases.' }),
      ttlMs: z.int(),
      validityMs: z.int().min(1).meta({
        description:
          'How long the whole set is valid, counted from the grant: the smallest of its resources.',
      }),
      expiresAt: z.iso.datetime().meta({ description: 'Wall-clock estimate of the end of validity.' }),
    })
    .register(components, { id: 'MultiLeaseResponse' });
  const lockStatus = z
    .strictObject({ resource: z.string(), held: z.boolean(), token: token.optional() })
    .meta({ description: 'Who holds the lock, as a majority sees it. Never a lease id.' })
    .register(components, { id: 'LockStatus' });
  const errorBody = z
    .strictObject({
      error: z.strictObject({ code: z.enum(ERROR_CODES as [string, ...string[]]), message: z.string() }),
    })
    .register(components, { id: 'Error' });
  const health = z.strictObject({ status: z.literal('ok') }).register(components, { id: 'Health' });
  const nodeStatus = z
    .strictObject({
      node: z.int(),
      address: z.string(),
      reachable: z.boolean(),
      role: z.string().optional(),
      configOk: z.boolean().meta({ description: 'appendonly yes, appendfsync always, noeviction, master.' }),
      problems: z.array(z.string()),
      voting: z.boolean(),
      latencyMs: z.number().min(0).optional(),
    })
    .register(components, { id: 'NodeStatus' });
  const readiness = z
    .strictObject({
      ready: z.boolean(),
      quorum: z.int(),
      nodeCount: z.int(),
      votingNodes: z.int(),
      nodes: z.array(nodeStatus),
      error: errorBody.shape.error.optional(),
    })
    .register(components, { id: 'Readiness' });

  return {
    components,
    acquireBody,
    extendBody,
    resource,
    leaseId,
    leaseResponse,
    resources,
    multiAcquireBody,
    multiExtendBody,
    multiReleaseBody,
    multiLeaseResponse,
    lockStatus,
    errorBody,
    health,
    nodeStatus,
    readiness,
  };
}

export type Schemas = ReturnType<typeof createSchemas>;

/** Parses with a schema or throws `InvalidRequestError` naming each bad field and what is allowed. */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw new InvalidRequestError(describeIssues(result.error, what));
}

function describeIssues(error: z.ZodError, what: string): string {
  const messages = new Set<string>();
  for (const issue of error.issues) {
    if (issue.code === 'invalid_type' && issue.path.length === 0 && issue.expected === 'object') {
      messages.add(`${what} must be a JSON object sent with Content-Type: application/json`);
    } else {
      const where = issue.path.length > 0 ? issue.path.join('.') : what;
      messages.add(issue.message.startsWith(`${where} `) ? issue.message : `${where}: ${issue.message}`);
    }
  }
  return [...messages].join('; ');
}
