import { describe, expect, it } from 'vitest';
import {
  clientAddress,
  DEFAULT_REDIS_PORT,
  nodeEntryAddress,
  nodeEntryProblem,
  parseNodeEntry,
  redisUrlProblem,
  urlAddress,
} from '../../../../packages/coordinator/src/nodes/node-address.js';

describe('node addresses', () => {
  it('defaults the port of a URL and of a client to 6379, once', () => {
    expect(DEFAULT_REDIS_PORT).toBe(6379);
    expect(urlAddress(new URL('redis://h'))).toEqual({ host: 'h', port: 6379, address: 'h:6379' });
    expect(urlAddress(new URL('rediss://h:7000/2')).address).toBe('h:7000');
    expect(clientAddress({})).toBe('localhost:6379');
    expect(clientAddress({ host: 'h', port: 7001 })).toBe('h:7001');
    expect(clientAddress({ path: '/run/redis.sock', host: 'h' })).toBe('/run/redis.sock');
  });

  it('says what is wrong with a URL without echoing it (it may carry a password)', () => {
    expect(redisUrlProblem('redis://:secret@h:6379')).toBeUndefined();
    expect(redisUrlProblem('http://h')).toBe("has the scheme 'http://', not redis:// or rediss://");
    expect(redisUrlProblem('redis://:secret@h:99999')).toMatch(/^has the port '99999'/);
    expect(redisUrlProblem('not a url')).toBe('is not a redis:// or rediss:// URL');
    expect(redisUrlProblem('redis://:secret@h:99999')).not.toContain('secret');
  });

  it('reads an entry of FENCED_REDIS_URLS: a URL, or cluster: and seeds joined by +', () => {
    expect(parseNodeEntry('redis://a:1')).toBe('redis://a:1');
    expect(parseNodeEntry('cluster:redis://a:1+redis://b:2')).toEqual({
      cluster: ['redis://a:1', 'redis://b:2'],
    });
    expect(nodeEntryAddress('cluster:redis://a:1+redis://b')).toBe('cluster(a:1,b:6379)');
    expect(nodeEntryProblem('cluster:')).toMatch(/no seed URL/);
    expect(nodeEntryProblem('cluster:redis://a:1+ftp://b')).toMatch(/seed 1 is not a redis:\/\//);
    expect(() => parseNodeEntry('ftp://a', 3)).toThrow(/^node entry 3 is not a redis:\/\//);
  });
});
