import { describe, expect, it } from 'vitest';
import {
  NodeStateTracker,
  type NodeStateEvent,
} from '../../../../packages/coordinator/src/nodes/node-events.js';

const view = (
  node: number,
  state: { reachable?: boolean; voting?: boolean; problems?: string[]; repair?: boolean },
) => ({
  node,
  address: `127.0.0.1:700${node}`,
  reachable: state.reachable ?? true,
  voting: state.voting ?? true,
  problems: state.problems ?? [],
  ...(state.repair ? { repair: { phase: 'copying' } } : {}),
});

describe('NodeStateTracker', () => {
  it('tells each change once, and the quorum lost and regained', () => {
    const told: NodeStateEvent[] = [];
    const tracker = new NodeStateTracker(2, false, (event) => told.push(event));
    const none = (): string[] => [];
    tracker.observe([view(0, {}), view(1, {}), view(2, {})], none);
    expect(told.map((e) => `${e.change}:${e.node}`)).toEqual(['up:0', 'up:1', 'up:2']);
    told.length = 0;
    tracker.observe([view(0, {}), view(1, {}), view(2, {})], none);
    expect(told).toEqual([]);

    const down = { reachable: false, voting: false, problems: ['unreachable: connection refused'] };
    tracker.observe([view(0, {}), view(1, down), view(2, down)], none);
    tracker.observe([view(0, {}), view(1, down), view(2, down)], none);
    expect(told.map((e) => `${e.change}:${e.node}`)).toEqual([
      'down:1',
      'not-voting:1',
      'down:2',
      'not-voting:2',
      'quorum-lost:null',
    ]);
    expect(told[0]!.detail).toBe('unreachable: connection refused');
    told.length = 0;

    tracker.observe([view(0, {}), view(1, { voting: false, repair: true }), view(2, down)], none);
    tracker.observe([view(0, {}), view(1, {}), view(2, down)], none);
    expect(told.map((e) => `${e.change}:${e.node}`)).toEqual([
      'up:1',
      'repair-started:1',
      'voting:1',
      'repair-finished:1',
      'quorum-regained:null',
    ]);
  });

  it('tells a node that is not Redis, and one refused as unsafe with its settings', () => {
    const told: NodeStateEvent[] = [];
    const tracker = new NodeStateTracker(2, false, (event) => told.push(event));
    const settings = (node: number): string[] =>
      node === 1 ? ["appendfsync is 'everysec'; it must be 'always'"] : [];
    const notRedis = {
      reachable: false,
      voting: false,
      problems: ['unreachable: not a Redis server: it closes'],
    };
    tracker.observe([view(0, {}), view(1, { voting: false }), view(2, notRedis)], settings);
    expect(told.map((e) => `${e.change}:${e.node}`)).toEqual([
      'up:0',
      'up:1',
      'unsafe:1',
      'not-voting:1',
      'not-redis:2',
      'not-voting:2',
      'quorum-lost:null',
    ]);
    expect(told.find((e) => e.change === 'unsafe')).toMatchObject({
      settings: ["appendfsync is 'everysec'; it must be 'always'"],
      accepted: false,
    });
  });
});
