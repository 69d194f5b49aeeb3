import type { KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describeValue, ed25519PrivateKey, InvalidRequestError, KEY_ID_PATTERN } from '@fenced/shared';
import { z } from 'zod';
import { NODE_ENTRY_FORMS, nodeEntryProblem } from '@fenced/coordinator';
import { DEFAULT_APP_OPTIONS, LOG_LEVELS, type HealthAuth, type LogLevel } from './service-options.js';

export type { LogLevel } from './service-options.js';

/** The coordinator service's process configuration, read once from the environment at start-up. */
export interface ServiceConfig {
  /**
   * `FENCED_REDIS_URLS`: the quorum members, in node order: a standalone master's redis:// URL, or a Redis Cluster
   * member as `cluster:<url>+<url>+...` (seed URLs of its masters).
   */
  readonly redisUrls: readonly string[];
  /** `FENCED_HOST`: interface to listen on. */
  readonly host: string;
  /** `FENCED_PORT`, else `PORT`: 0 picks a free port. */
  readonly port: number;
  /**
   * `FENCED_API_KEYS`: comma-separated bearer keys; none means authentication is off, which the service accepts
   * on a loopback address only, unless {@link ServiceConfig.authOff} says it is on purpose.
   */
  readonly apiKeys: readonly string[];
  /**
   * `FENCED_AUTH=off`: serve without API keys on a non-loopback address, on purpose (a trusted network, a proxy
   * that authenticates). Without it, no keys and a non-loopback `FENCED_HOST` refuse to start.
   */
  readonly authOff: boolean;
  /** `FENCED_HEALTH_AUTH`: whether /healthz, /readyz and /metrics need a key. */
  readonly healthAuth: HealthAuth;
  /** `FENCED_MIN_TTL_MS`. */
  readonly minTtlMs: number;
  /**
   * `FENCED_MAX_TTL_MS`: also the coordinator's `maxTtlMs`. Unset (undefined), the service runs with the cluster's
   * maxTtlMs recorded on the nodes (and a fresh cluster records the coordinator's default, one hour): every product
   * on its defaults works over the same nodes. Set, it must match the recorded one (see FENCED_CLUSTER_SETTINGS).
   */
  readonly maxTtlMs: number | undefined;
  /**
   * `FENCED_CLUSTER_SETTINGS`: the coordinator's `clusterSettings`, when set — `require-match` (refuse to start when
   * FENCED_MAX_TTL_MS differs from the cluster's maxTtlMs recorded on the nodes) or `adopt` (run with the recorded).
   */
  readonly clusterSettings: 'require-match' | 'adopt' | undefined;
  /** `FENCED_MAX_WAIT_MS`. */
  readonly maxWaitMs: number;
  /** `FENCED_BODY_LIMIT_BYTES`. */
  readonly bodyLimitBytes: number;
  /** `FENCED_UNSAFE_ALLOW_UNSAFE_NODES`: skip the Redis persistence checks (development only). */
  readonly unsafeAllowUnsafeNodes: boolean;
  /** `FENCED_KEY_PREFIX`: the coordinator's key prefix, when set. */
  readonly keyPrefix: string | undefined;
  /** `FENCED_NODE_TIMEOUT_MS`: the coordinator's per-node call bound, when set. */
  readonly nodeTimeoutMs: number | undefined;
  /**
   * `FENCED_TOKEN_RETENTION_MS`: the coordinator's `tokenRetentionMs` (how long an idle resource's token register
   * stays before it is folded into the node's floor), when set; at least `FENCED_MAX_TTL_MS`.
   */
  readonly tokenRetentionMs: number | undefined;
  /** `FENCED_LOG_LEVEL`. */
  readonly logLevel: LogLevel;
  /**
   * `FENCED_ACCESS_LOG_LEVEL`: level of the access-log line of a successful request (client errors are logged
   * at `info`, server errors at `warn`). Below `FENCED_LOG_LEVEL`, a success writes nothing.
   */
  readonly accessLogLevel: LogLevel;
  /** `FENCED_SHUTDOWN_GRACE_MS`: how long in-flight requests may finish after SIGTERM/SIGINT. */
  readonly shutdownGraceMs: number;
  /**
   * `FENCED_HEADERS_TIMEOUT_MS`: how long a client may take to send a request's headers; a slower connection is
   * answered 408 and closed.
   */
  readonly headersTimeoutMs: number;
  /**
   * `FENCED_REQUEST_TIMEOUT_MS`: how long a client may take to send a whole request, headers and body (408 and
   * closed after). It bounds receiving only: a waiting acquire, received at once, may then wait its `waitMs`.
   */
  readonly requestTimeoutMs: number;
  /** `FENCED_KEEP_ALIVE_TIMEOUT_MS`: how long an idle keep-alive connection stays open. */
  readonly keepAliveTimeoutMs: number;
  /** `FENCED_MAX_CONNECTIONS`: open connections at most; the service closes further ones at once. */
  readonly maxConnections: number;
  /**
   * `FENCED_STARTUP_TIMEOUT_MS`: how long start-up waits for a quorum of voting nodes (nodes still starting,
   * a fresh cluster being initialized by another instance) before it gives up with the nodes' problems.
   */
  readonly startupTimeoutMs: number;
  /**
   * `FENCED_SIGNING_KEY_ID` with `FENCED_SIGNING_KEY_FILE` (a PEM file) or `FENCED_SIGNING_KEY` (the PEM itself):
   * the coordinator's `signingKey`, so every lease carries a proof (DESIGN §4b). `undefined`: leases are not
   * signed. Never logged; the key object prints without its material.
   */
  readonly signingKey: { readonly id: string; readonly privateKey: KeyObject } | undefined;
}

