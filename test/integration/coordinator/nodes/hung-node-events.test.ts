// A hung node (SIGSTOP: its sockets stay open, nothing answers) is told as a `nodeState` event, as a node whose
// connection drops is: alerting built on the events sees it. Before, only failed calls (`nodeError`) showed it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NodeStateEvent } from '@fenced/coordinator';
import {
  eventually,
  startCoordinatorFixture,
  unique,
  type CoordinatorFixture,
} from '../../../fixtures/coordinator-fixture.js';

let cluster: CoordinatorFixture;

beforeAll(async () => {
  cluster = await startCoordinatorFixture(3, { coordinator: false, raw: false });
});

afterAll(async () => {
  for (const node of cluster?.env.nodes ?? []) node.resume();
  await cluster?.close();
});

describe('a hung node', () => {
  it('is told down by a nodeState event once a call to it timed out, and up again when it answers', async (ctx) => {
    const why = cluster.env.missing('pause');
    if (why) ctx.skip(why);
    const coordinator = cluster.another({ nodeTimeoutMs: 300 });
    coordinator.on('nodeError', () => undefined);
    const events: NodeStateEvent[] = [];
    coordinator.on('nodeState', (event) => events.push(event));
    await coordinator.ready();
    const hung = cluster.env.nodes[2]!;
    hung.pause();
    try {
      // The two others grant: the acquire succeeds, and its call to the hung node times out.
      const lease = await coordinator.acquire(unique('hung'), { ttlMs: 10_000 });
      await lease.release();
      await eventually(() => events.some((e) => e.change === 'down' && e.node === 2), {
        what: 'a nodeState event telling node 2 down',
        timeoutMs: 60_000,
      });
      expect(events.find((e) => e.change === 'down' && e.node === 2)!.detail).toMatch(/timed out/);
      // The healthy nodes were never told down.
      expect(events.filter((e) => e.change === 'down' && e.node !== 2)).toEqual([]);
    } finally {
      hung.resume();
    }
    await eventually(() => events.some((e) => e.change === 'up' && e.node === 2), {
      what: 'a nodeState event telling node 2 up again',
      timeoutMs: 60_000,
    });
  });
});
