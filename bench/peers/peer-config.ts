// Pure parts of the fencing peers (bench/peers/fencing-peers.ts): the servers' command lines and configuration
// files, and the tokens read from their replies. No I/O here, so the unit tests cover all of it.

/** The fencing peers, in the order their columns appear after the Redis libraries. */
export const PEER_NAMES = ['etcd', 'zookeeper', 'postgres-lease', 'redis-incr'] as const;
export type PeerName = (typeof PEER_NAMES)[number];

/** A bad argument to a peer's configuration or a reply that is not a token: what was wrong, given, allowed. */
export class PeerConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PeerConfigError';
  }
}

const INT64_MAX = 2n ** 63n - 1n;

/** One etcd member on loopback: its name, client port and peer port. */
export interface EtcdMember {
  readonly name: string;
  readonly clientPort: number;
  readonly peerPort: number;
}

function checkPort(what: string, port: number): void {
  if (!Number.isInteger(port) || port < 1 || port > 65_535) {
    throw new PeerConfigError(`${what} must be a TCP port from 1 to 65535, got ${String(port)}`);
  }
}

/**
 * The members of an etcd cluster of `size` on loopback, from the ports given (two per member: client, peer).
 * etcd's clustering guide recommends an odd member count; the bench uses 3.
 */
export function etcdMembers(size: number, ports: readonly number[]): EtcdMember[] {
  if (!Number.isInteger(size) || size < 1 || size % 2 === 0) {
    throw new PeerConfigError(`an etcd cluster needs an odd member count of at least 1, got ${String(size)}`);
  }
  if (ports.length !== size * 2) {
    throw new PeerConfigError(
      `${size} etcd members need ${size * 2} ports (client, peer each), got ${ports.length}`,
    );
  }
  if (new Set(ports).size !== ports.length) {
    throw new PeerConfigError(`etcd ports must be distinct, got ${ports.join(', ')}`);
  }
  return Array.from({ length: size }, (_, i) => {
    const member = { name: `m${i}`, clientPort: ports[i * 2]!, peerPort: ports[i * 2 + 1]! };
    checkPort(`etcd member ${member.name}'s client port`, member.clientPort);
    checkPort(`etcd member ${member.name}'s peer port`, member.peerPort);
    return member;
  });
}

/** `--initial-cluster` of a static bootstrap: every member's name and peer URL. */
export function etcdInitialCluster(members: readonly EtcdMember[]): string {
  return members.map((m) => `${m.name}=http://127.0.0.1:${m.peerPort}`).join(',');
}

/**
 * The command-line arguments of one member: static bootstrap on loopback, with etcd's defaults for everything
 * that decides durability (every write fsynced to the WAL on a quorum before it is acknowledged; etcd has no
 * setting that turns that off short of `--unsafe-no-fsync`, which is not used).
 */
export function etcdMemberArgs(
  member: EtcdMember,
  members: readonly EtcdMember[],
  dataDir: string,
  clusterToken: string,
): string[] {
  if (!members.some((m) => m.name === member.name)) {
    throw new PeerConfigError(
      `etcd member ${member.name} is not one of the cluster's members (${members.map((m) => m.name).join(', ')})`,
    );
  }
  return [
    '--name',
    member.name,
    '--data-dir',
    dataDir,
    '--listen-client-urls',
    `http://127.0.0.1:${member.clientPort}`,
    '--advertise-client-urls',
    `http://127.0.0.1:${member.clientPort}`,
    '--listen-peer-urls',
    `http://127.0.0.1:${member.peerPort}`,
    '--initial-advertise-peer-urls',
    `http://127.0.0.1:${member.peerPort}`,
    '--initial-cluster',
    etcdInitialCluster(members),
    '--initial-cluster-token',
    clusterToken,
    '--initial-cluster-state',
    'new',
    '--log-level',
    'error',
  ];
}

/** One server of a ZooKeeper ensemble on loopback: its id (myid) and its client, quorum and election ports. */
export interface ZooServer {
  readonly id: number;
  readonly clientPort: number;
  readonly quorumPort: number;
  readonly electionPort: number;
}

/**
 * The servers of a ZooKeeper ensemble of `size` on loopback, from the ports given (three per server: client,
 * quorum, election). ZooKeeper's administrator's guide asks for an odd ensemble of at least three for a
 * reliable service; the bench uses 3.
 */
export function zooServers(size: number, ports: readonly number[]): ZooServer[] {
  if (!Number.isInteger(size) || size < 1 || size % 2 === 0) {
    throw new PeerConfigError(
      `a ZooKeeper ensemble needs an odd server count of at least 1, got ${String(size)}`,
    );
  }
  if (ports.length !== size * 3) {
    throw new PeerConfigError(
      `${size} ZooKeeper servers need ${size * 3} ports (client, quorum, election each), got ${ports.length}`,
    );
  }
  if (new Set(ports).size !== ports.length) {
    throw new PeerConfigError(`ZooKeeper ports must be distinct, got ${ports.join(', ')}`);
  }
  return Array.from({ length: size }, (_, i) => {
    const server = {
      id: i + 1,
      clientPort: ports[i * 3]!,
      quorumPort: ports[i * 3 + 1]!,
      electionPort: ports[i * 3 + 2]!,
    };
    for (const [what, port] of Object.entries(server)) {
      if (what !== 'id') checkPort(`ZooKeeper server ${server.id}'s ${what}`, port);
    }
    return server;
  });
}

