import { loadConfig } from '../../../packages/service/src/config.js';
import { createServiceLogger } from '../../../packages/service/src/http/service-logger.js';
import { startServer, type RunningServer } from '../../../packages/service/src/server.js';

/** A running coordinator service on an ephemeral loopback port, with its log lines captured. */
export interface TestService extends RunningServer {
  /** Every log line written so far (JSON text). */
  readonly logs: string[];
  /** `fetch` against the service: `path` is appended to its URL. */
  call(path: string, init?: RequestInit & { json?: unknown; apiKey?: string }): Promise<TestResponse>;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON, or the raw text when the body is not JSON, or null when empty. */
  body: unknown;
  text: string;
}

/**
 * Starts the service the way `server.ts` does in production — configuration through `loadConfig` from an
 * environment, the real Coordinator, real Redis — but on port 0 and logging into memory.
 */
export async function startTestService(
  redisUrls: readonly string[],
  env: Record<string, string> = {},
): Promise<TestService> {
  const logs: string[] = [];
  const config = loadConfig({
    FENCED_REDIS_URLS: redisUrls.join(','),
    FENCED_HOST: '127.0.0.1',
    FENCED_PORT: '0',
    FENCED_LOG_LEVEL: 'info',
    // Every request's line, successes included, so the tests that look for secrets in the logs see them all.
    FENCED_ACCESS_LOG_LEVEL: 'info',
    FENCED_SHUTDOWN_GRACE_MS: '5000',
    ...env,
  });
  const logger = createServiceLogger({
    level: config.logLevel,
    destination: { write: (line: string) => void logs.push(line) },
  });
  const server = await startServer(config, { logger, collectProcessMetrics: false });
  return {
    ...server,
    close: () => server.close(),
    logs,
    call: async (path, init = {}) => {
      const { json, apiKey, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (json !== undefined) headers.set('content-type', 'application/json');
      if (apiKey !== undefined) headers.set('authorization', `Bearer ${apiKey}`);
      const response = await fetch(`${server.url}${path}`, {
        ...rest,
        headers,
        ...(json !== undefined ? { body: JSON.stringify(json) } : {}),
      });
      const text = await response.text();
      let body: unknown = null;
      if (text !== '') {
        try {
          body = JSON.parse(text) as unknown;
        } catch {
          body = text;
        }
      }
      return { status: response.status, headers: response.headers, body, text };
    },
  };
}

/** A resource name no other test uses. */
let counter = 0;
export function uniqueResource(label: string): string {
  counter += 1;
  return `http-test/${label}/${process.pid}-${Date.now().toString(36)}-${counter}`;
}

export function lockPath(resource: string, ...rest: string[]): string {
  return ['/v1/locks', encodeURIComponent(resource), ...rest].join('/');
}

/** Polls `check` until it returns true, failing after `timeoutMs` (a liveness bound, not a timing assertion). */
export async function eventually(
  check: () => Promise<boolean>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (performance.now() > deadline) throw new Error(`${what} did not hold within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
