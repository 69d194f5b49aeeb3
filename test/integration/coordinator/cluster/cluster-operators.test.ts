// Redis Cluster members (DESIGN §3c) through the operators' tools: the service reads them from FENCED_REDIS_URLS
// (`cluster:<url>+<url>`), serves leases and tokens over HTTP and shows each member's shards in /metrics; the real
// `fenced-coordinator status` command prints them. Three local 3-shard clusters, no replicas.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisClusterMember } from '@fenced/test-utils/redis-cluster-member';
import { startTestService, type TestService } from '../../../fixtures/service-fixture.js';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const BIN = path.join(ROOT, 'packages/coordinator/src/bin/fenced-coordinator.ts');
const PREFIX = 'ops';

const members: RedisClusterMember[] = [];
let service: TestService;

beforeAll(async () => {
  for (let i = 0; i < 3; i++) members.push(await RedisClusterMember.start({ masters: 3 }));
  service = await startTestService(
    members.map((m) => m.envForm),
    { FENCED_MAX_TTL_MS: '5000', FENCED_KEY_PREFIX: PREFIX },
  );
}, 180_000);

afterAll(async () => {
  await service?.close();
  await Promise.allSettled(members.map((m) => m.stop()));
});

function status(args: string[]): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--conditions=@fenced/source', '--import', 'tsx', BIN, 'status', ...args],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          FENCED_REDIS_URLS: members.map((m) => m.envForm).join(','),
          FENCED_KEY_PREFIX: PREFIX,
        },
        timeout: 120_000,
      },
      (error, stdout) => resolve({ code: error === null ? 0 : Number(error.code ?? -1), stdout }),
    );
  });
}

describe('cluster members through the service and the CLI', () => {
  it('grants leases with rising tokens over HTTP', async () => {
    let last = 0n;
    for (const resource of ['ops-a', 'ops-b', 'ops-c', 'ops-d']) {
      const granted = await service.call(`/v1/locks/${resource}/leases`, {
        method: 'POST',
        json: { ttlMs: 2_000 },
      });
      expect(granted.status).toBe(201);
      const body = granted.body as { leaseId: string; token: string };
      expect(BigInt(body.token) > last).toBe(true);
      last = BigInt(body.token);
      const released = await service.call(`/v1/locks/${resource}/leases/${body.leaseId}`, {
        method: 'DELETE',
      });
      expect(released.status).toBeLessThan(300);
    }
  });

  it("shows each member's shards in /metrics", async () => {
    const text = (await service.call('/metrics')).text;
    for (const [node, member] of members.entries()) {
      for (const master of member.masters) {
        const labels = `node="${node}",address="cluster(${member.urls.map((u) => new URL(u).host).join(',')})",shard="127.0.0.1:${master.port}"`;
        expect(text).toContain(`fenced_node_shard_up{${labels}} 1`);
        const slots = Number(
          new RegExp(`fenced_node_shard_slots\\{${escape(labels)}\\} (\\d+)`).exec(text)?.[1],
        );
        expect(slots).toBeGreaterThan(5000);
        expect(text).toContain(`fenced_node_shard_slots_voting{${labels}} ${slots}`);
        expect(text).toContain(`fenced_node_shard_slots_under_repair{${labels}} 0`);
      }
    }
    expect(text).toMatch(/^fenced_voting_nodes 3$/m);
  });

  it('prints every shard in `fenced-coordinator status`', async () => {
    const human = await status([]);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain('3 of 3 nodes vote');
    for (const member of members) {
      for (const master of member.masters) {
        expect(human.stdout).toMatch(
          new RegExp(`shard 127\\.0\\.0\\.1:${master.port}  up, \\d+ slots voting`),
        );
      }
    }
    const json = JSON.parse((await status(['--json'])).stdout) as {
      nodes: { shards: { up: boolean; slots: number; votingSlots: number }[] }[];
    };
    expect(json.nodes.map((n) => n.shards.length)).toEqual([3, 3, 3]);
    expect(json.nodes.every((n) => n.shards.reduce((sum, s) => sum + s.votingSlots, 0) === 16384)).toBe(true);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