/** Defaults of the optional variables. */
export const DEFAULT_SERVICE_CONFIG = Object.freeze({
  host: '127.0.0.1',
  port: 8080,
  apiKeys: [],
  authOff: false,
  healthAuth: DEFAULT_APP_OPTIONS.healthAuth,
  minTtlMs: DEFAULT_APP_OPTIONS.minTtlMs,
  maxWaitMs: DEFAULT_APP_OPTIONS.maxWaitMs,
  bodyLimitBytes: DEFAULT_APP_OPTIONS.bodyLimitBytes,
  unsafeAllowUnsafeNodes: false,
  logLevel: 'info',
  accessLogLevel: DEFAULT_APP_OPTIONS.accessLogLevel,
  shutdownGraceMs: 10_000,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 20_000,
  keepAliveTimeoutMs: 5_000,
  maxConnections: 1_000,
  startupTimeoutMs: 30_000,
} as const satisfies Partial<ServiceConfig>);

/** Unset and empty mean the same: compose files and shells often export empty variables. */
const optional = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

function integer(min: number, max: number) {
  return optional.pipe(
    z
      .string()
      .regex(/^[0-9]+$/, { error: `must be an integer from ${min} to ${max}` })
      .transform(Number)
      .pipe(
        z
          .number()
          .int()
          .min(min, { error: `must be an integer from ${min} to ${max}` })
          .max(max, { error: `must be an integer from ${min} to ${max}` }),
      )
      .optional(),
  );
}

const redisUrl = z.string().refine((text) => nodeEntryProblem(text) === undefined, {
  error: `every entry must be ${NODE_ENTRY_FORMS}`,
});

/**
 * The variables the service reads, with their checks. Exported for tests that hold deployment files (the compose
 * file, the Dockerfile) to these names; `loadConfig` is the way to read them.
 */
