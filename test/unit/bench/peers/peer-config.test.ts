import { describe, expect, it } from 'vitest';
import {
  etcdInitialCluster,
  etcdMemberArgs,
  etcdMembers,
  parseEtcdRevision,
  parsePgToken,
  parseZxid,
  PeerConfigError,
  sequenceOf,
  zkLockPosition,
  zooConfig,
  zooServers,
} from '../../../../bench/peers/peer-config.js';
import { locateEtcd, locateZookeeper } from '../../../../bench/peers/peer-servers.js';

describe('etcd configuration of the fencing peer', () => {
  const members = etcdMembers(3, [2379, 2380, 2479, 2480, 2579, 2580]);

  it('pairs the ports as client and peer port of each member', () => {
    expect(members).toEqual([
      { name: 'm0', clientPort: 2379, peerPort: 2380 },
      { name: 'm1', clientPort: 2479, peerPort: 2480 },
      { name: 'm2', clientPort: 2579, peerPort: 2580 },
    ]);
    expect(etcdInitialCluster(members)).toBe(
      'm0=http://127.0.0.1:2380,m1=http://127.0.0.1:2480,m2=http://127.0.0.1:2580',
    );
  });

  it('bootstraps each member statically on loopback, with no setting that weakens fsync', () => {
    const args = etcdMemberArgs(members[1]!, members, '/tmp/d/m1', 'tok');
    const option = (name: string): string | undefined => args[args.indexOf(name) + 1];
    expect(option('--name')).toBe('m1');
    expect(option('--data-dir')).toBe('/tmp/d/m1');
    expect(option('--listen-client-urls')).toBe('http://127.0.0.1:2479');
    expect(option('--listen-peer-urls')).toBe('http://127.0.0.1:2480');
    expect(option('--initial-cluster')).toBe(etcdInitialCluster(members));
    expect(option('--initial-cluster-state')).toBe('new');
    expect(option('--initial-cluster-token')).toBe('tok');
    expect(args.some((a) => a.includes('unsafe'))).toBe(false);
    expect(args.filter((a) => a.includes('://')).every((a) => a.includes('127.0.0.1'))).toBe(true);
  });

  it('refuses an even or empty cluster, a wrong port count, repeated or invalid ports, and a stranger', () => {
    expect(() => etcdMembers(2, [1, 2, 3, 4])).toThrow(/odd member count of at least 1, got 2/);
    expect(() => etcdMembers(0, [])).toThrow(PeerConfigError);
    expect(() => etcdMembers(3, [1, 2, 3])).toThrow(/3 etcd members need 6 ports .* got 3/);
    expect(() => etcdMembers(1, [5, 5])).toThrow(/distinct, got 5, 5/);
    expect(() => etcdMembers(1, [0, 5])).toThrow(/TCP port from 1 to 65535, got 0/);
    const stranger = { name: 'x', clientPort: 1, peerPort: 2 };
    expect(() => etcdMemberArgs(stranger, members, '/d', 't')).toThrow(/x is not one of .*m0, m1, m2/);
  });
});

describe('ZooKeeper configuration of the fencing peer', () => {
  const servers = zooServers(3, [2181, 2888, 3888, 2182, 2889, 3889, 2183, 2890, 3890]);

  it('numbers the servers from 1 and gives each its client, quorum and election port', () => {
    expect(servers[2]).toEqual({ id: 3, clientPort: 2183, quorumPort: 2890, electionPort: 3890 });
  });

  it("writes each server's zoo.cfg on loopback: the whole ensemble, every transaction fsynced", () => {
    const lines = zooConfig(servers[1]!, servers, '/tmp/zk/s2/data').split('\n');
    expect(lines).toContain('dataDir=/tmp/zk/s2/data');
    expect(lines).toContain('clientPort=2182');
    expect(lines).toContain('clientPortAddress=127.0.0.1');
    expect(lines).toContain('forceSync=yes');
    expect(lines).toContain('admin.enableServer=false');
    expect(lines.filter((l) => l.startsWith('server.'))).toEqual([
      'server.1=127.0.0.1:2888:3888',
      'server.2=127.0.0.1:2889:3889',
      'server.3=127.0.0.1:2890:3890',
    ]);
    // A lone server is standalone: no server lines.
    const alone = zooServers(1, [2181, 2888, 3888]);
    expect(zooConfig(alone[0]!, alone, '/d').includes('server.')).toBe(false);
  });

  it('refuses an even ensemble, a wrong port count, repeated or invalid ports, a stranger, a bad directory', () => {
    expect(() => zooServers(2, [1, 2, 3, 4, 5, 6])).toThrow(/odd server count of at least 1, got 2/);
    expect(() => zooServers(3, [1, 2, 3])).toThrow(/3 ZooKeeper servers need 9 ports .* got 3/);
    expect(() => zooServers(1, [7, 7, 8])).toThrow(/distinct, got 7, 7, 8/);
    expect(() => zooServers(1, [70_000, 1, 2])).toThrow(/TCP port from 1 to 65535, got 70000/);
    const stranger = { id: 9, clientPort: 1, quorumPort: 2, electionPort: 3 };
    expect(() => zooConfig(stranger, servers, '/d')).toThrow(
      /server 9 is not one of the ensemble's \(1, 2, 3\)/,
    );
    expect(() => zooConfig(servers[0]!, servers, '')).toThrow(/non-empty path on one line/);
    expect(() => zooConfig(servers[0]!, servers, '/d\nforceSync=no')).toThrow(PeerConfigError);
  });
});

