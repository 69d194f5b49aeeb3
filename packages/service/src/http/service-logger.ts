import { pino, type DestinationStream, type Level, type Logger } from 'pino';

/**
 * Paths redacted from every log line. The service never logs headers, bodies or raw paths in the first
 * place; this is the second line of defence should somebody add a field carrying a lease id or a key.
 */
export const REDACTED_LOG_PATHS: readonly string[] = Object.freeze([
  'leaseId',
  '*.leaseId',
  'lease.id',
  'id',
  'apiKey',
  '*.apiKey',
  'apiKeys',
  '*.apiKeys',
  'authorization',
  '*.authorization',
  'headers',
  '*.headers',
  'url',
  '*.url',
  'path',
  '*.path',
]);

/** Options of {@link createServiceLogger}. */
export interface ServiceLoggerOptions {
  /** @defaultValue 'info' */
  level?: Level | 'silent';
  /** Where the JSON lines go. @defaultValue standard output */
  destination?: DestinationStream;
}

/** `err` of a log line: an Error through pino's serializer, a view that already built (safeError in request-log.ts) as is. */
function serializeError(value: unknown): unknown {
  return value instanceof Error ? pino.stdSerializers.err(value) : value;
}

/**
 * The service's pino logger: JSON lines, redacted, with `service: 'fenced-coordinator'` on every line and `time` in
 * ISO 8601 (UTC), as operators read it.
 */
export function createServiceLogger(options: ServiceLoggerOptions = {}): Logger {
  const settings = {
    level: options.level ?? 'info',
    timestamp: pino.stdTimeFunctions.isoTime,
    // The service logs errors as `err: safeError(error)`, a plain object that already holds the error's real
    // `type` (its name); pino's own serializer would name it after the plain object's constructor ("Object").
    serializers: { err: serializeError },
    base: { service: 'fenced-coordinator' },
    redact: { paths: [...REDACTED_LOG_PATHS], censor: '[redacted]' },
  };
  return options.destination ? pino(settings, options.destination) : pino(settings);
}