export const ENV_SCHEMA = z.object({
  FENCED_REDIS_URLS: optional
    .pipe(
      z.string({
        error:
          'is required: comma-separated redis:// URLs of the Redis masters (a Redis Cluster member: cluster:<url>+<url>+...)',
      }),
    )
    .transform((text) =>
      text
        .split(',')
        .map((u) => u.trim())
        .filter((u) => u !== ''),
    )
    .pipe(
      z
        .array(redisUrl)
        .min(1, { error: 'needs at least one redis:// URL' })
        .refine((urls) => new Set(urls).size === urls.length, { error: 'must not list a node twice' }),
    ),
  FENCED_HOST: optional,
  FENCED_PORT: integer(0, 65_535),
  PORT: integer(0, 65_535),
  FENCED_API_KEYS: optional
    .transform((text) =>
      text === undefined
        ? []
        : text
            .split(',')
            .map((k) => k.trim())
            .filter((k) => k !== ''),
    )
    .pipe(
      z.array(
        z.string().regex(/^[\x21-\x7e]{16,512}$/, {
          error: 'every key must be 16 to 512 visible ASCII characters (keys are separated by commas)',
        }),
      ),
    ),
  FENCED_AUTH: optional.pipe(
    z
      .enum(['on', 'off'], {
        error:
          "must be 'off' (serve without API keys on purpose) or 'on' (the default: keys, or loopback only)",
      })
      .optional(),
  ),
  FENCED_HEALTH_AUTH: optional.pipe(
    z.enum(['public', 'required'], { error: "must be 'public' or 'required'" }).optional(),
  ),
  FENCED_MIN_TTL_MS: integer(1, 3_600_000),
  FENCED_MAX_TTL_MS: integer(1, 86_400_000),
  FENCED_MAX_WAIT_MS: integer(0, 3_600_000),
  FENCED_BODY_LIMIT_BYTES: integer(64, 1_048_576),
  FENCED_UNSAFE_ALLOW_UNSAFE_NODES: optional.pipe(
    z.enum(['true', 'false', '1', '0'], { error: "must be 'true' or 'false'" }).optional(),
  ),
  FENCED_KEY_PREFIX: optional.pipe(
    z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/, {
        error: 'must be 1 to 64 letters, digits, dots, dashes or underscores',
      })
      .optional(),
  ),
  FENCED_NODE_TIMEOUT_MS: integer(1, 60_000),
  FENCED_CLUSTER_SETTINGS: optional.pipe(
    z.enum(['require-match', 'adopt'], { error: "must be 'require-match' or 'adopt'" }).optional(),
  ),
  FENCED_TOKEN_RETENTION_MS: integer(1, 2_147_483_647),
  FENCED_LOG_LEVEL: optional.pipe(
    z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }).optional(),
  ),
  FENCED_ACCESS_LOG_LEVEL: optional.pipe(
    z.enum(LOG_LEVELS, { error: `must be one of ${LOG_LEVELS.join(', ')}` }).optional(),
  ),
  FENCED_SHUTDOWN_GRACE_MS: integer(0, 600_000),
  FENCED_HEADERS_TIMEOUT_MS: integer(1, 600_000),
  FENCED_REQUEST_TIMEOUT_MS: integer(1, 600_000),
  FENCED_KEEP_ALIVE_TIMEOUT_MS: integer(1, 600_000),
  FENCED_MAX_CONNECTIONS: integer(1, 1_000_000),
  FENCED_STARTUP_TIMEOUT_MS: integer(0, 3_600_000),
  FENCED_SIGNING_KEY_ID: optional.pipe(
    z.string().regex(KEY_ID_PATTERN, { error: "must be 1 to 64 letters, digits, '-' or '_'" }).optional(),
  ),
  FENCED_SIGNING_KEY_FILE: optional,
  FENCED_SIGNING_KEY: optional,
});

/** A PEM key file is a few hundred bytes; anything far larger is the wrong file. */
const MAX_KEY_FILE_BYTES = 64 * 1024;

/** Variables whose values are secrets or may carry credentials: errors never echo them. */
const SECRET_VARIABLES = new Set(['FENCED_API_KEYS', 'FENCED_REDIS_URLS', 'FENCED_SIGNING_KEY']);

