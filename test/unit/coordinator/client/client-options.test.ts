import { InvalidRequestError } from '@fenced/shared';
import { describe, expect, it } from 'vitest';
import { CoordinatorClient, type CoordinatorClientOptions } from '@fenced/coordinator/client';

/** The error of `new CoordinatorClient(options)`, which must be a typed InvalidRequestError. */
function refusal(options: unknown): InvalidRequestError {
  try {
    new CoordinatorClient(options as CoordinatorClientOptions);
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidRequestError);
    return error as InvalidRequestError;
  }
  throw new Error(`accepted ${JSON.stringify(options)}`);
}

describe('CoordinatorClient options, validated at construction', () => {
  it('names baseUrl and what was given when it is missing or not a URL', () => {
    expect(refusal({}).message).toBe(
      "baseUrl must be the http:// or https:// URL of the coordinator service (e.g. 'http://coordinator:8080'), got undefined",
    );
    expect(refusal({ baseUrl: 'coordinator:8080x' }).message).toMatch(
      /^baseUrl must be .* got "coordinator:8080x" \(string\)$/,
    );
    expect(refusal({ baseUrl: 8080 }).message).toMatch(/got 8080 \(number\)$/);
    expect(refusal({ baseUrl: '' }).message).toMatch(/got "" \(string\)$/);
  });

  it('refuses any scheme but http and https, without echoing credentials', () => {
    const error = refusal({ baseUrl: 'redis://:hunter2@127.0.0.1:6379' });
    expect(error.message).toMatch(/^baseUrl must be the http:\/\/ or https:\/\/ URL/);
    expect(error.message).not.toContain('hunter2');
    expect(refusal({ baseUrl: new URL('ftp://127.0.0.1/') }).message).toMatch(/got a URL object$/);
    expect(refusal({ baseUrl: 'file:///tmp/x' }).code).toBe('INVALID_REQUEST');
  });

  it('refuses an unknown option, naming the allowed ones', () => {
    expect(refusal({ baseUrl: 'http://127.0.0.1:8080', apikey: 'k'.repeat(20) }).message).toBe(
      "unknown CoordinatorClient option 'apikey'; did you mean 'apiKey'? (known: apiKey, baseUrl, fetch, maxAttempts, requestTimeoutMs, retryBaseDelayMs, retryMaxDelayMs)",
    );
    expect(refusal(null).message).toBe('CoordinatorClient options must be an object, got null');
  });

  it('refuses bad numbers, keys and fetch functions, naming the option', () => {
    const base = { baseUrl: 'http://127.0.0.1:8080' };
    expect(refusal({ ...base, maxAttempts: 0 }).message).toBe(
      'maxAttempts must be an integer from 1 to 1000, got 0 (number)',
    );
    expect(refusal({ ...base, retryBaseDelayMs: '100' }).message).toMatch(
      /^retryBaseDelayMs must be an integer .* got "100" \(string\)$/,
    );
    expect(refusal({ ...base, requestTimeoutMs: -1 }).message).toMatch(/^requestTimeoutMs must be/);
    expect(refusal({ ...base, apiKey: 'has space' }).message).toMatch(
      /^apiKey must be a non-empty string of visible ASCII/,
    );
    expect(refusal({ ...base, fetch: 'fetch' }).message).toBe(
      'fetch must be a fetch function, got "fetch" (string)',
    );
  });

  it('accepts http and https URLs, strings or URL objects, with the defaults', () => {
    expect(() => new CoordinatorClient({ baseUrl: 'http://127.0.0.1:8080' })).not.toThrow();
    expect(
      () => new CoordinatorClient({ baseUrl: new URL('https://coordinator.internal/prefix') }),
    ).not.toThrow();
    expect(
      () =>
        new CoordinatorClient({
          baseUrl: 'http://[::1]:8080',
          apiKey: 'k'.repeat(24),
          maxAttempts: 1,
          fetch,
        }),
    ).not.toThrow();
  });
});
