import { DEFAULT_COORDINATOR_OPTIONS, type CoordinatorOptions } from '../options.js';
import { UsageError } from './usage-error.js';
import { nodeEntryProblem, parseNodeEntry } from '../nodes/node-address.js';

/**
 * What the operator commands need to reach the cluster: the service's own variables (config.ts), each
 * overridable by a flag. Read here rather than through `loadConfig` so the commands load nothing of the HTTP
 * service (config.ts validates with zod); test/unit/coordinator/cli/operator-cli.test.ts checks
 * that both read the same values from the same environment.
 */
export interface CliConfig {
  /** `--redis-urls` / `FENCED_REDIS_URLS`: the Redis masters, in node order. */
  readonly redisUrls: readonly string[];
  /** `--key-prefix` / `FENCED_KEY_PREFIX`. */
  readonly keyPrefix: string | undefined;
  /** `--node-timeout-ms` / `FENCED_NODE_TIMEOUT_MS`. */
  readonly nodeTimeoutMs: number | undefined;
  /**
   * `--max-ttl-ms` / `FENCED_MAX_TTL_MS`: the max ttl a fresh cluster records; the commands adopt the cluster's
   * recorded one (a repair waits on nothing). Unset: the library's default ({@link DEFAULT_COORDINATOR_OPTIONS}).
   */
  readonly maxTtlMs: number | undefined;
  /** `FENCED_TOKEN_RETENTION_MS`. */
  readonly tokenRetentionMs: number | undefined;
  /** `--unsafe-allow-unsafe-nodes` / `FENCED_UNSAFE_ALLOW_UNSAFE_NODES`. */
  readonly unsafeAllowUnsafeNodes: boolean;
}

/** The flags every cluster command accepts, as `node:util` parseArgs options. */
export const CLUSTER_FLAGS = {
  'redis-urls': { type: 'string' },
  'key-prefix': { type: 'string' },
  'node-timeout-ms': { type: 'string' },
  'max-ttl-ms': { type: 'string' },
  'unsafe-allow-unsafe-nodes': { type: 'boolean' },
} as const;

/** Help text of {@link CLUSTER_FLAGS}. */
export const CLUSTER_FLAGS_HELP = `cluster (flags override the service's environment variables):
  --redis-urls <urls>          FENCED_REDIS_URLS: comma-separated redis:// URLs, in node order (required);
                               a Redis Cluster member is cluster:<url>+<url>+...
  --key-prefix <prefix>        FENCED_KEY_PREFIX (default ${DEFAULT_COORDINATOR_OPTIONS.keyPrefix})
  --node-timeout-ms <ms>       FENCED_NODE_TIMEOUT_MS (default ${DEFAULT_COORDINATOR_OPTIONS.nodeTimeoutMs})
  --max-ttl-ms <ms>            FENCED_MAX_TTL_MS (default ${DEFAULT_COORDINATOR_OPTIONS.maxTtlMs}); the cluster's recorded one wins
  --unsafe-allow-unsafe-nodes  FENCED_UNSAFE_ALLOW_UNSAFE_NODES: let nodes with unsafe settings vote
                               (FENCED_TOKEN_RETENTION_MS is read from the environment too)`;

type Flags = {
  'redis-urls'?: string | undefined;
  'key-prefix'?: string | undefined;
  'node-timeout-ms'?: string | undefined;
  'max-ttl-ms'?: string | undefined;
  'unsafe-allow-unsafe-nodes'?: boolean | undefined;
};

