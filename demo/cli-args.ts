import { parseArgs } from 'node:util';
import { SCENARIOS, selectScenarios } from './scenarios.js';
import { wrapText } from './terminal-report.js';

export type CliCommand =
  | { readonly kind: 'help' }
  | { readonly kind: 'list' }
  | { readonly kind: 'run'; readonly scenarios: readonly string[] };

/** A command line the demo cannot run; the message says what to do instead. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export const HELP = `Usage: npm run demo -- [options]

Shows, with real processes, what a lock alone cannot promise and what fencing tokens add. Each scenario
runs twice: unprotected (plain Redlock + plain UPDATEs), which must lose data, and fenced (@fenced/coordinator
lease + token, guarded writes), which must refuse the stale write and keep the data intact.

Options:
  -s, --scenario NAME
                    run only this scenario (${SCENARIOS.map((s) => s.id).join(', ')}); repeat it or give a
                    comma-separated list, e.g. --scenario F1,F3
  --list            list the scenarios and exit
  -h, --help        show this help and exit

Environment:
  FENCED_REDIS_URLS     use these Redis nodes (scenarios that need fault control on Redis are skipped)
  FENCED_DATABASE_URL   use this Postgres (else the local server, else a throw-away cluster)
  NO_COLOR / FORCE_COLOR  turn colours off / on

Exit status: 0 when every run behaved as expected, 1 when a fenced run let a stale write through or an
unprotected run failed to show the anomaly, 2 for a bad command line, 130 when interrupted.
The HTML report (an SVG timeline per run) is written to demo/out/report.html.`;

/**
 * Parses the demo's command line.
 * @throws UsageError for unknown options, missing values, stray arguments or unknown scenarios.
 */
export function parseCliArgs(argv: readonly string[]): CliCommand {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      options: {
        scenario: { type: 'string', multiple: true, short: 's' },
        list: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    throw new UsageError(
      `${error instanceof Error ? error.message.replace(/\. To specify.*$/s, '') : String(error)}`,
    );
  }
  const { values, positionals } = parsed;
  if (positionals.length > 0)
    throw new UsageError(
      `unexpected argument '${positionals[0]}': name scenarios with --scenario ${positionals[0]}`,
    );
  if (values.help) return { kind: 'help' };
  if (values.list) {
    if (values.scenario) throw new UsageError('--list takes no --scenario');
    return { kind: 'list' };
  }
  const names = (values.scenario ?? []).flatMap((v) => v.split(',')).map((v) => v.trim());
  if (names.some((name) => name === '')) throw new UsageError('--scenario needs a name, e.g. --scenario F1');
  try {
    selectScenarios(names);
  } catch (error) {
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
  return { kind: 'run', scenarios: names };
}

/** The text of `--list`. */
export function scenarioList(width = 100): string {
  return SCENARIOS.map((s) => {
    const needs = s.requires.length > 0 ? ` [needs ${s.requires.join(', ')}]` : '';
    return [`${s.id}  ${s.title} (ttl ${s.ttlMs} ms)${needs}`, ...wrapText(s.story, width - 4, '    ')].join(
      '\n',
    );
  }).join('\n\n');
}
