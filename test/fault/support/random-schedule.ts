import { FaultProxy, proxyEach, type FaultProxies } from '@fenced/test-utils/fault-proxy';
import { History } from '@fenced/test-utils/history';
import { readCounter } from './counter-ops.js';
import type { GuardedStore } from '@fenced/guarded-store';
import { seedRegistersAhead, unique, type CounterDb, type FaultWorld } from './fault-world.js';
import { judge, sleep, type Verdict } from './verdict.js';
import { runClients, type Protection, type WorkloadClient } from './workload.js';
import { seededRandom } from '@fenced/test-utils/seeded-random';
import type { ClockShim } from '@fenced/test-utils/clock-shim';
import { Redis } from 'ioredis';

export type FaultStep =
  | { readonly kind: 'pause-node'; readonly node: number; readonly forMs: number }
  | { readonly kind: 'kill-node'; readonly node: number; readonly forMs: number }
  | { readonly kind: 'restart-node-empty'; readonly node: number }
  | {
      readonly kind: 'partition-client';
      readonly client: number;
      readonly nodes: number[];
      readonly forMs: number;
    }
  | { readonly kind: 'delay-client'; readonly client: number; readonly forMs: number }
  /**
   * A paused client, simulated by holding every socket it has (Redis and Postgres) in the proxies: the servers
   * see exactly what a SIGSTOPped client leaves them (an idle transaction, commands arriving late); only the
   * client's own timers keep running, which these in-process clients use for nothing but node timeouts.
   */
  | { readonly kind: 'hold-client'; readonly client: number; readonly forMs: number }
  /** Resets a client's Postgres connections mid-transaction: outcomes become unknown, retried by op id (G5). */
  | { readonly kind: 'reset-client-db'; readonly client: number }
  /** FLUSHALL on a node: it loses every key, its incarnation key among them, while it keeps running (F24). */
  | { readonly kind: 'flush-node'; readonly node: number }
  /** A node's clock (its clock shim) jumps by `byMs` for `forMs`, then back: its lease keys expire early or late. */
  | {
      readonly kind: 'skew-node-clock';
      readonly node: number;
      readonly byMs: number;
      readonly forMs: number;
    };

export interface ScheduledStep {
  readonly atMs: number;
  readonly step: FaultStep;
}

export interface ScheduleOptions {
  readonly seed: number;
  readonly durationMs: number;
  readonly nodes: number;
  readonly clients: number;
  /**
   * The soak's nemesis: also flushes, node clock jumps, and empty restarts and flushes as often as any other node
   * fault (a repair takes no wait, so a node that lost its state is back within a second or two).
   * @defaultValue false
   */
  readonly extended?: boolean;
}

/**
 * The fault schedule of a seed: a fault every 0.5–2 s, each lasting 0.3–2 s (a reset is instant). Node faults never disturb more than
 * two of the five nodes at once, and at most one node a run restarts empty (a lost disk): they test safety, not
 * how long a cluster can stay unavailable. Client faults may overlap with anything.
 */
