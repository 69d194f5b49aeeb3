import { parseArgs, type ParseArgsConfig } from 'node:util';

/** parseArgs' result for a command's options (strict, positionals allowed and counted by the caller). */
export type CommandLine<T extends CommandOptions> = ReturnType<
  typeof parseArgs<{ options: T; strict: true; allowPositionals: true }>
>;

/** A command's flags, as parseArgs takes them. */
export type CommandOptions = NonNullable<ParseArgsConfig['options']>;
import { UsageError } from './usage-error.js';

/** Where a command writes: stdout for results, stderr for progress and problems. Tests pass their own. */
export interface CommandOutput {
  out(line: string): void;
  err(line: string): void;
}

/** The process's stdout and stderr. */
export const PROCESS_OUTPUT: CommandOutput = {
  out: (line) => process.stdout.write(`${line}\n`),
  err: (line) => process.stderr.write(`${line}\n`),
};

/** What a command runs with: its arguments (after the command name), the environment, and where to write. */
export interface CommandContext {
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly output: CommandOutput;
}

/** Exit codes of the operator commands. */
export const ExitCode = Object.freeze({
  /** Done; for `status`, a quorum of nodes votes. */
  OK: 0,
  /** The command ran but the answer is bad: no quorum votes, a node cannot be reached or repaired. */
  FAILED: 1,
  /** Bad arguments or configuration (the message says what was wrong and what is allowed). */
  USAGE: 2,
} as const);

/**
 * `node:util` parseArgs for one command, strict, with its errors as {@link UsageError}s that say what was given
 * and what is allowed.
 */
export function parseCommandLine<T extends CommandOptions>(
  command: string,
  argv: readonly string[],
  options: T,
  positionals: { min: number; max: number; names: string },
): CommandLine<T> {
  let parsed: CommandLine<T>;
  try {
    parsed = parseArgs({ args: [...argv], options, strict: true, allowPositionals: true });
  } catch (error) {
    const allowed = Object.keys(options)
      .map((name) => `--${name}`)
      .join(', ');
    throw new UsageError(`${(error as Error).message.split('\n')[0]} (allowed: ${allowed})`, command);
  }
  const count = parsed.positionals.length;
  if (count < positionals.min || count > positionals.max) {
    const expected =
      positionals.max === 0
        ? 'no arguments'
        : positionals.min === positionals.max
          ? `exactly ${positionals.names}`
          : `at most ${positionals.names}`;
    throw new UsageError(
      `${command} takes ${expected}, got ${count === 0 ? 'none' : parsed.positionals.map((p) => JSON.stringify(p)).join(' ')}`,
      command,
    );
  }
  return parsed;
}

/** JSON with bigints (tokens) as decimal strings, as on the wire (DESIGN §5). */
export function toJson(value: unknown, indent?: number): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v), indent);
}