describe('tokens read from the peers', () => {
  it('reads an etcd revision exactly, beyond 2^53', () => {
    expect(parseEtcdRevision('42')).toBe(42n);
    expect(parseEtcdRevision('9007199254740993')).toBe(9_007_199_254_740_993n);
    for (const bad of ['0', '-1', '1.5', '', 'abc', 42, null, '12345678901234567890']) {
      expect(() => parseEtcdRevision(bad)).toThrow(/positive decimal int64 string/);
    }
    expect(() => parseEtcdRevision('9223372036854775808')).toThrow(/an int64, got 9223372036854775808/);
  });

  it("reads a czxid from the client's 8 big-endian bytes", () => {
    const bytes = Buffer.alloc(8);
    bytes.writeBigInt64BE((3n << 32n) | 7n);
    expect(parseZxid(bytes)).toBe(12_884_901_895n);
    expect(() => parseZxid(Buffer.alloc(4))).toThrow(/8 big-endian bytes, got 4 bytes/);
    expect(() => parseZxid('0x1')).toThrow(/got string/);
    expect(() => parseZxid(Buffer.alloc(8))).toThrow(/positive, got 0/);
  });

  it('reads a Postgres bigint token from its decimal string', () => {
    expect(parsePgToken('9223372036854775807')).toBe(9_223_372_036_854_775_807n);
    for (const bad of ['0', '-3', 3, undefined, '1e3']) {
      expect(() => parsePgToken(bad)).toThrow(/positive bigint as a decimal string/);
    }
    expect(() => parsePgToken('9999999999999999999')).toThrow(/at most 2\^63 - 1/);
  });
});

describe('the ZooKeeper lock recipe', () => {
  it('reads the sequence ZooKeeper appended', () => {
    expect(sequenceOf('lock-0000000012')).toBe(12);
    expect(() => sequenceOf('lock-12')).toThrow(/ends in 10 digits, got 'lock-12'/);
  });

  it('holds with the lowest sequence, else watches the next lower one (not the lowest)', () => {
    const children = ['lock-0000000007', 'lock-0000000003', 'lock-0000000005'];
    expect(zkLockPosition(children, 'lock-0000000003')).toEqual({ held: true });
    expect(zkLockPosition(children, 'lock-0000000007')).toEqual({ held: false, watch: 'lock-0000000005' });
    expect(zkLockPosition(children, 'lock-0000000005')).toEqual({ held: false, watch: 'lock-0000000003' });
    expect(() => zkLockPosition(children, 'lock-0000000004')).toThrow(/not among the children/);
  });
});

describe('where a peer server is missing', () => {
  it('says in one line what is missing and how to install it', () => {
    const etcd = locateEtcd({ PATH: '/nonexistent' });
    expect(etcd).toEqual({
      missing:
        'etcd not installed (Debian package etcd-server; FENCED_BENCH_PEERS=1 bash scripts/setup.sh installs it)',
    });
    const zookeeper = locateZookeeper(process.env, '/nonexistent/zookeeper.jar');
    expect(zookeeper).toEqual({
      missing:
        'ZooKeeper not installed (Debian package zookeeper; FENCED_BENCH_PEERS=1 bash scripts/setup.sh installs it)',
    });
  });
});
