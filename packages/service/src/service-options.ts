// The service's HTTP options and their defaults, outside http/ so that config.ts and the operator commands can
// read them without loading the HTTP layer (app.ts re-exports them).

/** A pino log level, or `silent`. */
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

/** Every {@link LogLevel}, for validation. */
export const LOG_LEVELS = [
  'fatal',
  'error',
  'warn',
  'info',
  'debug',
  'trace',
  'silent',
] as const satisfies readonly LogLevel[];

/** Bounds the service enforces on requests; they also appear in the OpenAPI document. */
export interface RequestLimits {
  /** Smallest `ttlMs` accepted: below it drift and round trips leave no useful validity. */
  minTtlMs: number;
  /** Largest `ttlMs` accepted (also the coordinator's `maxTtlMs`, which must match the cluster's recorded one). */
  maxTtlMs: number;
  /** Largest `waitMs` accepted: how long one acquire request may wait on the server. */
  maxWaitMs: number;
}

/** Who may call `/healthz`, `/readyz` and `/metrics`. */
export type HealthAuth = 'public' | 'required';

/** Options of the HTTP layer; {@link DEFAULT_APP_OPTIONS} holds their defaults. */
export interface AppOptions extends RequestLimits {
  /**
   * Largest JSON body accepted, in bytes. Lease requests are a few dozen bytes.
   * @defaultValue 16384
   */
  bodyLimitBytes: number;
  /**
   * API keys accepted as `Authorization: Bearer <key>`. Empty: authentication is off.
   * @defaultValue []
   */
  apiKeys: readonly string[];
  /**
   * Whether the health and metrics endpoints need a key too. Public suits probes and scrapers inside a
   * private network; `required` hides node addresses and traffic figures from anyone without a key.
   * @defaultValue 'public'
   */
  healthAuth: HealthAuth;
  /**
   * Level of the access-log line of a successful request. The default keeps successes out of an `info` log,
   * where building and writing a line per request costs more than the rest of the HTTP layer; client errors
   * are logged at `info` and server errors at `warn` whatever this says.
   * @defaultValue 'debug'
   */
  accessLogLevel: LogLevel;
}

/** Defaults of {@link AppOptions}. */
export const DEFAULT_APP_OPTIONS = Object.freeze({
  minTtlMs: 100,
  maxTtlMs: 300_000,
  maxWaitMs: 60_000,
  bodyLimitBytes: 16_384,
  apiKeys: [],
  healthAuth: 'public',
  accessLogLevel: 'debug',
} as const satisfies Required<AppOptions>);
