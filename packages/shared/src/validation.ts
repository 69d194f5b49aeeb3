import { InvalidRequestError } from './errors.js';

/** Longest string quoted whole in a message; longer ones are cut (a message is read by people). */
const MAX_QUOTED_CHARS = 64;

/**
 * How a rejected value appears in a validation message: its text and its type, so `"1000"` (a string from an
 * environment variable or a JSON body) is never mistaken for `1000` (a number). Strings are JSON-quoted and
 * cut after 64 characters; objects are named by kind, never dumped. Never pass a secret.
 *
 * @example
 * describeValue('1000'); // '"1000" (string)'
 * describeValue(1.5); // '1.5 (number)'
 * describeValue(undefined); // 'undefined'
 */
export function describeValue(value: unknown): string {
  switch (typeof value) {
    case 'string': {
      const text = value.length > MAX_QUOTED_CHARS ? `${value.slice(0, MAX_QUOTED_CHARS)}…` : value;
      return `${JSON.stringify(text)} (string)`;
    }
    case 'number':
      return `${Object.is(value, -0) ? '-0' : String(value)} (number)`;
    case 'bigint':
      return `${value}n (bigint)`;
    case 'boolean':
      return `${value} (boolean)`;
    case 'undefined':
      return 'undefined';
    case 'symbol':
      return `${value.toString()} (symbol)`;
    case 'function':
      return 'a function';
    default: {
      if (value === null) return 'null';
      if (Array.isArray(value)) return `an array of ${value.length}`;
      const kind = (Object.getPrototypeOf(value) as { constructor?: { name?: unknown } } | null)?.constructor
        ?.name;
      return typeof kind === 'string' && kind !== '' && kind !== 'Object' ? `a ${kind} object` : 'an object';
    }
  }
}

/**
 * The error every validator here throws: `<name> must be <expected>, got <value (type)>`.
 * @param name what was wrong: an option, argument, variable or field name.
 * @param expected what is allowed, as a noun phrase (`an integer from 1 to 60000`).
 */
export function invalidValue(name: string, expected: string, value: unknown): InvalidRequestError {
  return new InvalidRequestError(`${name} must be ${expected}, got ${describeValue(value)}`);
}

/** An inclusive range of numbers. */
export interface NumberRange {
  readonly min: number;
  readonly max: number;
}

/**
 * @returns `value` when it is an integer (a `number`) within `range`.
 * @throws InvalidRequestError `<name> must be an integer from <min> to <max>, got <value (type)>`.
 */
export function assertInteger(name: string, value: unknown, range: NumberRange): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < range.min || value > range.max) {
    throw invalidValue(name, `an integer from ${range.min} to ${range.max}`, value);
  }
  return value;
}

/**
 * @returns `value` when it is a finite `number` within `range`.
 * @throws InvalidRequestError `<name> must be a number from <min> to <max>, got <value (type)>`.
 */
export function assertNumber(name: string, value: unknown, range: NumberRange): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < range.min || value > range.max) {
    throw invalidValue(name, `a number from ${range.min} to ${range.max}`, value);
  }
  return value;
}

/**
 * @returns `value` when it is `true` or `false`.
 * @throws InvalidRequestError `<name> must be true or false, got <value (type)>`.
 */
export function assertBoolean(name: string, value: unknown): boolean {
  if (typeof value !== 'boolean') throw invalidValue(name, 'true or false', value);
  return value;
}

/**
 * @returns `value` when it is one of `allowed`.
 * @throws InvalidRequestError `<name> must be one of 'a', 'b', got <value (type)>`.
 */
export function assertOneOf<T extends string>(name: string, value: unknown, allowed: readonly T[]): T {
  if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
    throw invalidValue(name, `one of ${allowed.map((a) => `'${a}'`).join(', ')}`, value);
  }
  return value as T;
}

/**
 * @returns `value` when it is a string matching `pattern`.
 * @param expected what the pattern allows, in words (`a lower-case SQL identifier`).
 * @throws InvalidRequestError `<name> must be <expected>, got <value (type)>`.
 */
export function assertMatches(name: string, value: unknown, pattern: RegExp, expected: string): string {
  if (typeof value !== 'string' || !pattern.test(value)) throw invalidValue(name, expected, value);
  return value;
}

/**
 * The known option `key` most likely stands for, or `undefined`: the same name with the `Ms` unit (`ttl` →
 * `ttlMs`), or the same name in other letter case (`ttlms` → `ttlMs`).
 */
export function suggestOption(key: string, known: Iterable<string>): string | undefined {
  const lower = key.toLowerCase();
  for (const name of known) {
    if (name === key) continue;
    const candidate = name.toLowerCase();
    if (candidate === lower || candidate === `${lower}ms`) return name;
  }
  return undefined;
}

/** ` — did you mean 'ttlMs'?` when {@link suggestOption} has one, else nothing. */
function suggestion(key: string, known: Iterable<string>): string {
  const near = suggestOption(key, known);
  return near === undefined ? '' : `; did you mean '${near}'?`;
}

/**
 * Refuses an option that is not `known` but looks like one that is (`ttl` for `ttlMs`): it would be ignored, and
 * its known twin missing. Other unknown keys pass (callers may spread wider objects into the options).
 * @throws InvalidRequestError naming the option given and the one meant.
 */
export function rejectMisnamedOptions(what: string, options: object, known: readonly string[]): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const near = suggestOption(key, known);
    if (near !== undefined) {
      throw new InvalidRequestError(
        `unknown ${what} option '${key}'${suggestion(key, known)} (known: ${[...known].sort().join(', ')})`,
      );
    }
  }
}

/**
 * The options style of every fenced package: `options` over `defaults`, where an `undefined` property means
 * "use the default" and a property that is neither in `defaults` nor in `required` is refused (a typo must not
 * silently fall back to a default). Validate the result, then freeze it.
 * @param what the options' owner, for the message (`coordinator`, `guarded store`).
 * @param required names of options without a default (they are kept, and not refused as unknown).
 * @throws InvalidRequestError for a non-object or an unknown option.
 */
export function mergeOptions<D extends object>(
  what: string,
  defaults: D,
  options: unknown,
  required: readonly string[] = [],
): D & Record<string, unknown> {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw invalidValue(`${what} options`, 'an object', options);
  }
  const known = new Set([...Object.keys(defaults), ...required]);
  const merged: Record<string, unknown> = { ...(defaults as Record<string, unknown>) };
  for (const [key, value] of Object.entries(options)) {
    if (!known.has(key)) {
      throw new InvalidRequestError(
        `unknown ${what} option '${key}'${suggestion(key, known)} (known: ${[...known].sort().join(', ')})`,
      );
    }
    if (value !== undefined) merged[key] = value;
  }
  return merged as D & Record<string, unknown>;
}