/**
 * Reads the service configuration from an environment (`process.env` in `server.ts`) into a typed, frozen
 * object.
 * @throws InvalidRequestError naming every missing or invalid variable and what it allows.
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>>): ServiceConfig {
  const parsed = ENV_SCHEMA.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => {
      const variable = String(issue.path[0] ?? 'environment');
      const got =
        SECRET_VARIABLES.has(variable) || env[variable] === undefined
          ? ''
          : `, got ${describeValue(env[variable])}`;
      return `${variable} ${issue.message}${got}`;
    });
    throw new InvalidRequestError(`invalid configuration: ${[...new Set(problems)].join('; ')}`);
  }
  const e = parsed.data;
  const d = DEFAULT_SERVICE_CONFIG;
  const config: ServiceConfig = {
    redisUrls: Object.freeze(e.FENCED_REDIS_URLS),
    host: e.FENCED_HOST ?? d.host,
    port: e.FENCED_PORT ?? e.PORT ?? d.port,
    apiKeys: Object.freeze(e.FENCED_API_KEYS),
    authOff: e.FENCED_AUTH === 'off',
    healthAuth: e.FENCED_HEALTH_AUTH ?? d.healthAuth,
    minTtlMs: e.FENCED_MIN_TTL_MS ?? d.minTtlMs,
    maxTtlMs: e.FENCED_MAX_TTL_MS,
    maxWaitMs: e.FENCED_MAX_WAIT_MS ?? d.maxWaitMs,
    bodyLimitBytes: e.FENCED_BODY_LIMIT_BYTES ?? d.bodyLimitBytes,
    unsafeAllowUnsafeNodes:
      e.FENCED_UNSAFE_ALLOW_UNSAFE_NODES === undefined
        ? d.unsafeAllowUnsafeNodes
        : e.FENCED_UNSAFE_ALLOW_UNSAFE_NODES === 'true' || e.FENCED_UNSAFE_ALLOW_UNSAFE_NODES === '1',
    keyPrefix: e.FENCED_KEY_PREFIX,
    nodeTimeoutMs: e.FENCED_NODE_TIMEOUT_MS,
    clusterSettings: e.FENCED_CLUSTER_SETTINGS,
    tokenRetentionMs: e.FENCED_TOKEN_RETENTION_MS,
    logLevel: e.FENCED_LOG_LEVEL ?? d.logLevel,
    accessLogLevel: e.FENCED_ACCESS_LOG_LEVEL ?? d.accessLogLevel,
    shutdownGraceMs: e.FENCED_SHUTDOWN_GRACE_MS ?? d.shutdownGraceMs,
    headersTimeoutMs: e.FENCED_HEADERS_TIMEOUT_MS ?? d.headersTimeoutMs,
    requestTimeoutMs: e.FENCED_REQUEST_TIMEOUT_MS ?? d.requestTimeoutMs,
    keepAliveTimeoutMs: e.FENCED_KEEP_ALIVE_TIMEOUT_MS ?? d.keepAliveTimeoutMs,
    maxConnections: e.FENCED_MAX_CONNECTIONS ?? d.maxConnections,
    startupTimeoutMs: e.FENCED_STARTUP_TIMEOUT_MS ?? d.startupTimeoutMs,
    signingKey: signingKeyFrom(e),
  };
  if (
    config.tokenRetentionMs !== undefined &&
    config.maxTtlMs !== undefined &&
    config.tokenRetentionMs < config.maxTtlMs
  ) {
    throw new InvalidRequestError(
      `invalid configuration: FENCED_TOKEN_RETENTION_MS (${config.tokenRetentionMs}) must be at least FENCED_MAX_TTL_MS (${config.maxTtlMs})`,
    );
  }
  if (config.headersTimeoutMs > config.requestTimeoutMs) {
    throw new InvalidRequestError(
      `invalid configuration: FENCED_HEADERS_TIMEOUT_MS (${config.headersTimeoutMs}) must not exceed FENCED_REQUEST_TIMEOUT_MS (${config.requestTimeoutMs}): the headers are part of the request`,
    );
  }
  checkExposure(config);
  if (config.maxTtlMs !== undefined && config.minTtlMs > config.maxTtlMs) {
    throw new InvalidRequestError(
      `invalid configuration: FENCED_MIN_TTL_MS (${config.minTtlMs}) must not exceed FENCED_MAX_TTL_MS (${config.maxTtlMs})`,
    );
  }
  return Object.freeze(config);
}

/**
 * Whether `host` is a loopback address (127.0.0.0/8, ::1, `localhost`): only this machine can connect.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^(::ffff:)?127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * Secure by default, as Redis's protected mode is: without API keys the service listens on a loopback address
 * only, unless `FENCED_AUTH=off` says that serving everyone who reaches it is on purpose.
 * @throws InvalidRequestError saying what was found and the three ways out
 */
