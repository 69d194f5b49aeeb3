import { generateKeyPairSync } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidRequestError } from '@fenced/shared';
import {
  checkExposure,
  DEFAULT_SERVICE_CONFIG,
  isLoopbackHost,
  loadConfig,
} from '../../../packages/service/src/config.js';

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
      FENCED_TOKEN_RETENTION_MS: '120000',
      FENCED_LOG_LEVEL: 'warn',
      FENCED_SHUTDOWN_GRACE_MS: '0',
      FENCED_STARTUP_TIMEOUT_MS: '1000',
      FENCED_HEADERS_TIMEOUT_MS: '2000',
      FENCED_REQUEST_TIMEOUT_MS: '3000',
      FENCED_KEEP_ALIVE_TIMEOUT_MS: '4000',
      FENCED_MAX_CONNECTIONS: '50',
      FENCED_ACCESS_LOG_LEVEL: 'info',
    });
    expect(config).toEqual({
      redisUrls: ['redis://127.0.0.1:7001', 'redis://127.0.0.1:7002', 'redis://127.0.0.1:7003'],
      host: '0.0.0.0',
      port: 9100,
      apiKeys: ['aaaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbbbbbbb'],
      authOff: false,
      healthAuth: 'required',
      minTtlMs: 50,
      maxTtlMs: 60000,
      maxWaitMs: 5000,
      bodyLimitBytes: 1024,
      unsafeAllowUnsafeNodes: true,
      keyPrefix: 'svc',
      nodeTimeoutMs: 80,
      tokenRetentionMs: 120000,
      logLevel: 'warn',
      accessLogLevel: 'info',
      shutdownGraceMs: 0,
      startupTimeoutMs: 1000,
      headersTimeoutMs: 2000,
      requestTimeoutMs: 3000,
      keepAliveTimeoutMs: 4000,
      maxConnections: 50,
      signingKey: undefined,
    });
  });

  it('bounds the connection limits, naming the variable, and keeps the headers timeout within the request timeout', () => {
    expect(error({ FENCED_REDIS_URLS: urls, FENCED_MAX_CONNECTIONS: '0' })).toContain(
      'FENCED_MAX_CONNECTIONS must be an integer from 1 to 1000000, got "0" (string)',
    );
    expect(error({ FENCED_REDIS_URLS: urls, FENCED_HEADERS_TIMEOUT_MS: '5s' })).toContain(
      'FENCED_HEADERS_TIMEOUT_MS must be an integer from 1 to 600000, got "5s" (string)',
    );
    expect(error({ FENCED_REDIS_URLS: urls, FENCED_KEEP_ALIVE_TIMEOUT_MS: '-1' })).toContain(
      'FENCED_KEEP_ALIVE_TIMEOUT_MS must be an integer',
    );
    expect(
      error({
        FENCED_REDIS_URLS: urls,
        FENCED_HEADERS_TIMEOUT_MS: '30000',
        FENCED_REQUEST_TIMEOUT_MS: '20000',
      }),
    ).toContain('FENCED_HEADERS_TIMEOUT_MS (30000) must not exceed FENCED_REQUEST_TIMEOUT_MS (20000)');
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

  it('names the FENCED_REDIS_URLS entry that is wrong, and how, without echoing it', () => {
    const message = error({ FENCED_REDIS_URLS: 'redis://a:1, redis://user:secret@b:26371x, nope' });
    expect(message).toContain(
      "FENCED_REDIS_URLS entry 1 has the port '26371x': a port is a whole number from 0 to 65535",
    );
    expect(message).toContain('FENCED_REDIS_URLS entry 2 is not a redis:// or rediss:// URL with a host');
    expect(message).not.toMatch(/secret|nope/);
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
    expect(redis).toMatch(/FENCED_REDIS_URLS entry 1 is not a redis:\/\/ or rediss:\/\/ URL/);
    expect(redis).not.toContain('hunter2');
  });

  it('refuses a node listed twice and a min ttl above the max', () => {
    expect(error({ FENCED_REDIS_URLS: 'redis://a:1,redis://a:1' })).toMatch(/must not list a node twice/);
    expect(error({ FENCED_REDIS_URLS: urls, FENCED_MIN_TTL_MS: '5000', FENCED_MAX_TTL_MS: '1000' })).toMatch(
      /FENCED_MIN_TTL_MS \(5000\) must not exceed FENCED_MAX_TTL_MS/,
    );
    expect(
      error({ FENCED_REDIS_URLS: urls, FENCED_MAX_TTL_MS: '60000', FENCED_TOKEN_RETENTION_MS: '59999' }),
    ).toMatch(/FENCED_TOKEN_RETENTION_MS \(59999\) must be at least FENCED_MAX_TTL_MS \(60000\)/);
  });

  it('reports every bad variable at once', () => {
    const message = error({ FENCED_REDIS_URLS: urls, FENCED_PORT: 'x', FENCED_MAX_WAIT_MS: 'y' });
    expect(message).toContain('FENCED_PORT');
    expect(message).toContain('FENCED_MAX_WAIT_MS');
  });
});

