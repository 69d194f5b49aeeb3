// The start-up check of a Redis Cluster member (DESIGN §3c, "no failover inside a member"): every master's
// persistence and eviction settings, and every replica's cluster-replica-no-failover, on real clusters.
import { afterAll, describe, expect, it } from 'vitest';
import { Coordinator, UnsafeNodeError } from '@fenced/coordinator';
import { RedisClusterMember } from '@fenced/test-utils/redis-cluster-member';

const started: RedisClusterMember[] = [];
afterAll(async () => {
  await Promise.allSettled(started.map((m) => m.stop()));
});

async function member(options: Parameters<typeof RedisClusterMember.start>[0]): Promise<RedisClusterMember> {
  const m = await RedisClusterMember.start(options);
  started.push(m);
  return m;
}

async function readyError(nodes: { cluster: string[] }[], unsafe = false): Promise<unknown> {
  const coordinator = new Coordinator({ nodes, keyPrefix: 'checks', unsafeAllowUnsafeNodes: unsafe });
  coordinator.on('nodeError', () => undefined);
  try {
    await coordinator.ready();
    return undefined;
  } catch (error) {
    return error;
  } finally {
    await coordinator.close();
  }
}

describe('the start-up check of a cluster member', () => {
  it('refuses a member whose replicas may fail over, naming the replica, its shard and the setting', async () => {
    const failover = await member({ masters: 3, replicasPerMaster: 1, replicaNoFailover: 'no' });
    const error = await readyError([failover.member]);
    expect(error).toBeInstanceOf(UnsafeNodeError);
    const message = (error as Error).message;
    for (const replica of failover.replicas) {
      expect(message).toContain(`replica 127.0.0.1:${replica.port} of shard 127.0.0.1:`);
    }
    expect(message).toContain("cluster-replica-no-failover is 'no'; it must be 'yes'");
  }, 120_000);

  it('accepts replicas that never fail over on their own', async () => {
    const steady = await member({ masters: 3, replicasPerMaster: 1, replicaNoFailover: 'yes' });
    expect(await readyError([steady.member])).toBeUndefined();
  }, 120_000);

  it('refuses a member with a master that does not fsync every write, naming the shard and the setting', async () => {
    const everysec = await member({ masters: 3, persistence: 'fsync-everysec' });
    const error = await readyError([everysec.member]);
    expect(error).toBeInstanceOf(UnsafeNodeError);
    for (const master of everysec.masters) {
      expect((error as Error).message).toContain(
        `shard 127.0.0.1:${master.port}: appendfsync is 'everysec'; it must be 'always'`,
      );
    }
    // The development opt-out lets it vote.
    expect(await readyError([everysec.member], true)).toBeUndefined();
  }, 120_000);
});