/** Unset and blank mean the same, as in config.ts. */
function setting(flag: string | undefined, env: string | undefined): string | undefined {
  const value = flag ?? env;
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

/**
 * Reads the cluster configuration of `command` from its flags and the environment (flags win).
 * @throws UsageError naming the flag or variable, what it holds and what it allows
 */
export function loadCliConfig(
  command: string,
  flags: Flags,
  env: Readonly<Record<string, string | undefined>>,
): CliConfig {
  const fail = (message: string): never => {
    throw new UsageError(message, command);
  };
  const source = (flag: keyof Flags, variable: string): string =>
    flags[flag] !== undefined ? `--${flag}` : variable;
  const integerOf = (flag: keyof Flags, variable: string, min: number, max: number): number | undefined => {
    const text = setting(flags[flag] as string | undefined, env[variable]);
    if (text === undefined) return undefined;
    const value = Number(text);
    if (!/^[0-9]+$/.test(text) || value < min || value > max) {
      fail(`${source(flag, variable)} must be an integer from ${min} to ${max}, got "${text.slice(0, 40)}"`);
    }
    return value;
  };

  const urlsText = setting(flags['redis-urls'], env.FENCED_REDIS_URLS);
  if (urlsText === undefined) {
    fail('no Redis nodes: set FENCED_REDIS_URLS or pass --redis-urls (comma-separated redis:// URLs)');
  }
  const redisUrls = urlsText!
    .split(',')
    .map((u) => u.trim())
    .filter((u) => u !== '');
  for (const [index, text] of redisUrls.entries()) {
    // The entry is not echoed: it may carry a password.
    const problem = nodeEntryProblem(text);
    if (problem !== undefined) fail(`${source('redis-urls', 'FENCED_REDIS_URLS')} entry ${index} ${problem}`);
  }
  if (redisUrls.length === 0)
    fail(`${source('redis-urls', 'FENCED_REDIS_URLS')} needs at least one redis:// URL`);
  if (new Set(redisUrls).size !== redisUrls.length) {
    fail(`${source('redis-urls', 'FENCED_REDIS_URLS')} must not list a node twice`);
  }

  const keyPrefix = setting(flags['key-prefix'], env.FENCED_KEY_PREFIX);
  if (keyPrefix !== undefined && !/^[A-Za-z0-9_.-]{1,64}$/.test(keyPrefix)) {
    fail(
      `${source('key-prefix', 'FENCED_KEY_PREFIX')} must be 1 to 64 letters, digits, dots, dashes or underscores, got "${keyPrefix.slice(0, 80)}"`,
    );
  }
  const unsafeText =
    flags['unsafe-allow-unsafe-nodes'] === true
      ? 'true'
      : setting(undefined, env.FENCED_UNSAFE_ALLOW_UNSAFE_NODES);
  if (unsafeText !== undefined && !['true', 'false', '1', '0'].includes(unsafeText)) {
    fail(`FENCED_UNSAFE_ALLOW_UNSAFE_NODES must be 'true' or 'false', got "${unsafeText.slice(0, 40)}"`);
  }
  const maxTtlMs = integerOf('max-ttl-ms', 'FENCED_MAX_TTL_MS', 1, 86_400_000);
  const effectiveMaxTtlMs = maxTtlMs ?? DEFAULT_COORDINATOR_OPTIONS.maxTtlMs;
  const tokenRetentionText = setting(undefined, env.FENCED_TOKEN_RETENTION_MS);
  let tokenRetentionMs: number | undefined;
  if (tokenRetentionText !== undefined) {
    tokenRetentionMs = Number(tokenRetentionText);
    if (
      !/^[0-9]+$/.test(tokenRetentionText) ||
      tokenRetentionMs < effectiveMaxTtlMs ||
      tokenRetentionMs > 2_147_483_647
    ) {
      fail(
        `FENCED_TOKEN_RETENTION_MS must be an integer from the max ttl (${effectiveMaxTtlMs}) to 2147483647, got "${tokenRetentionText.slice(0, 40)}"`,
      );
    }
  }
  return Object.freeze({
    redisUrls: Object.freeze(redisUrls),
    keyPrefix,
    nodeTimeoutMs: integerOf('node-timeout-ms', 'FENCED_NODE_TIMEOUT_MS', 1, 60_000),
    maxTtlMs,
    tokenRetentionMs,
    unsafeAllowUnsafeNodes: unsafeText === 'true' || unsafeText === '1',
  });
}

/** The coordinator options of a configuration (as server.ts builds them from the service's). */
export function coordinatorOptionsOf(config: CliConfig): CoordinatorOptions {
  const options: CoordinatorOptions = {
    nodes: config.redisUrls.map((entry, index) => parseNodeEntry(entry, index)),
    // The operator commands grant no leases: they run with whatever the cluster recorded.
    clusterSettings: 'adopt',
    unsafeAllowUnsafeNodes: config.unsafeAllowUnsafeNodes,
  };
  if (config.maxTtlMs !== undefined) options.maxTtlMs = config.maxTtlMs;
  if (config.keyPrefix !== undefined) options.keyPrefix = config.keyPrefix;
  if (config.nodeTimeoutMs !== undefined) options.nodeTimeoutMs = config.nodeTimeoutMs;
  if (config.tokenRetentionMs !== undefined) options.tokenRetentionMs = config.tokenRetentionMs;
  return options;
}
