import { describe, expect, it } from 'vitest';
import { InvalidRequestError } from '@fenced/shared';
import { DEFAULT_SERVICE_CONFIG, loadConfig } from '../../../packages/coordinator/src/config.js';

const urls = 'redis://127.0.0.1:7001, redis://127.0.0.1:7002,redis://127.0.0.1:7003';

function error(env: Record<string, string>): string {
  try {
    loadConfig(env);
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidRequestError);
    return (e as Error).message;
  }
  throw new Error('expected loadConfig to fail');
}

describe('service configuration from the environment', () => {
  it('reads a minimal environment with the defaults, frozen', () => {
    const config = loadConfig({ FENCED_REDIS_URLS: urls });
    expect(config).toMatchObject({ ...DEFAULT_SERVICE_CONFIG, apiKeys: [] });
    expect(config.redisUrls).toEqual([
      'redis://127.0.0.1:7001',
      'redis://127.0.0.1:7002',
      'redis://127.0.0.1:7003',
    ]);
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.redisUrls)).toBe(true);
  });

  it('reads every variable', () => {
    const config = loadConfig({
      FENCED_REDIS_URLS: urls,
      FENCED_HOST: '0.0.0.0',
      PORT: '9000',
      FENCED_PORT: '9100',
      FENCED_API_KEYS: 'aaaaaaaaaaaaaaaa,bbbbbbbbbbbbbbbbbbbb',
      FENCED_HEALTH_AUTH: 'required',
      FENCED_MIN_TTL_MS: '50',
      FENCED_MAX_TTL_MS: '60000',
      FENCED_MAX_WAIT_MS: '5000',
      FENCED_BODY_LIMIT_BYTES: '1024',
      FENCED_UNSAFE_ALLOW_UNSAFE_NODES: 'true',
      FENCED_KEY_PREFIX: 'svc',
      FENCED_NODE_TIMEOUT_MS: '80',
      FENCED_LOG_LEVEL: 'warn',
      FENCED_SHUTDOWN_GRACE_MS: '0',
      FENCED_STARTUP_TIMEOUT_MS: '1000',
    });
    expect(config).toEqual({
      redisUrls: ['redis://127.0.0.1:7001', 'redis://127.0.0.1:7002', 'redis://127.0.0.1:7003'],
      host: '0.0.0.0',
      port: 9100,
      apiKeys: ['aaaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbbbbbbb'],
      healthAuth: 'required',
      minTtlMs: 50,
      maxTtlMs: 60000,
      maxWaitMs: 5000,
      bodyLimitBytes: 1024,
      unsafeAllowUnsafeNodes: true,
      keyPrefix: 'svc',
      nodeTimeoutMs: 80,
      logLevel: 'warn',
      shutdownGraceMs: 0,
      startupTimeoutMs: 1000,
    });
  });

  it('falls back to PORT and treats empty variables as unset', () => {
    const config = loadConfig({
      FENCED_REDIS_URLS: urls,
      PORT: '3000',
      FENCED_PORT: '',
      FENCED_API_KEYS: '',
    });
    expect(config.port).toBe(3000);
    expect(config.apiKeys).toEqual([]);
  });

  it('fails naming a missing FENCED_REDIS_URLS', () => {
    expect(error({})).toMatch(/FENCED_REDIS_URLS is required/);
    expect(error({ FENCED_REDIS_URLS: ' , ' })).toMatch(/FENCED_REDIS_URLS needs at least one/);
  });

  it.each([
    ['FENCED_PORT', '70000', /FENCED_PORT must be an integer from 0 to 65535, got "70000" \(string\)/],
    ['PORT', 'http', /PORT must be an integer from 0 to 65535/],
    ['FENCED_MAX_TTL_MS', '1.5', /FENCED_MAX_TTL_MS must be an integer from 1 to 86400000/],
    ['FENCED_MAX_WAIT_MS', '-1', /FENCED_MAX_WAIT_MS must be an integer/],
    ['FENCED_BODY_LIMIT_BYTES', '10', /FENCED_BODY_LIMIT_BYTES must be an integer from 64 to 1048576/],
    ['FENCED_HEALTH_AUTH', 'sometimes', /FENCED_HEALTH_AUTH must be 'public' or 'required'/],
    ['FENCED_UNSAFE_ALLOW_UNSAFE_NODES', 'yes', /FENCED_UNSAFE_ALLOW_UNSAFE_NODES must be 'true' or 'false'/],
    ['FENCED_LOG_LEVEL', 'loud', /FENCED_LOG_LEVEL must be one of fatal, error/],
    ['FENCED_KEY_PREFIX', 'a{b}', /FENCED_KEY_PREFIX must be 1 to 64/],
  ])('fails naming %s=%s and what is allowed', (variable, value, message) => {
    expect(error({ FENCED_REDIS_URLS: urls, [variable]: value })).toMatch(message);
  });

  it('never echoes secrets: API keys and Redis URLs (which may hold passwords)', () => {
    const keys = error({ FENCED_REDIS_URLS: urls, FENCED_API_KEYS: 'good-key-0123456789,short' });
    expect(keys).toMatch(/FENCED_API_KEYS every key must be 16 to 512 visible ASCII characters/);
    expect(keys).not.toContain('good-key');
    const redis = error({ FENCED_REDIS_URLS: 'redis://:hunter2@10.0.0.1:6379,http://x' });
    expect(redis).toMatch(/FENCED_REDIS_URLS every entry must be a redis:\/\/ or rediss:\/\/ URL/);
    expect(redis).not.toContain('hunter2');
  });

  it('refuses a node listed twice and a min ttl above the max', () => {
    expect(error({ FENCED_REDIS_URLS: 'redis://a:1,redis://a:1' })).toMatch(/must not list a node twice/);
    expect(error({ FENCED_REDIS_URLS: urls, FENCED_MIN_TTL_MS: '5000', FENCED_MAX_TTL_MS: '1000' })).toMatch(
      /FENCED_MIN_TTL_MS \(5000\) must not exceed FENCED_MAX_TTL_MS/,
    );
  });

  it('reports every bad variable at once', () => {
    const message = error({ FENCED_REDIS_URLS: urls, FENCED_PORT: 'x', FENCED_MAX_WAIT_MS: 'y' });
    expect(message).toContain('FENCED_PORT');
    expect(message).toContain('FENCED_MAX_WAIT_MS');
  });
});
