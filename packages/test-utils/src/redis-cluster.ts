import type { StartedTestContainer } from 'testcontainers';
import { defaultBackend, dockerReachable, onPath, type Backend } from './container-runtime.js';
import { RedisNode, redisServerArgs, type RedisNodeOptions } from './redis-node.js';

/**
 * Fault controls a test may need from its Redis nodes. `pause`, `kill`, `restart`, `restartWithoutData`
 * (F6/F7/F17) and `clockShift` (F4/F5, via `RedisNodeOptions.env`) need processes this test owns; `proxy`
 * (a `FaultProxy` in front of a node) works with any node that can be reached.
 */
export type FaultCapability = 'pause' | 'kill' | 'restart' | 'restartWithoutData' | 'clockShift' | 'proxy';
export type FaultCapabilities = Readonly<Record<FaultCapability, boolean>>;

/** Where a set of nodes runs: own processes, own containers, or servers named by `FENCED_REDIS_URLS`. */
export type RedisBackendKind = 'process' | 'container' | 'external';

/** N independent Redis masters for one test file (DESIGN §6). */
export interface RedisNodes {
  /** Connection URLs, in node order. */
  readonly urls: string[];
  /** Fault controls, in node order; empty unless the nodes are local processes. */
  readonly nodes: RedisNode[];
  /** True when this environment owns the servers (processes or containers) and stops them. */
  readonly owned: boolean;
  readonly backend: RedisBackendKind;
  readonly capabilities: FaultCapabilities;
  /**
   * `null` when every capability asked for is available, else a reason to skip with, e.g.
   * `const why = env.missing('pause', 'kill'); if (why) ctx.skip(why);`
   */
  missing(...needed: FaultCapability[]): string | null;
  stop(): Promise<void>;
}

export interface StartRedisNodesOptions extends RedisNodeOptions {
  /** Use `FENCED_REDIS_URLS` when it is set (backend `auto` only). @defaultValue `true` */
  useExisting?: boolean;
  /** @defaultValue `FENCED_TEST_BACKEND`, else `'auto'` */
  backend?: Backend;
  /** Image for the container backend. @defaultValue `'redis:7'` */
  image?: string;
}

const ALL: FaultCapabilities = {
  pause: true,
  kill: true,
  restart: true,
  restartWithoutData: true,
  clockShift: true,
  proxy: true,
};
const PROXY_ONLY: FaultCapabilities = {
  pause: false,
  kill: false,
  restart: false,
  restartWithoutData: false,
  clockShift: false,
  proxy: true,
};

/**
 * Decides where nodes run. With `auto`: `FENCED_REDIS_URLS` when set (and `useExisting`), else local
 * processes when `redis-server` is installed, else containers when a Docker engine answers.
 *
 * Local processes come before Docker (DESIGN §6 names Docker first) on purpose: they give every fault
 * control (SIGSTOP, kill, restart without data, the clock shim), start in milliseconds without an image
 * pull, and every existing caller that uses `nodes` keeps working on a machine that also runs Docker.
 * Containers are for machines without the binaries, or on request (`backend: 'container'`).
 */
export async function chooseRedisBackend(input: {
  backend: Backend;
  existingUrls: boolean;
  redisServerInstalled: () => Promise<boolean>;
  dockerReachable: () => Promise<{ reachable: boolean; reason: string }>;
}): Promise<{ kind: RedisBackendKind; reason: string }> {
  if (input.backend === 'process') return { kind: 'process', reason: 'backend: process' };
  if (input.backend === 'container') {
    const docker = await input.dockerReachable();
    if (!docker.reachable) throw new Error(`backend: container, but ${docker.reason}`);
    return { kind: 'container', reason: docker.reason };
  }
  if (input.existingUrls) return { kind: 'external', reason: 'FENCED_REDIS_URLS' };
  if (await input.redisServerInstalled()) return { kind: 'process', reason: 'redis-server on PATH' };
  const docker = await input.dockerReachable();
  if (docker.reachable) return { kind: 'container', reason: `no redis-server on PATH; ${docker.reason}` };
  throw new Error(
    `cannot start Redis: no redis-server on PATH, ${docker.reason}, and FENCED_REDIS_URLS is not set`,
  );
}

