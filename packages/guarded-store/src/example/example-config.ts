import { InvalidRequestError } from '@fenced/shared';
import { z } from 'zod';
import { SCHEMA_NAME } from '../options.js';
import type { ExampleProtection } from './create-example-app.js';

/** The example server's process configuration, read once from the environment. */
export interface ExampleConfig {
  /** FENCED_DATABASE_URL (required). */
  readonly databaseUrl: string;
  /** PORT, default 3000. */
  readonly port: number;
  /** FENCED_SCHEMA, default 'public': the store's and the example's tables. */
  readonly schema: string;
  /** FENCED_EXAMPLE_PROTECTION, default 'guarded' (negative controls: 'reads-outside-guard', 'unguarded'). */
  readonly protection: ExampleProtection;
  /** FENCED_LOG_LEVEL, default 'info'. */
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

const envSchema = z.object({
  FENCED_DATABASE_URL: z
    .string({ error: 'FENCED_DATABASE_URL is required (postgres://user@host:port/database)' })
    .regex(/^postgres(ql)?:\/\/\S+$/, {
      error: 'FENCED_DATABASE_URL must be a postgres:// or postgresql:// URL',
    }),
  PORT: z
    .string()
    .regex(/^[1-9][0-9]{0,4}$/, { error: 'PORT must be a port number from 1 to 65535' })
    .transform(Number)
    .refine((port) => port <= 65_535, { error: 'PORT must be a port number from 1 to 65535' })
    .default(3000),
  FENCED_SCHEMA: z
    .string()
    .regex(SCHEMA_NAME, { error: 'FENCED_SCHEMA must be a lower-case SQL identifier ([a-z_][a-z0-9_]*)' })
    .default('public'),
  FENCED_EXAMPLE_PROTECTION: z
    .enum(['guarded', 'reads-outside-guard', 'unguarded'], {
      error: "FENCED_EXAMPLE_PROTECTION must be 'guarded', 'reads-outside-guard' or 'unguarded'",
    })
    .default('guarded'),
  FENCED_LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
      error: 'FENCED_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent',
    })
    .default('info'),
});

/**
 * Reads and validates the example server's environment.
 * @throws InvalidRequestError naming the first missing or invalid variable.
 */
export function loadExampleConfig(env: NodeJS.ProcessEnv): ExampleConfig {
  const present = Object.fromEntries(
    Object.entries(env).filter(([, value]) => value !== undefined && value !== ''),
  );
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    throw new InvalidRequestError(parsed.error.issues[0]?.message ?? 'invalid environment');
  }
  const e = parsed.data;
  return Object.freeze({
    databaseUrl: e.FENCED_DATABASE_URL,
    port: e.PORT,
    schema: e.FENCED_SCHEMA,
    protection: e.FENCED_EXAMPLE_PROTECTION,
    logLevel: e.FENCED_LOG_LEVEL,
  });
}