export function planSchedule(options: ScheduleOptions): ScheduledStep[] {
  const random = seededRandom(options.seed);
  const int = (min: number, max: number): number => min + Math.floor(random() * (max - min + 1));
  const steps: ScheduledStep[] = [];
  const busyUntil = new Map<number, number>(); // node → end of its current fault
  let emptyRestarts = 0;
  for (let at = int(200, 800); at < options.durationMs - 1_000; at += int(500, 2_000)) {
    const forMs = int(300, 2_000);
    const free = [...Array(options.nodes).keys()].filter((n) => (busyUntil.get(n) ?? 0) <= at);
    const disturbed = options.nodes - free.length;
    const roll = random();
    const node = free[int(0, Math.max(0, free.length - 1))];
    if (options.extended === true && roll < 0.45 && node !== undefined && disturbed < 2) {
      const pick = random();
      if (pick < 0.2) {
        busyUntil.set(node, at + 2_000);
        steps.push({ atMs: at, step: { kind: 'restart-node-empty', node } });
      } else if (pick < 0.4) {
        busyUntil.set(node, at + 2_000);
        steps.push({ atMs: at, step: { kind: 'flush-node', node } });
      } else if (pick < 0.6) {
        busyUntil.set(node, at + forMs);
        const byMs = random() < 0.5 ? int(500, 5_000) : -int(500, 5_000);
        steps.push({ atMs: at, step: { kind: 'skew-node-clock', node, byMs, forMs } });
      } else {
        busyUntil.set(node, at + forMs);
        steps.push({ atMs: at, step: { kind: pick < 0.8 ? 'pause-node' : 'kill-node', node, forMs } });
      }
      continue;
    }
    if (roll < 0.45 && node !== undefined && disturbed < 2) {
      const kind =
        roll < 0.2 ? 'pause-node' : roll < 0.4 || emptyRestarts > 0 ? 'kill-node' : 'restart-node-empty';
      if (kind === 'restart-node-empty') {
        emptyRestarts++;
        busyUntil.set(node, at + 6_000);
        steps.push({ atMs: at, step: { kind, node } });
      } else {
        busyUntil.set(node, at + forMs);
        steps.push({ atMs: at, step: { kind, node, forMs } });
      }
      continue;
    }
    const client = int(0, options.clients - 1);
    if (roll < 0.65) {
      const size = int(1, 3);
      const nodes = [...Array(options.nodes).keys()].sort(() => random() - 0.5).slice(0, size);
      steps.push({ atMs: at, step: { kind: 'partition-client', client, nodes, forMs } });
    } else if (roll < 0.78) {
      steps.push({ atMs: at, step: { kind: 'delay-client', client, forMs } });
    } else if (roll < 0.9) {
      steps.push({ atMs: at, step: { kind: 'hold-client', client, forMs: Math.min(forMs, 1_200) } });
    } else {
      steps.push({ atMs: at, step: { kind: 'reset-client-db', client } });
    }
  }
  return steps;
}

export function describeStep({ atMs, step }: ScheduledStep): string {
  const at = `${(atMs / 1000).toFixed(1)}s`;
  switch (step.kind) {
    case 'pause-node':
    case 'kill-node':
      return `${at} ${step.kind} ${step.node} for ${step.forMs} ms`;
    case 'restart-node-empty':
    case 'flush-node':
      return `${at} ${step.kind} ${step.node}`;
    case 'skew-node-clock':
      return `${at} ${step.kind} ${step.node} by ${step.byMs} ms for ${step.forMs} ms`;
    case 'partition-client':
      return `${at} cut client ${step.client} from nodes ${step.nodes.join(',')} for ${step.forMs} ms`;
    case 'delay-client':
    case 'hold-client':
      return `${at} ${step.kind} ${step.client} for ${step.forMs} ms`;
    case 'reset-client-db':
      return `${at} ${step.kind} ${step.client}`;
  }
}

export interface RandomRunOptions {
  readonly seed: number;
  readonly durationMs: number;
  readonly protection: Protection;
  readonly clients?: number;
  /** Called about once a second with counts so far (the soak's progress display). */
  readonly onProgress?: (progress: RandomRunProgress) => void;
  /**
   * The soak's nemesis (see ScheduleOptions.extended), with every node's clock shim (the world's nodes run with
   * them), clients whose coordinators have two different node timeouts, and folding into the floor every second.
   */
  readonly extended?: { readonly nodeClocks: readonly ClockShim[] };
}

export interface RandomRunProgress {
  readonly elapsedMs: number;
  readonly ok: number;
  readonly failed: number;
  readonly unknown: number;
  readonly faultsApplied: number;
  readonly activeFaults: number;
}

export interface RandomRunResult {
  readonly verdict: Verdict;
  readonly schedule: readonly ScheduledStep[];
  readonly history: History;
  readonly resource: string;
  /** The value the counter's token registers were seeded with (above every client's time floor). */
  readonly seeded: bigint;
  /** Flushes and empty restarts skipped because another node had lost its state and was not repaired yet. */
  readonly skippedLosses: number;
}

interface ClientLinks {
  readonly redis: FaultProxies;
  readonly postgres: FaultProxy;
}

/**
 * A seeded random schedule of node pauses, kills and restarts, client partitions, delays and holds, against
 * several clients doing read-modify-write increments on one counter, judged by every checker. The counter's
 * token registers start far above every client's time floor, so tokens are the protocol's alone.
 */
