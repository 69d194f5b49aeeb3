// The per-node gauges of /metrics follow real nodes: a paused node (SIGSTOP) goes down and stops voting, and
// comes back once it resumes. No timing thresholds: each step polls /metrics until the value shows, within a
// generous liveness bound.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { startTestService, type TestService } from '../../fixtures/service-fixture.js';

let env: RedisNodes;
let service: TestService;

beforeAll(async () => {
  env = await startRedisNodes(3);
  // A short max ttl (the cluster's recorded one; a repair waits on nothing).
  service = await startTestService(env.urls, { FENCED_MAX_TTL_MS: '2000' });
});

afterAll(async () => {
  await service?.close();
  await env?.stop();
});

/** The value of `name{node="<node>",...}` in a scrape, or undefined when absent. */
function sample(text: string, name: string, node: number): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(`node="${node}"`));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Scrapes until `expected` holds (or the liveness bound is over); returns the last scrape. */
async function scrapeUntil(expected: (text: string) => boolean, what: string): Promise<string> {
  const deadline = Date.now() + 45_000;
  for (;;) {
    const text = (await service.call('/metrics')).text;
    if (expected(text)) return text;
    if (Date.now() > deadline) throw new Error(`/metrics never showed ${what}; last scrape:\n${text}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

describe('node gauges in /metrics', () => {
  it('shows every node up and voting, with its address, the quorum and the voting count', async () => {
    const text = await scrapeUntil((t) => sample(t, 'fenced_node_voting', 2) === 1, 'node 2 voting');
    for (let node = 0; node < 3; node++) {
      const address = new URL(env.urls[node]!).host;
      expect(text).toContain(`fenced_node_up{node="${node}",address="${address}"} 1`);
      expect(sample(text, 'fenced_node_voting', node)).toBe(1);
      expect(sample(text, 'fenced_node_config_ok', node)).toBe(1);
      expect(sample(text, 'fenced_node_repairing', node)).toBe(0);
      expect(sample(text, 'fenced_node_probe_latency_seconds', node)).toBeGreaterThanOrEqual(0);
    }
    expect(text).toMatch(/^fenced_voting_nodes 3$/m);
    expect(text).toMatch(/^fenced_quorum 2$/m);
  });

  it('drops a paused node to down and non-voting, and brings it back when it resumes', async (ctx) => {
    const why = env.missing('pause');
    if (why) ctx.skip(why);
    const node = env.nodes[1]!;
    node.pause();
    try {
      const down = await scrapeUntil(
        (t) => sample(t, 'fenced_node_up', 1) === 0 && sample(t, 'fenced_node_voting', 1) === 0,
        'node 1 down and not voting',
      );
      expect(sample(down, 'fenced_node_up', 0)).toBe(1);
      expect(sample(down, 'fenced_node_probe_latency_seconds', 1)).toBeUndefined();
      expect(down).toMatch(/^fenced_voting_nodes 2$/m);
    } finally {
      node.resume();
    }
    const back = await scrapeUntil(
      (t) => sample(t, 'fenced_node_up', 1) === 1 && sample(t, 'fenced_node_voting', 1) === 1,
      'node 1 up and voting again',
    );
    expect(back).toMatch(/^fenced_voting_nodes 3$/m);
  });

  it('shows a node that restarted empty as repairing and not voting, until its repair lets it vote again', async (ctx) => {
    const why = env.missing('restartWithoutData');
    if (why) ctx.skip(why);
    // Something to copy: a register on every node.
    const granted = await service.call('/v1/locks/metrics-repair/leases', {
      method: 'POST',
      json: { ttlMs: 1000 },
    });
    expect(granted.status).toBe(201);
    await env.nodes[2]!.restart({ keepData: false });
    // The scrape's own probe finds the node empty and the service starts the repair.
    const repairing = await scrapeUntil(
      (t) => sample(t, 'fenced_node_repairing', 2) === 1,
      'node 2 repairing',
    );
    expect(sample(repairing, 'fenced_node_voting', 2)).toBe(0);
    expect(sample(repairing, 'fenced_node_up', 2)).toBe(1);
    expect(sample(repairing, 'fenced_node_repair_registers_copied', 2)).toBeGreaterThanOrEqual(0);
    const repaired = await scrapeUntil(
      (t) => sample(t, 'fenced_node_voting', 2) === 1 && sample(t, 'fenced_node_repairing', 2) === 0,
      'node 2 repaired and voting',
    );
    expect(sample(repaired, 'fenced_node_repair_registers_copied', 2)).toBeUndefined();
  });
});
