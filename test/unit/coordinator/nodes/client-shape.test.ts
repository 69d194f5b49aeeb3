// A node passed as a client is recognised by what it can do (nodes/client-shape.ts), not by `instanceof`: a client
// of another copy of ioredis must pass, and one that lacks a method the coordinator calls must be refused up front,
// naming what it lacks, instead of failing on the first acquire.
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { InvalidRequestError } from '@fenced/shared';
import { asRedisClient, describeValue } from '../../../../packages/coordinator/src/nodes/client-shape.js';

const clients: Redis[] = [];

afterEach(() => {
  for (const client of clients.splice(0)) client.disconnect();
});

/** A real ioredis client that never connects (no server needed). */
function lazyClient(): Redis {
  const client = new Redis({ lazyConnect: true, port: 1 });
  clients.push(client);
  return client;
}

/** Every member of a real client, copied onto a plain object: the shape without the class. */
function shapeOf(client: Redis, without: readonly string[] = []): Record<string, unknown> {
  const shape: Record<string, unknown> = { options: client.options, status: client.status };
  for (let proto: object | null = client; proto !== null && proto !== Object.prototype;) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name in shape || name === 'constructor') continue;
      const value: unknown = (client as unknown as Record<string, unknown>)[name];
      if (typeof value === 'function') shape[name] = value;
    }
    proto = Object.getPrototypeOf(proto) as object | null;
  }
  for (const name of without) delete shape[name];
  return shape;
}

describe('asRedisClient', () => {
  it('returns an ioredis client as it is', () => {
    const client = lazyClient();
    expect(asRedisClient(client, 0)).toBe(client);
  });

  it('accepts an object of another class with every method the coordinator calls', () => {
    const shape = shapeOf(lazyClient());
    expect(asRedisClient(shape, 0)).toBe(shape);
  });

  it('answers undefined for values that are not clients at all', () => {
    expect(asRedisClient('redis://localhost:6379', 0)).toBeUndefined();
    expect(asRedisClient(null, 0)).toBeUndefined();
    expect(asRedisClient({ cluster: ['redis://localhost:7000'] }, 0)).toBeUndefined();
    // sendCommand alone is not a client: the options object is part of what makes one.
    expect(asRedisClient({ sendCommand: () => undefined }, 0)).toBeUndefined();
  });

  it('refuses a client that lacks a method the coordinator calls, naming each one and the node', () => {
    const shape = shapeOf(lazyClient(), ['duplicate', 'scan']);
    const refusal = (): unknown => asRedisClient(shape, 2);
    expect(refusal).toThrow(InvalidRequestError);
    expect(refusal).toThrow(
      /^nodes\[2\] looks like a Redis client but lacks duplicate, scan: ioredis clients of versions \^4\.28\.0 \|\| \^5\.0\.0 are supported/,
    );
  });

  it('refuses a client without a status', () => {
    const shape = shapeOf(lazyClient());
    delete shape['status'];
    expect(() => asRedisClient(shape, 0)).toThrow(/lacks status/);
  });
});

describe('describeValue', () => {
  it('names the type, and the class of an object', () => {
    expect(describeValue(null)).toBe('null');
    expect(describeValue(42)).toBe('number');
    expect(describeValue({})).toBe('object');
    expect(describeValue(new Map())).toBe('object (Map)');
    class NodeRedis {}
    expect(describeValue(new NodeRedis())).toBe('object (NodeRedis)');
  });
});