describe('secure by default: no API key, loopback only', () => {
  it('serves without a key on a loopback address', () => {
    for (const host of [
      '127.0.0.1',
      '127.0.0.53',
      '::1',
      '[::1]',
      'localhost',
      'LOCALHOST',
      '::ffff:127.0.0.1',
    ]) {
      expect(loadConfig({ FENCED_REDIS_URLS: urls, FENCED_HOST: host }).host).toBe(host);
      expect(isLoopbackHost(host)).toBe(true);
    }
    expect(loadConfig({ FENCED_REDIS_URLS: urls }).authOff).toBe(false);
  });

  it('refuses to start without a key on any other address, saying what to do', () => {
    for (const host of [
      '0.0.0.0',
      '::',
      '10.0.0.7',
      'coordinator.internal',
      '128.0.0.1',
      '127.0.0.1.example',
    ]) {
      expect(isLoopbackHost(host)).toBe(false);
      const attempt = () => loadConfig({ FENCED_REDIS_URLS: urls, FENCED_HOST: host });
      expect(attempt).toThrow(InvalidRequestError);
      expect(attempt).toThrow(
        `no API key (FENCED_API_KEYS is empty) and FENCED_HOST=${host} is not a loopback address`,
      );
      expect(attempt).toThrow(/Set FENCED_API_KEYS .*listen on 127\.0\.0\.1, or set FENCED_AUTH=off/);
    }
  });

  it('starts there with a key, or with FENCED_AUTH=off on purpose', () => {
    const keyed = loadConfig({
      FENCED_REDIS_URLS: urls,
      FENCED_HOST: '0.0.0.0',
      FENCED_API_KEYS: 'k'.repeat(24),
    });
    expect(keyed).toMatchObject({ host: '0.0.0.0', authOff: false });
    const open = loadConfig({ FENCED_REDIS_URLS: urls, FENCED_HOST: '0.0.0.0', FENCED_AUTH: 'off' });
    expect(open).toMatchObject({ host: '0.0.0.0', apiKeys: [], authOff: true });
    expect(() =>
      loadConfig({ FENCED_REDIS_URLS: urls, FENCED_AUTH: 'off', FENCED_API_KEYS: 'k'.repeat(24) }),
    ).toThrow('FENCED_AUTH is off but FENCED_API_KEYS is set');
    expect(() => loadConfig({ FENCED_REDIS_URLS: urls, FENCED_AUTH: 'none' })).toThrow(
      /FENCED_AUTH must be 'off' .* got "none"/,
    );
  });

  it('checks a configuration built by hand too (startServer)', () => {
    expect(() => checkExposure({ host: '0.0.0.0', apiKeys: [], authOff: false })).toThrow(/FENCED_AUTH=off/);
    expect(() => checkExposure({ host: '127.0.0.1', apiKeys: [], authOff: false })).not.toThrow();
  });
});