function missingFn(kind: RedisBackendKind, capabilities: FaultCapabilities) {
  return (...needed: FaultCapability[]): string | null => {
    const absent = needed.filter((c) => !capabilities[c]);
    if (absent.length === 0) return null;
    const where = {
      process: 'local processes',
      container: 'containers',
      external: 'servers from FENCED_REDIS_URLS',
    }[kind];
    return `needs ${absent.join(', ')}, which Redis nodes on ${where} do not offer`;
  };
}

/**
 * Starts `count` Redis masters with the persistence settings of DESIGN §3 (see `chooseRedisBackend` for
 * where), or uses `FENCED_REDIS_URLS`. Fault controls are available as `nodes` only for local processes;
 * `capabilities` and `missing()` tell a fault test what it may do, so it can skip with a reason.
 */
export async function startRedisNodes(count = 5, options: StartRedisNodesOptions = {}): Promise<RedisNodes> {
  const { useExisting, backend = defaultBackend(), image = 'redis:7', ...nodeOptions } = options;
  const existing = process.env.FENCED_REDIS_URLS?.split(',')
    .map((u) => u.trim())
    .filter(Boolean);
  const { kind } = await chooseRedisBackend({
    backend,
    existingUrls: existing !== undefined && existing.length > 0 && useExisting !== false,
    redisServerInstalled: () => onPath('redis-server'),
    dockerReachable,
  });

  if (kind === 'external') {
    return {
      urls: existing ?? [],
      nodes: [],
      owned: false,
      backend: kind,
      capabilities: PROXY_ONLY,
      missing: missingFn(kind, PROXY_ONLY),
      stop: async () => {},
    };
  }
  if (kind === 'container') return startRedisContainers(count, image, nodeOptions);

  const started = await Promise.allSettled(Array.from({ length: count }, () => RedisNode.start(nodeOptions)));
  const nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw failed.reason instanceof Error ? failed.reason : new Error(String(failed.reason));
  }
  return {
    urls: nodes.map((n) => n.url),
    nodes,
    owned: true,
    backend: kind,
    capabilities: ALL,
    missing: missingFn(kind, ALL),
    stop: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}

/**
 * `count` containers of `image`, each with the DESIGN §3 arguments. Not exercised on machines without a
 * Docker engine. Fault controls are not offered: SIGSTOP, kill -9 and restarts of a container are not
 * wired up (and the clock shim cannot be preloaded into it), so `capabilities` says proxy only.
 */
async function startRedisContainers(
  count: number,
  image: string,
  options: RedisNodeOptions,
): Promise<RedisNodes> {
  if (options.env && Object.keys(options.env).length > 0)
    throw new Error(
      'Redis containers cannot take a process environment (e.g. the clock shim); use backend: process',
    );
  const { GenericContainer, Wait } = await import('testcontainers');
  const command = [
    'redis-server',
    ...redisServerArgs(options.persistence ?? 'fsync-always'),
    ...(options.extraArgs ?? []),
  ];
  const started = await Promise.allSettled(
    Array.from({ length: count }, () =>
      new GenericContainer(image)
        .withCommand(command)
        .withExposedPorts(6379)
        .withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/))
        .start(),
    ),
  );
  const containers: StartedTestContainer[] = started.flatMap((r) =>
    r.status === 'fulfilled' ? [r.value] : [],
  );
  const stop = async (): Promise<void> => {
    await Promise.all(containers.map((c) => c.stop()));
  };
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await stop();
    throw failed.reason instanceof Error ? failed.reason : new Error(String(failed.reason));
  }
  return {
    urls: containers.map((c) => `redis://${c.getHost()}:${c.getMappedPort(6379)}`),
    nodes: [],
    owned: true,
    backend: 'container',
    capabilities: PROXY_ONLY,
    missing: missingFn('container', PROXY_ONLY),
    stop,
  };
}
