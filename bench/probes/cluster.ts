// `npm run bench:cluster`: Redis Cluster members against standalone members on the same machine (DESIGN §3c;
// docs/cluster.md). Three members either way: three standalone redis-server masters, or three clusters of three
// masters each (nine servers), all with appendonly yes, appendfsync always, noeviction.
//
// Measures, for each layout: uncontended acquire+release cycles per second at concurrency 1, 64 and 256 (each worker
// cycles through its own resources), and the memory per active resource (used_memory summed over every server,
// before and after N resources got a token register). Then, on the cluster layout, the repair time of one shard
// restarted empty while the members hold registers of `--repair-resources` resources spread over every slot: from
// the restart until every slot of that shard votes again, checked register by register against a source.
// Benchmarks measure and never fail on time; the run fails only if the repair fails or loses a register.
import { parseArgs } from 'node:util';
import { Coordinator } from '@fenced/coordinator';
import { Cluster, Redis } from 'ioredis';
import { RedisClusterMember } from '@fenced/test-utils/redis-cluster-member';
import { RedisNode } from '@fenced/test-utils/redis-node';
import { keySlot } from '../../packages/coordinator/src/keys/slots.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '5' },
    'memory-resources': { type: 'string', default: '20000' },
    'repair-resources': { type: 'string', default: '100000' },
  },
});
const SECONDS = Number(values.seconds);
const MEMORY_RESOURCES = Number(values['memory-resources']);
const REPAIR_RESOURCES = Number(values['repair-resources']);
const CONCURRENCY = [1, 64, 256];

async function throughput(coordinator: Coordinator, concurrency: number, tag: string): Promise<number> {
  let cycles = 0;
  const deadline = performance.now() + SECONDS * 1_000;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      for (let i = 0; performance.now() < deadline; i++) {
        const lease = await coordinator.acquire(`${tag}-${worker}-${i % 50}`, { ttlMs: 10_000 });
        await lease.release();
        cycles++;
      }
    }),
  );
  return cycles / SECONDS;
}

async function usedMemory(ports: readonly number[]): Promise<number> {
  let total = 0;
  for (const port of ports) {
    const client = new Redis(port, '127.0.0.1');
    try {
      total += Number(/used_memory:(\d+)/.exec(await client.info('memory'))?.[1] ?? 0);
    } finally {
      client.disconnect();
    }
  }
  return total;
}

async function measure(name: string, nodes: unknown[], ports: number[]): Promise<Record<string, number>> {
  const coordinator = new Coordinator({ nodes: nodes as never, keyPrefix: 'bench' });
  coordinator.on('nodeError', () => undefined);
  await coordinator.ready();
  const result: Record<string, number> = {};
  for (const c of CONCURRENCY) {
    result[`c${c}`] = Math.round(await throughput(coordinator, c, `${name}-c${c}`));
    console.log(`${name}: acquire+release at concurrency ${c}: ${result[`c${c}`]}/s`);
  }
  const before = await usedMemory(ports);
  for (let i = 0; i < MEMORY_RESOURCES; i += 256) {
    await Promise.all(
      Array.from({ length: Math.min(256, MEMORY_RESOURCES - i) }, async (_, j) => {
        const lease = await coordinator.acquire(`${name}-mem-${i + j}`, { ttlMs: 10_000 });
        await lease.release();
      }),
    );
  }
  const after = await usedMemory(ports);
  result.bytesPerResource = Math.round((after - before) / MEMORY_RESOURCES);
  console.log(`${name}: memory per resource (all servers): ${result.bytesPerResource} bytes`);
  await coordinator.close();
  return result;
}