export async function runRandomSchedule(
  world: FaultWorld,
  options: RandomRunOptions,
): Promise<RandomRunResult> {
  const clientCount = options.clients ?? 4;
  const schedule = planSchedule({
    seed: options.seed,
    durationMs: options.durationMs,
    nodes: world.redis.nodes.length,
    clients: clientCount,
    extended: options.extended !== undefined,
  });
  const resource = unique(`random-${options.seed}`);
  await world.ensureCounter(resource);
  // Every client shares this machine's clock, so the proposal's time floor alone would lift each later token
  // above each earlier one. Registers far above the floor make every token come from the quorum registers
  // (DESIGN §7): a register that went backwards — an empty restart repaired wrongly — shows in the tokens.
  // Short-lived clients (a soak runs for hours: a client kept per run would pile up).
  const seeded = await withClients(world.urls, (clients) => seedRegistersAhead(clients, resource));
  const history = new History();
  const links: ClientLinks[] = [];
  const clients: WorkloadClient[] = [];
  const stores: GuardedStore<CounterDb>[] = [];
  const random = seededRandom(options.seed ^ 0x5bd1e995);
  /** State losses skipped because another node had not been repaired yet. */
  let skipped = 0;
  try {
    for (let i = 0; i < clientCount; i++) {
      const redis = await proxyEach(world.urls);
      const postgres = await FaultProxy.start({ target: world.postgres.url });
      links.push({ redis, postgres });
      const store = world.anotherStore({ connectionString: postgres.url, maxConnections: 2 });
      stores.push(store);
      await store.read((trx) => readCounter(trx, resource));
      // The extended nemesis: half the clients wait up to 2 s for a node, the others 400 ms; registers idle for
      // 3 s are folded into the floor (every coordinator runs fold passes).
      const coordinator = world.coordinator({
        nodes: redis.urls,
        ...(options.extended !== undefined
          ? { nodeTimeoutMs: i % 2 === 0 ? 400 : 2_000, tokenRetentionMs: 3_000 }
          : {}),
      });
      await coordinator.ready();
      clients.push({ name: `W${i}`, coordinator, store });
    }

    const started = performance.now();
    const elapsed = (): number => performance.now() - started;
    let applied = 0;
    let active = 0;
    const endings: Promise<void>[] = [];
    const fault = async (step: FaultStep): Promise<void> => {
      active++;
      try {
        if (!(await apply(world, links, step, options.extended?.nodeClocks))) skipped++;
      } finally {
        active--;
      }
    };
    const nemesis = (async () => {
      for (const planned of schedule) {
        const wait = planned.atMs - elapsed();
        if (wait > 0) await sleep(wait);
        applied++;
        endings.push(fault(planned.step));
      }
    })();
    const progress = options.onProgress
      ? setInterval(() => {
          const ops = history.events.filter((e) => e.op === 'increment');
          options.onProgress?.({
            elapsedMs: elapsed(),
            ok: ops.filter((e) => e.kind === 'ok').length,
            failed: ops.filter((e) => e.kind === 'fail').length,
            unknown: ops.filter((e) => e.kind === 'unknown').length,
            faultsApplied: applied,
            activeFaults: active,
          });
        }, 1_000)
      : undefined;
    try {
      await runClients(history, clients, {
        resource,
        protection: options.protection,
        ttlMs: 400,
        // A quarter of the critical sections outlive their lease inside the transaction, one in five stalls past
        // it before the transaction: overlapping holders, some of them fenced off.
        holdMs: () => (random() < 0.25 ? 300 + Math.floor(random() * 300) : Math.floor(random() * 100)),
        stallMs: () => (random() < 0.2 ? 300 + Math.floor(random() * 400) : 0),
        waitMs: 3_000,
        maxCycles: 10_000,
        stop: () => elapsed() > options.durationMs,
      });
      await nemesis;
      await Promise.all(endings);
    } finally {
      clearInterval(progress);
    }
  } finally {
    await heal(world, links);
    for (const client of clients) await world.closeCoordinator(client.coordinator);
    // Each run's pools go with it: a world the soak keeps for hours would otherwise hold every run's.
    for (const store of stores) await world.closeStore(store);
    await Promise.allSettled(links.flatMap((l) => [l.redis.stop(), l.postgres.stop()]));
  }
  return {
    verdict: await judge(world, history, [resource]),
    schedule,
    history,
    resource,
    seeded,
    skippedLosses: skipped,
  };
}