export function checkExposure(config: Pick<ServiceConfig, 'host' | 'apiKeys' | 'authOff'>): void {
  if (config.authOff && config.apiKeys.length > 0) {
    throw new InvalidRequestError(
      'invalid configuration: FENCED_AUTH is off but FENCED_API_KEYS is set: remove one of them',
    );
  }
  if (config.apiKeys.length > 0 || config.authOff || isLoopbackHost(config.host)) return;
  throw new InvalidRequestError(
    `invalid configuration: no API key (FENCED_API_KEYS is empty) and FENCED_HOST=${config.host} is not a loopback ` +
      'address: anyone who reaches the service could take, extend and release leases. Set FENCED_API_KEYS ' +
      '(e.g. $(openssl rand -hex 24)), listen on 127.0.0.1, or set FENCED_AUTH=off to serve without ' +
      'authentication on purpose',
  );
}

/**
 * The signing key of `FENCED_SIGNING_KEY_ID` + `FENCED_SIGNING_KEY_FILE` (or `FENCED_SIGNING_KEY`), validated
 * here so that a bad key stops start-up with the variable's name. Messages name the file, never its content.
 */
function signingKeyFrom(e: {
  FENCED_SIGNING_KEY_ID?: string | undefined;
  FENCED_SIGNING_KEY_FILE?: string | undefined;
  FENCED_SIGNING_KEY?: string | undefined;
}): ServiceConfig['signingKey'] {
  const id = e.FENCED_SIGNING_KEY_ID;
  const file = e.FENCED_SIGNING_KEY_FILE;
  const inline = e.FENCED_SIGNING_KEY;
  const fail = (message: string): never => {
    throw new InvalidRequestError(`invalid configuration: ${message}`);
  };
  if (file !== undefined && inline !== undefined) {
    fail('set FENCED_SIGNING_KEY_FILE or FENCED_SIGNING_KEY, not both');
  }
  const variable = file !== undefined ? 'FENCED_SIGNING_KEY_FILE' : 'FENCED_SIGNING_KEY';
  if (file === undefined && inline === undefined) {
    if (id !== undefined)
      fail('FENCED_SIGNING_KEY_ID is set, but no key: set FENCED_SIGNING_KEY_FILE to its PEM file');
    return undefined;
  }
  if (id === undefined) {
    fail(`${variable} is set, but FENCED_SIGNING_KEY_ID is not: name the key (the id stores verify it by)`);
  }
  let pem: string;
  if (file !== undefined) {
    try {
      const bytes = readFileSync(file);
      if (bytes.length > MAX_KEY_FILE_BYTES)
        fail(`FENCED_SIGNING_KEY_FILE ${file} is ${bytes.length} bytes: not a PEM key file`);
      pem = bytes.toString('utf8');
    } catch (error) {
      if (error instanceof InvalidRequestError) throw error;
      const code = (error as { code?: unknown }).code;
      return fail(
        `FENCED_SIGNING_KEY_FILE cannot be read (${file}: ${typeof code === 'string' ? code : 'error'})`,
      );
    }
  } else {
    pem = inline!;
  }
  try {
    return Object.freeze({ id: id!, privateKey: ed25519PrivateKey(pem, variable) });
  } catch (error) {
    return fail(
      `${(error as Error).message}${file !== undefined ? ` (file ${file})` : ''}; generate one with fenced-coordinator keygen --out <dir>`,
    );
  }
}