/**
 * zoo.cfg of one server of the ensemble on loopback: the sample configuration's tickTime, initLimit and
 * syncLimit, `forceSync=yes` (the default, written out: every transaction is fsynced before it is acknowledged),
 * every server of the ensemble, and the admin server off (it would take port 8080). Its `myid` file holds its id.
 */
export function zooConfig(server: ZooServer, servers: readonly ZooServer[], dataDir: string): string {
  if (!servers.some((s) => s.id === server.id)) {
    throw new PeerConfigError(
      `ZooKeeper server ${server.id} is not one of the ensemble's (${servers.map((s) => s.id).join(', ')})`,
    );
  }
  if (dataDir.length === 0 || /[\n\r]/.test(dataDir)) {
    throw new PeerConfigError(`ZooKeeper dataDir must be a non-empty path on one line, got '${dataDir}'`);
  }
  return [
    'tickTime=2000',
    'initLimit=10',
    'syncLimit=5',
    `dataDir=${dataDir}`,
    `clientPort=${server.clientPort}`,
    'clientPortAddress=127.0.0.1',
    'forceSync=yes',
    'maxClientCnxns=0',
    'admin.enableServer=false',
    '4lw.commands.whitelist=ruok,srvr',
    ...(servers.length > 1
      ? servers.map((s) => `server.${s.id}=127.0.0.1:${s.quorumPort}:${s.electionPort}`)
      : []),
    '',
  ].join('\n');
}

/**
 * The etcd token: the key's create revision, which etcd3 gives as a decimal string (int64 in JSON). Exact as a
 * bigint; a reply that is not a positive integer is refused.
 */
export function parseEtcdRevision(revision: unknown): bigint {
  if (typeof revision !== 'string' || !/^[1-9]\d{0,18}$/.test(revision)) {
    throw new PeerConfigError(
      `an etcd revision is a positive decimal int64 string, got ${JSON.stringify(revision) ?? String(revision)}`,
    );
  }
  const value = BigInt(revision);
  if (value > INT64_MAX) throw new PeerConfigError(`an etcd revision is an int64, got ${revision}`);
  return value;
}

/**
 * The ZooKeeper token: a node's czxid, which node-zookeeper-client gives as 8 big-endian bytes (a Java long).
 * A zxid is epoch << 32 | counter; it is positive once anything was written.
 */
export function parseZxid(bytes: unknown): bigint {
  if (!(bytes instanceof Uint8Array) || bytes.length !== 8) {
    const given = bytes instanceof Uint8Array ? `${bytes.length} bytes` : typeof bytes;
    throw new PeerConfigError(`a ZooKeeper zxid is 8 big-endian bytes, got ${given}`);
  }
  const value = Buffer.from(bytes.buffer, bytes.byteOffset, 8).readBigInt64BE(0);
  if (value <= 0n) throw new PeerConfigError(`a ZooKeeper czxid is positive, got ${value}`);
  return value;
}

/** The sequence number ZooKeeper appends to an EPHEMERAL_SEQUENTIAL node's name (10 digits). */
export function sequenceOf(name: string): number {
  const match = /(\d{10})$/.exec(name);
  if (match === null) {
    throw new PeerConfigError(`a sequential ZooKeeper node's name ends in 10 digits, got '${name}'`);
  }
  return Number(match[1]);
}

/**
 * The lock recipe's decision from the children of a resource's lock node: whether `own` is the lowest sequence
 * (then it holds the lock), and otherwise the child just before it (the one to watch, so a release wakes only
 * the next waiter).
 */
export function zkLockPosition(
  children: readonly string[],
  own: string,
): { held: true } | { held: false; watch: string } {
  if (!children.includes(own)) {
    throw new PeerConfigError(`own lock node '${own}' is not among the children (${children.join(', ')})`);
  }
  const ownSequence = sequenceOf(own);
  let previous: { name: string; sequence: number } | undefined;
  for (const child of children) {
    const sequence = sequenceOf(child);
    if (sequence < ownSequence && (previous === undefined || sequence > previous.sequence)) {
      previous = { name: child, sequence };
    }
  }
  return previous === undefined ? { held: true } : { held: false, watch: previous.name };
}

/** The Postgres token: the lease row's bigint counter, which node-postgres gives as a decimal string. */
export function parsePgToken(token: unknown): bigint {
  if (typeof token !== 'string' || !/^[1-9]\d{0,18}$/.test(token)) {
    throw new PeerConfigError(
      `a Postgres lease token is a positive bigint as a decimal string, got ${JSON.stringify(token) ?? String(token)}`,
    );
  }
  const value = BigInt(token);
  if (value > INT64_MAX) throw new PeerConfigError(`a Postgres bigint is at most 2^63 - 1, got ${token}`);
  return value;
}
