import { RedisNode, type RedisNodeOptions } from './redis-node.js';

/** N independent Redis masters for one test file (DESIGN §6). */
export interface RedisNodes {
  /** Connection URLs, in node order. */
  readonly urls: string[];
  /** Fault controls, in node order; empty when the nodes came from `FENCED_REDIS_URLS`. */
  readonly nodes: RedisNode[];
  /** True when this environment owns the processes (and so may kill, pause and restart them). */
  readonly owned: boolean;
  stop(): Promise<void>;
}

/**
 * Starts `count` local `redis-server` processes with the persistence settings of DESIGN §3, or uses
 * `FENCED_REDIS_URLS` when set and `useExisting` is not false (then no fault controls are available).
 */
export async function startRedisNodes(
  count = 5,
  options: RedisNodeOptions & { useExisting?: boolean } = {},
): Promise<RedisNodes> {
  const existing = process.env.FENCED_REDIS_URLS?.split(',')
    .map((u) => u.trim())
    .filter(Boolean);
  if (existing && existing.length > 0 && options.useExisting !== false) {
    return { urls: existing, nodes: [], owned: false, stop: async () => {} };
  }
  const nodes = await Promise.all(Array.from({ length: count }, () => RedisNode.start(options)));
  return {
    urls: nodes.map((n) => n.url),
    nodes,
    owned: true,
    stop: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}
