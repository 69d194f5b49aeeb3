import { InvalidRequestError } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import { loadExampleConfig } from '../../../packages/guarded-store/src/example/index.js';

const URL = 'postgres://postgres@127.0.0.1:5432/postgres';

describe('loadExampleConfig', () => {
  it('reads the environment with defaults and freezes it', () => {
    const config = loadExampleConfig({ FENCED_DATABASE_URL: URL });
    expect(config).toEqual({
      databaseUrl: URL,
      port: 3000,
      schema: 'public',
      protection: 'guarded',
      logLevel: 'info',
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('reads every variable', () => {
    expect(
      loadExampleConfig({
        FENCED_DATABASE_URL: URL,
        PORT: '8081',
        FENCED_SCHEMA: 'demo',
        FENCED_EXAMPLE_PROTECTION: 'reads-outside-guard',
        FENCED_LOG_LEVEL: 'warn',
      }),
    ).toEqual({
      databaseUrl: URL,
      port: 8081,
      schema: 'demo',
      protection: 'reads-outside-guard',
      logLevel: 'warn',
    });
  });

  it.each([
    [{}, 'FENCED_DATABASE_URL'],
    [{ FENCED_DATABASE_URL: 'mysql://x' }, 'FENCED_DATABASE_URL'],
    [{ FENCED_DATABASE_URL: URL, PORT: '0' }, 'PORT'],
    [{ FENCED_DATABASE_URL: URL, PORT: '65536' }, 'PORT'],
    [{ FENCED_DATABASE_URL: URL, PORT: 'http' }, 'PORT'],
    [{ FENCED_DATABASE_URL: URL, FENCED_SCHEMA: 'Bad' }, 'FENCED_SCHEMA'],
    [{ FENCED_DATABASE_URL: URL, FENCED_EXAMPLE_PROTECTION: 'off' }, 'FENCED_EXAMPLE_PROTECTION'],
    [{ FENCED_DATABASE_URL: URL, FENCED_LOG_LEVEL: 'loud' }, 'FENCED_LOG_LEVEL'],
  ])('fails on %j naming %s', (env, variable) => {
    expect(() => loadExampleConfig(env)).toThrow(InvalidRequestError);
    expect(() => loadExampleConfig(env)).toThrow(variable);
  });
});
