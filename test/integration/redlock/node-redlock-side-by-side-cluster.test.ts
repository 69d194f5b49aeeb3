import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster } from 'ioredis';
import NodeRedlock, { ExecutionError as NodeExecutionError } from 'redlock';
import FencedRedlock, { ExecutionError } from '@fenced/redlock';
import { Coordinator } from '@fenced/coordinator';
import { InvalidRequestError } from '@fenced/shared';
import { RedisClusterMember } from '@fenced/test-utils/redis-cluster-member';
import { keysOf, keySlot } from '../../fixtures/keys.js';

// node-redlock v5 and @fenced/redlock side by side on a Redis Cluster member (DESIGN §3c) that a Coordinator on its
// defaults initialized ('fenced' layout). The drop-in holds node-redlock's key (the resource name) beside the
// cluster's 'fenced' record in one script, so the two must share a slot: a plain name does (the record's hash tag is
// the name), a name with its own hash tag or a '{', '}' or '%' does not and is refused by name before anything is
// sent. The node-redlock suite's own cluster runs cover the 'redlock' layout (README).

let member: RedisClusterMember;
const closers: (() => Promise<unknown>)[] = [];

function clusterClient(): Cluster {
  const client = new Cluster(member.masters.map((m) => ({ host: '127.0.0.1', port: m.port })));
  closers.push(() => Promise.resolve(client.disconnect()));
  return client;
}

beforeAll(async () => {
  member = await RedisClusterMember.start({ masters: 3 });
  const coordinator = new Coordinator({ nodes: [member.member] });
  closers.push(() => coordinator.close());
  await coordinator.ready();
}, 120_000);

afterAll(async () => {
  await Promise.all(closers.map((close) => close().catch(() => undefined)));
  await member?.stop();
});

async function refused(acquire: () => Promise<{ release(): Promise<unknown> }>): Promise<boolean> {
  try {
    const lock = await acquire();
    await lock.release();
    return false;
  } catch (error) {
    if (error instanceof ExecutionError || error instanceof NodeExecutionError) return true;
    throw error;
  }
}

describe("on a Redis Cluster member initialized by a Coordinator ('fenced' layout)", () => {
  it('excludes node-redlock in both orders on a name whose key shares the record’s slot', async () => {
    const old = new NodeRedlock([clusterClient()], { retryCount: 0 });
    const fenced = new FencedRedlock([clusterClient()], { retryCount: 0 });
    closers.push(() => fenced.coordinator.close());
    const name = 'account:frank';
    expect(keySlot(name)).toBe(keySlot(keysOf(name).record));

    const oldLock = await old.acquire([name], 30_000);
    expect(await refused(() => fenced.acquire([name], 30_000))).toBe(true);
    await oldLock.release();

    const lock = await fenced.acquire([name], 30_000);
    expect(await clusterClient().get(name)).toBe(lock.value);
    expect(await refused(() => old.acquire([name], 30_000))).toBe(true);
    await lock.release();
    expect(await refused(() => old.acquire([name], 30_000))).toBe(false);
  }, 60_000);

  it('refuses a name whose own hash tag puts node-redlock’s key in another slot, naming it', async () => {
    const fenced = new FencedRedlock([clusterClient()], { retryCount: 0 });
    closers.push(() => fenced.coordinator.close());
    for (const name of ['{account}:frank', 'account%frank']) {
      expect(keySlot(name)).not.toBe(keySlot(keysOf(name).record));
      const error: unknown = await fenced.acquire([name], 30_000).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidRequestError);
      expect((error as Error).message).toContain(`resource "${name}" cannot be locked with holdRedlockKey`);
    }
  }, 60_000);
});
