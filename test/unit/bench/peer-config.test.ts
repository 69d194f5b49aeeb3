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
} from '../../../bench/peers/peer-config.js';
import { locateEtcd, locateZookeeper } from '../../../bench/peers/peer-servers.js';

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
  it('writes a standalone zoo.cfg on loopback that fsyncs every transaction', () => {
    const lines = zooConfig('/tmp/zk/data', 2181).split('\n');
    expect(lines).toContain('dataDir=/tmp/zk/data');
    expect(lines).toContain('clientPort=2181');
    expect(lines).toContain('clientPortAddress=127.0.0.1');
    expect(lines).toContain('forceSync=yes');
    expect(lines).toContain('admin.enableServer=false');
    expect(lines.some((l) => l.startsWith('server.'))).toBe(false);
  });

  it('refuses a bad port or data directory', () => {
    expect(() => zooConfig('/d', 70_000)).toThrow(/TCP port from 1 to 65535, got 70000/);
    expect(() => zooConfig('', 2181)).toThrow(/non-empty path on one line/);
    expect(() => zooConfig('/d\nforceSync=no', 2181)).toThrow(PeerConfigError);
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