/** Applies one fault and undoes it after its duration. */
async function apply(
  world: FaultWorld,
  links: readonly ClientLinks[],
  step: FaultStep,
  nodeClocks: readonly ClockShim[] | undefined,
): Promise<boolean> {
  switch (step.kind) {
    case 'flush-node':
      if (await anotherNodeLostItsState(world, step.node)) return false;
      await withClients([world.urls[step.node]!], ([client]) => client!.flushall());
      return true;
    case 'skew-node-clock': {
      const clock = nodeClocks?.[step.node];
      if (clock === undefined) return true;
      await clock.jump(step.byMs);
      await sleep(step.forMs);
      await clock.reset();
      return true;
    }
    case 'pause-node': {
      const node = world.redis.nodes[step.node]!;
      node.pause();
      await sleep(step.forMs);
      node.resume();
      return true;
    }
    case 'kill-node': {
      const node = world.redis.nodes[step.node]!;
      await node.kill();
      await sleep(step.forMs);
      await node.restart({ keepData: true });
      return true;
    }
    case 'restart-node-empty':
      if (await anotherNodeLostItsState(world, step.node)) return false;
      await world.redis.nodes[step.node]!.restart({ keepData: false });
      return true;
    case 'partition-client': {
      const client = links[step.client]!;
      for (const n of step.nodes) client.redis.proxies[n]!.setMode('blackhole');
      await sleep(step.forMs);
      for (const n of step.nodes) client.redis.proxies[n]!.release();
      return true;
    }
    case 'delay-client': {
      const client = links[step.client]!;
      client.redis.setMode('delay', { delayMs: 5, jitterMs: 45 });
      client.postgres.setMode('delay', { delayMs: 20, jitterMs: 30 });
      await sleep(step.forMs);
      client.redis.release();
      client.postgres.release();
      return true;
    }
    case 'hold-client': {
      const client = links[step.client]!;
      client.redis.setMode('hold');
      client.postgres.setMode('hold');
      await sleep(step.forMs);
      client.redis.release();
      client.postgres.release();
      return true;
    }
    case 'reset-client-db': {
      const client = links[step.client]!;
      client.postgres.setMode('reset');
      await sleep(50);
      client.postgres.release();
      return true;
    }
  }
}

/**
 * Whether a node other than `node` is without its incarnation key right now (lost its state, not repaired yet): a
 * second loss then is skipped. Two nodes of five without state at once is the most any quorum protocol survives,
 * and a third fault (a pause, a kill) on top could leave too few sources for either repair — the nemesis tests
 * safety within the failure model, not a cluster that lost a majority's state.
 */
async function anotherNodeLostItsState(world: FaultWorld, node: number): Promise<boolean> {
  const others = world.urls.filter((_, i) => i !== node);
  return withClients(others, async (clients) => {
    const found = await Promise.all(
      clients.map((c) =>
        c.exists('fenced:node:incarnation').then(
          (n) => n === 0,
          () => false,
        ),
      ),
    );
    return found.some(Boolean);
  });
}

/** Runs `fn` with a client per URL, connected, and closes them after. */
async function withClients<T>(urls: readonly string[], fn: (clients: Redis[]) => Promise<T>): Promise<T> {
  const clients = urls.map((url) => new Redis(url, { maxRetriesPerRequest: 3 }).on('error', () => undefined));
  try {
    return await fn(clients);
  } finally {
    for (const client of clients) client.disconnect();
  }
}

/** Everything back to normal: nodes running and resumed, every link passing. */
async function heal(world: FaultWorld, links: readonly ClientLinks[]): Promise<void> {
  for (const node of world.redis.nodes) {
    node.resume();
    if (!node.running) await node.restart({ keepData: true });
  }
  for (const l of links) {
    l.redis.release();
    l.postgres.release();
  }
}
