/**
 * The settings DESIGN §3 requires of every node, and why:
 * - `appendonly yes` + `appendfsync always`: a promise (token register write) is acknowledged only once it is
 *   on disk, so a crash cannot make a node forget a token it promised (G2);
 * - `maxmemory-policy noeviction`: a register is never evicted to make room;
 * - role `master`: a replica could be promoted after losing writes that were acknowledged to us.
 */
export const REQUIRED_SETTINGS = Object.freeze({
  appendonly: 'yes',
  appendfsync: 'always',
  'maxmemory-policy': 'noeviction',
} as const);

export type CheckedSetting = keyof typeof REQUIRED_SETTINGS;

/** What one node reported about itself. A setting is `undefined` when it could not be read. */
export interface NodeFacts {
  readonly config: Partial<Record<CheckedSetting, string>>;
  readonly role: string | undefined;
}

/** Problems with a node's configuration, each naming the setting, what it is and what it must be. */
export function configProblems(facts: NodeFacts, role: 'master' | 'replica' = 'master'): string[] {
  const problems: string[] = [];
  for (const [setting, required] of Object.entries(REQUIRED_SETTINGS)) {
    const actual = facts.config[setting as CheckedSetting];
    if (actual === undefined) {
      problems.push(`${setting} could not be read (CONFIG GET ${setting} failed); it must be '${required}'`);
    } else if (actual.toLowerCase() !== required) {
      problems.push(`${setting} is '${actual}'; it must be '${required}'`);
    }
  }
  // A Cluster member's replica: its durability is checked like a master's (it may be promoted with what it holds);
  // its role is a replica's by definition (cluster-replica-no-failover is checked beside this).
  if (role === 'replica') return problems;
  if (facts.role === undefined) {
    problems.push(`role could not be read (INFO replication failed); it must be 'master'`);
  } else if (facts.role !== 'master') {
    problems.push(
      `role is '${facts.role}'; it must be 'master' (replicas can be promoted after losing writes)`,
    );
  }
  return problems;
}

/** Reads `role:<value>` from the text of `INFO replication`. */
export function parseRole(info: string): string | undefined {
  const match = /^role:(\S+)/m.exec(info);
  return match?.[1];
}

/** Turns a `CONFIG GET` reply (`[name, value, ...]`) into a map. */
export function parseConfigReply(reply: unknown): Record<string, string> {
  const result: Record<string, string> = {};
  if (!Array.isArray(reply)) return result;
  for (let i = 0; i + 1 < reply.length; i += 2) {
    const name: unknown = reply[i];
    const value: unknown = reply[i + 1];
    if (typeof name === 'string' && typeof value === 'string') result[name.toLowerCase()] = value;
  }
  return result;
}
