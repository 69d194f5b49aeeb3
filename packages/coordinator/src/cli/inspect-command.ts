import { validateResourceName } from '@fenced/shared';
import { CLUSTER_FLAGS, CLUSTER_FLAGS_HELP, loadCliConfig } from './cli-config.js';
import { ClusterView, type NodeLeaseView } from './cluster-view.js';
import { ExitCode, parseCommandLine, toJson, type CommandContext } from './command-line.js';
import { readFence, type FenceReading } from './fence-reader.js';
import { UsageError } from './usage-error.js';

export const INSPECT_USAGE = `usage: fenced-coordinator inspect <resource> [--database-url <url>] [--schema <name>] [--json] [cluster flags]

Whether a quorum of nodes holds a lease on <resource>, and its fencing token (never a lease id), with each
node's view. With a database, also the guard's fence of the resource (its highest committed token and when it
was raised), read through @fenced/guarded-store when that package is installed. Read-only.
Exit code 0 when the quorum answered, 1 when it could not be read, 2 for bad arguments.

  --database-url <url>         FENCED_DATABASE_URL: the guarded store's Postgres (postgres://...)
  --schema <name>              the store's schema (default public; without it, other schemas holding the
                               resource's fence are named too)
  --json                       one JSON object: { resource, held, token?, nodes, fence }
  -h, --help                   this text
${CLUSTER_FLAGS_HELP}`;

/** What `inspect --json` prints (tokens as decimal strings). */
export interface InspectReport {
  readonly resource: string;
  readonly held: boolean;
  readonly token?: bigint;
  readonly nodes: readonly NodeLeaseView[];
  readonly fence: FenceReading;
}

/** `fenced-coordinator inspect <resource>`. */
export async function inspectCommand(context: CommandContext): Promise<number> {
  const { values, positionals } = parseCommandLine(
    'inspect',
    context.argv,
    {
      ...CLUSTER_FLAGS,
      'database-url': { type: 'string' },
      schema: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
    { min: 0, max: 1, names: 'one <resource>' },
  );
  if (values.help === true) {
    context.output.out(INSPECT_USAGE);
    return ExitCode.OK;
  }
  const resource = positionals[0];
  if (resource === undefined) throw new UsageError('inspect needs a <resource>, got none', 'inspect');
  try {
    validateResourceName(resource);
  } catch (error) {
    throw new UsageError(`<resource> ${(error as Error).message}`, 'inspect');
  }
  const schema = values.schema ?? 'public';
  if (!/^[a-z_][a-z0-9_$]{0,62}$/.test(schema)) {
    throw new UsageError(
      `--schema must be a lower-case SQL identifier (letters, digits, _ and $, at most 63), got ${JSON.stringify(schema.slice(0, 80))}`,
      'inspect',
    );
  }
  const databaseUrl = nonEmpty(values['database-url']) ?? nonEmpty(context.env.FENCED_DATABASE_URL);
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    // Not echoed: a database URL carries a password.
    throw new UsageError(
      `${values['database-url'] !== undefined ? '--database-url' : 'FENCED_DATABASE_URL'} must be a postgres:// or postgresql:// URL`,
      'inspect',
    );
  }
  const config = loadCliConfig('inspect', values, context.env);
  const view = new ClusterView(config);
  let lease: Awaited<ReturnType<ClusterView['inspect']>>;
  try {
    lease = await view.inspect(resource);
  } finally {
    await view.close();
  }
  const fence: FenceReading =
    databaseUrl === undefined
      ? {
          checked: false,
          reason: 'no database given (--database-url or FENCED_DATABASE_URL), so the fence was not checked',
        }
      : await readFence(databaseUrl, schema, resource, undefined, values.schema === undefined);
  const report: InspectReport = { resource, ...lease, fence };
  if (values.json === true) context.output.out(toJson(report));
  else for (const line of describeInspect(report)) context.output.out(line);
  return ExitCode.OK;
}

/** The human form of an inspect report. */
export function describeInspect(report: InspectReport): string[] {
  const lines = [
    `resource  ${report.resource}`,
    `held      ${report.held ? 'yes (a quorum of nodes holds a lease)' : 'no'}`,
  ];
  if (report.token !== undefined)
    lines.push(`token     ${report.token} (the lease's fencing token, from a quorum)`);
  for (const node of report.nodes) {
    const what =
      node.state === 'held'
        ? `held${node.token !== undefined ? `, token ${node.token}` : ''}`
        : node.state === 'error'
          ? `no answer: ${node.error ?? 'error'}`
          : node.state;
    lines.push(`  node ${node.node}  ${node.address}  ${what}`);
  }
  const fence = report.fence;
  if (!fence.checked) lines.push(`fence     not checked: ${fence.reason}`);
  else if (fence.fence === null) {
    lines.push(
      fence.migrated === false
        ? `fence     none in schema ${fence.schema}: it has no fence table (the store's schema is another one?)`
        : `fence     none in schema ${fence.schema} (no guarded write reached it yet)`,
    );
    for (const other of fence.elsewhere ?? []) {
      lines.push(
        `          but schema ${other.schema} has one: token ${other.token}, updated ${other.updatedAt.toISOString()} (pass --schema ${other.schema})`,
      );
    }
  } else {
    lines.push(
      `fence     token ${fence.fence.token}, updated ${fence.fence.updatedAt.toISOString()} (schema ${fence.schema})`,
    );
    if (report.token !== undefined && report.token > fence.fence.token) {
      lines.push('          the holder has not fenced in yet (its token is above the fence)');
    } else if (report.token !== undefined && report.token < fence.fence.token) {
      lines.push("          the fence is ABOVE the lease token: this holder's writes will be refused");
    }
  }
  return lines;
}

function nonEmpty(text: string | undefined): string | undefined {
  return text === undefined || text.trim() === '' ? undefined : text.trim();
}