describe('the signing key from the environment', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fenced-config-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const pair = generateKeyPairSync('ed25519');
  const pem = pair.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
  const keyFile = path.join(dir, 'signing.pem');
  writeFileSync(keyFile, pem, { mode: 0o600 });
  const secretLine = pem.split('\n')[1]!;

  it('reads an Ed25519 key from FENCED_SIGNING_KEY_FILE, or inline from FENCED_SIGNING_KEY', () => {
    for (const env of [{ FENCED_SIGNING_KEY_FILE: keyFile }, { FENCED_SIGNING_KEY: pem }]) {
      const config = loadConfig({ FENCED_REDIS_URLS: urls, FENCED_SIGNING_KEY_ID: 'k2025', ...env });
      expect(config.signingKey?.id).toBe('k2025');
      expect(config.signingKey?.privateKey.asymmetricKeyType).toBe('ed25519');
      expect(config.signingKey?.privateKey.equals(pair.privateKey)).toBe(true);
      expect(Object.isFrozen(config.signingKey)).toBe(true);
    }
    expect(loadConfig({ FENCED_REDIS_URLS: urls }).signingKey).toBeUndefined();
  });

  it('fails start-up naming the variable for a missing, unreadable or wrong key, never echoing it', () => {
    const rsa = path.join(dir, 'rsa.pem');
    writeFileSync(
      rsa,
      generateKeyPairSync('rsa', { modulusLength: 1024 })
        .privateKey.export({ format: 'pem', type: 'pkcs8' })
        .toString(),
    );
    const garbage = path.join(dir, 'garbage.pem');
    writeFileSync(garbage, pem.replace(secretLine, secretLine.split('').reverse().join('')));
    const unreadable = path.join(dir, 'unreadable.pem');
    writeFileSync(unreadable, pem);
    chmodSync(unreadable, 0o000);
    const cases: [Record<string, string>, RegExp][] = [
      [
        { FENCED_SIGNING_KEY_FILE: path.join(dir, 'nope.pem'), FENCED_SIGNING_KEY_ID: 'k' },
        /FENCED_SIGNING_KEY_FILE cannot be read \(.*nope\.pem: ENOENT\)/,
      ],
      [
        { FENCED_SIGNING_KEY_FILE: rsa, FENCED_SIGNING_KEY_ID: 'k' },
        /FENCED_SIGNING_KEY_FILE must be an Ed25519 private key.*got an rsa key/,
      ],
      [
        { FENCED_SIGNING_KEY_FILE: garbage, FENCED_SIGNING_KEY_ID: 'k' },
        /FENCED_SIGNING_KEY_FILE must be an Ed25519 private key.*not one/,
      ],
      [
        { FENCED_SIGNING_KEY: 'not a key', FENCED_SIGNING_KEY_ID: 'k' },
        /FENCED_SIGNING_KEY must be an Ed25519 private key/,
      ],
      [
        { FENCED_SIGNING_KEY_FILE: keyFile },
        /FENCED_SIGNING_KEY_FILE is set, but FENCED_SIGNING_KEY_ID is not/,
      ],
      [{ FENCED_SIGNING_KEY_ID: 'k' }, /FENCED_SIGNING_KEY_ID is set, but no key/],
      [{ FENCED_SIGNING_KEY_FILE: keyFile, FENCED_SIGNING_KEY: pem, FENCED_SIGNING_KEY_ID: 'k' }, /not both/],
      [
        { FENCED_SIGNING_KEY_FILE: keyFile, FENCED_SIGNING_KEY_ID: 'a.b' },
        /FENCED_SIGNING_KEY_ID must be 1 to 64/,
      ],
    ];
    if (process.getuid?.() !== 0)
      cases.push([
        { FENCED_SIGNING_KEY_FILE: unreadable, FENCED_SIGNING_KEY_ID: 'k' },
        /cannot be read \(.*EACCES\)/,
      ]);
    for (const [env, pattern] of cases) {
      const message = error({ FENCED_REDIS_URLS: urls, ...env });
      expect(message).toMatch(pattern);
      expect(message).not.toContain(secretLine);
      expect(message).not.toContain('PRIVATE KEY-----\n');
    }
  });

  it('never prints the key with the configuration', async () => {
    const config = loadConfig({
      FENCED_REDIS_URLS: urls,
      FENCED_SIGNING_KEY_ID: 'k',
      FENCED_SIGNING_KEY_FILE: keyFile,
    });
    const { inspect } = await import('node:util');
    expect(inspect(config, { depth: 5 })).not.toContain(secretLine);
    expect(JSON.stringify(config)).not.toContain(secretLine);
  });
});