async function repairTime(members: RedisClusterMember[]): Promise<Record<string, number>> {
  const prefix = 'repair';
  const coordinator = new Coordinator({
    nodes: members.map((m) => m.member),
    keyPrefix: prefix,
    tokenRetentionMs: 3_600_000,
  });
  coordinator.on('nodeError', (e) => {
    if (process.env.BENCH_DEBUG) console.log('nodeError', e.node, e.operation, String(e.error));
  });
  await coordinator.ready();
  // Registers of REPAIR_RESOURCES resources on every member, written straight (the state many grants leave).
  const value = (BigInt(Date.now()) << 20n).toString();
  for (const member of members) {
    const raw = new Cluster([{ host: '127.0.0.1', port: member.masters[0]!.port }]);
    for (let i = 0; i < REPAIR_RESOURCES; i += 2_000) {
      await Promise.all(
        Array.from({ length: Math.min(2_000, REPAIR_RESOURCES - i) }, (_, j) =>
          raw.set(`${prefix}:{r${i + j}}:token`, value),
        ),
      );
    }
    raw.disconnect();
  }
  const a = members[0]!;
  const shard = a.masters[1]!;
  const ranges = await a.slotsOf(shard);
  const expected = Array.from({ length: REPAIR_RESOURCES }, (_, i) =>
    keySlot(`${prefix}:{r${i}}:token`),
  ).filter((slot) => ranges.some(([start, end]) => slot >= start && slot <= end)).length;
  const shardStatus = async () =>
    (await coordinator.nodeStatus())[0]!.shards!.find((s) => s.address === `127.0.0.1:${shard.port}`)!;
  const started = performance.now();
  await a.restartShardWithoutData(shard);
  const restarted = performance.now();
  // The coordinator finds the empty slots at its next probe (a vote on one of them would too) and repairs them at
  // once; the time runs from the restart until every slot of the shard votes again.
  let seenEmpty = false;
  for (;;) {
    const target = await shardStatus();
    if (target.votingSlots < target.slots) seenEmpty = true;
    if (seenEmpty && target.votingSlots === target.slots && target.slotsUnderRepair === 0) break;
    if (process.env.BENCH_DEBUG) console.log(JSON.stringify(target));
    if (seenEmpty) await coordinator.repairNode(0).catch((e: unknown) => console.log('repair:', String(e)));
    else await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const repaired = performance.now();
  // Every register of the shard's slots is back on it.
  const direct = new Redis(shard.port, '127.0.0.1');
  let found = 0;
  let cursor = '0';
  do {
    const [next, keys] = await direct.scan(cursor, 'MATCH', `${prefix}:{r*}:token`, 'COUNT', 5_000);
    for (const key of keys) if ((await direct.get(key)) !== value) throw new Error(`${key} lost its value`);
    found += keys.length;
    cursor = next;
  } while (cursor !== '0');
  direct.disconnect();
  if (found !== expected) throw new Error(`${found} registers on the repaired shard, ${expected} expected`);
  await coordinator.close();
  const result = {
    resources: REPAIR_RESOURCES,
    registersRepaired: found,
    restartMs: Math.round(restarted - started),
    repairMs: Math.round(repaired - restarted),
  };
  console.log(
    `cluster: one shard of ${REPAIR_RESOURCES} resources restarted empty: ${found} registers repaired in ${result.repairMs} ms (restart ${result.restartMs} ms)`,
  );
  return result;
}

const repairOnly = process.env.BENCH_REPAIR_ONLY !== undefined;
const standalone = repairOnly ? [] : await Promise.all([0, 1, 2].map(() => RedisNode.start()));
const members: RedisClusterMember[] = [];
try {
  for (let i = 0; i < 3; i++) members.push(await RedisClusterMember.start({ masters: 3 }));
  if (repairOnly) {
    console.log(await repairTime(members));
    process.exit(0);
  }
  const results = {
    standalone: await measure(
      'standalone',
      standalone.map((n) => n.url),
      standalone.map((n) => n.port),
    ),
    cluster: await measure(
      'cluster',
      members.map((m) => m.member),
      members.flatMap((m) => m.masters.map((s) => s.port)),
    ),
    repair: await repairTime(members),
  };
  console.log(JSON.stringify(results, null, 2));
} finally {
  await Promise.allSettled([...standalone.map((n) => n.stop()), ...members.map((m) => m.stop())]);
}
