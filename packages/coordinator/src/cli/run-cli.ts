import { readFileSync } from 'node:fs';
import { isFencedError } from '@fenced/shared';
import { ExitCode, PROCESS_OUTPUT, type CommandContext, type CommandOutput } from './command-line.js';
import { INSPECT_USAGE, inspectCommand } from './inspect-command.js';
import { KEYGEN_USAGE, keygenCommand } from './keygen-command.js';
import { REPAIR_USAGE, repairCommand } from './repair-command.js';
import { SETTINGS_USAGE, settingsCommand } from './settings-command.js';
import { STATUS_USAGE, statusCommand } from './status-command.js';
import { UsageError } from './usage-error.js';

export const CLI_USAGE = `usage: fenced-coordinator [command] [flags]

commands:
  serve              run the HTTP service (the default when no command is given; needs @fenced/service)
  status             each Redis node: reachable, settings, voting, repair, latency (exit 1 without a quorum)
  inspect <resource> whether a lease is held and its token; with --database-url, the guard's fence
  repair <node>      repair node <index|host:port> that restarted empty, or watch a repair (--watch)
  settings           the cluster's settings recorded on the nodes; settings set max-ttl <ms> changes it
  keygen             make an Ed25519 key pair for signed leases

  -V, --version      print the version of @fenced/coordinator
  -h, --help         this text

Every command takes --help, and (but serve and keygen) --json. The cluster comes from the service's
environment variables (FENCED_REDIS_URLS, FENCED_KEY_PREFIX, ...), each overridable by a flag.`;

const COMMANDS: Record<string, { run: (context: CommandContext) => Promise<number>; usage: string }> = {
  status: { run: statusCommand, usage: STATUS_USAGE },
  inspect: { run: inspectCommand, usage: INSPECT_USAGE },
  repair: { run: repairCommand, usage: REPAIR_USAGE },
  settings: { run: settingsCommand, usage: SETTINGS_USAGE },
  keygen: { run: keygenCommand, usage: KEYGEN_USAGE },
};

/** The version in @fenced/coordinator's package.json (two levels above this file in src/ and in dist/). */
export function packageVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
    version: string;
  };
  return manifest.version;
}

/**
 * Runs the operator command of `argv` (the arguments after `fenced-coordinator`) and returns its exit code, or
 * `'serve'` when the service is to run (no command, or `serve`): the caller then starts it, so that nothing
 * here loads the HTTP stack.
 */
export async function runCli(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>> = process.env,
  output: CommandOutput = PROCESS_OUTPUT,
): Promise<number | 'serve'> {
  const [name, ...rest] = argv;
  if (name === undefined) return 'serve';
  if (name === 'serve') {
    if (rest.length === 0) return 'serve';
    output.err(
      `fenced-coordinator serve takes no arguments (configure it with FENCED_* environment variables; see the README), got ${rest.map((a) => JSON.stringify(a)).join(' ')}`,
    );
    return ExitCode.USAGE;
  }
  if (name === '--version' || name === '-V') {
    if (rest.length > 0) {
      output.err(
        `fenced-coordinator ${name} takes no arguments, got ${rest.map((a) => JSON.stringify(a)).join(' ')}`,
      );
      return ExitCode.USAGE;
    }
    output.out(packageVersion());
    return ExitCode.OK;
  }
  if (name === '--help' || name === '-h' || name === 'help') {
    output.out(CLI_USAGE);
    return ExitCode.OK;
  }
  const command = COMMANDS[name];
  if (command === undefined) {
    output.err(
      `fenced-coordinator: unknown command ${JSON.stringify(name)} (allowed: serve, ${Object.keys(COMMANDS).join(', ')})\n\n${CLI_USAGE}`,
    );
    return ExitCode.USAGE;
  }
  try {
    return await command.run({ argv: rest, env, output });
  } catch (error) {
    if (error instanceof UsageError) {
      output.err(`fenced-coordinator ${name}: ${error.message}\n(see: fenced-coordinator ${name} --help)`);
      return ExitCode.USAGE;
    }
    const message = error instanceof Error ? error.message : String(error);
    output.err(`fenced-coordinator ${name}: ${isFencedError(error) ? `${error.code}: ` : ''}${message}`);
    return ExitCode.FAILED;
  }
}
