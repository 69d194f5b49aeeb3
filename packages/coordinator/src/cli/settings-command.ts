import { CLUSTER_FLAGS, CLUSTER_FLAGS_HELP, loadCliConfig } from './cli-config.js';
import { ClusterView, type NodeSettingsView } from './cluster-view.js';
import { ExitCode, parseCommandLine, toJson, type CommandContext } from './command-line.js';
import { UsageError } from './usage-error.js';

export const SETTINGS_USAGE = `usage: fenced-coordinator settings [show] [--json] [cluster flags]
       fenced-coordinator settings set max-ttl <ms> [--json] [cluster flags]

The cluster's settings recorded on the Redis nodes (DESIGN §3): maxTtlMs (the longest lease; the nodes refuse an
acquire or extend above it) and nodeCount (how many nodes the cluster has; a process configured with another
count refuses to start). A fresh cluster records them from the first process that initializes it; every
coordinator compares its configuration with them at start-up and refuses to start when they differ (unless it
runs with FENCED_CLUSTER_SETTINGS=adopt / clusterSettings: 'adopt').

  show                 print each node's recorded settings (the default)
  set max-ttl <ms>     record maxTtlMs = <ms> on every node; needs every node reachable and initialized
                       (run it again once they are: a node that missed it makes coordinators refuse to start)
  --json               one JSON object: { nodes: [{ node, address, state, settings? , error? }] }
  -h, --help           this text

Changing the maximum ttl: (1) run \`settings set max-ttl <ms>\`; (2) restart every coordinator with
FENCED_MAX_TTL_MS=<ms> (or let them adopt it). Leases already granted keep their ttl; from (1) on the nodes refuse
longer ones. Exit code 0 when every node answered, 1 when one did not (or is not initialized), 2 for bad arguments.
${CLUSTER_FLAGS_HELP}`;

/** `fenced-coordinator settings [show | set max-ttl <ms>]`. */
export async function settingsCommand(context: CommandContext): Promise<number> {
  const { values, positionals } = parseCommandLine(
    'settings',
    context.argv,
    { ...CLUSTER_FLAGS, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    { min: 0, max: 3, names: "'show' or 'set max-ttl <ms>'" },
  );
  if (values.help === true) {
    context.output.out(SETTINGS_USAGE);
    return ExitCode.OK;
  }
  const [action = 'show', setting, value] = positionals;
  let fields: Record<string, string> | undefined;
  if (action === 'set') {
    if (setting !== 'max-ttl') {
      throw new UsageError(
        `settings set takes 'max-ttl <ms>', got ${JSON.stringify(setting ?? '')} (allowed: max-ttl)`,
        'settings',
      );
    }
    if (value === undefined || !/^[1-9][0-9]{0,9}$/.test(value) || Number(value) > 2_147_483_647) {
      throw new UsageError(
        `settings set max-ttl takes a positive integer number of ms up to 2147483647, got ${JSON.stringify(value ?? '')}`,
        'settings',
      );
    }
    fields = { maxTtlMs: String(Number(value)) };
  } else if (action !== 'show' || positionals.length > 1) {
    throw new UsageError(
      `settings takes 'show' or 'set max-ttl <ms>', got ${positionals.map((p) => JSON.stringify(p)).join(' ')}`,
      'settings',
    );
  }
  const config = loadCliConfig('settings', values, context.env);
  const view = new ClusterView(config);
  try {
    const nodes = await view.settings(fields === undefined ? 'get' : 'set', fields);
    if (values.json === true) context.output.out(toJson({ nodes }));
    else for (const line of describeSettings(nodes)) context.output.out(line);
    return nodes.every((n) => n.state === 'ok') ? ExitCode.OK : ExitCode.FAILED;
  } finally {
    await view.close();
  }
}

function describeSettings(nodes: readonly NodeSettingsView[]): string[] {
  return nodes.map((n) => {
    const head = `node ${n.node} (${n.address}): `;
    if (n.state === 'error') return `${head}error: ${n.error}`;
    if (n.state === 'not-initialized') return `${head}not initialized (empty or under repair): not written`;
    const entries = Object.entries(n.settings ?? {});
    return (
      head + (entries.length === 0 ? 'no settings recorded' : entries.map(([k, v]) => `${k}=${v}`).join(' '))
    );
  });
}
