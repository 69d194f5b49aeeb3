import { FaultProxy } from '@fenced/test-utils/fault-proxy';
import { startCounterService } from './counter-service.js';
import { FAULTY_NODE, NODE_COUNT } from './demo-environment.js';
import { ScenarioError, type ScenarioContext } from './scenario-context.js';

/** What a scenario needs beyond workers, Postgres and some Redis nodes. */
export type Requirement = 'redis-processes' | 'clock-shim';

export interface Scenario {
  /** The fault's number in DESIGN §7. */
  readonly id: string;
  readonly title: string;
  /** What the orchestrator does, for people (--list, the report). */
  readonly story: string;
  readonly ttlMs: number;
  readonly requires: readonly Requirement[];
  /**
   * What the fenced run adds. Absent: plain Redlock without a guard vs the coordinator with the guard.
   * `signatures` (F20): both runs use the coordinator and the guard; the fenced run adds signed leases and a store
   * that verifies them (DESIGN §4b).
   */
  readonly protection?: 'signatures';
  /** Drives the workers through the fault. The same script runs unprotected and fenced. */
  run(ctx: ScenarioContext): Promise<void>;
}

/** The nodes worker A is cut off from in F4 and F6: enough that A's majority must include the faulty node. */
const CUT_OFF_NODES = [3, 4] as const;

const F1: Scenario = {
  id: 'F1',
  title: 'A holder is paused past its TTL inside the critical section, then writes',
  story:
    'A takes the lock and reads the counter, then stops dead (SIGSTOP: a stop-the-world GC pause). Its lease runs ' +
    'out; B takes the lock, reads, writes counter+1 and leaves. A wakes up, still believing it holds the lock, and ' +
    'writes the counter+1 it computed before the pause.',
  ttlMs: 1_000,
  requires: [],
  async run(ctx) {
    const { A, B } = ctx;
    ctx.must(await A.acquire(), 'A acquire');
    const seen = ctx.valueOf(await A.read(), 'A read');
    await A.pause('a stop-the-world GC pause inside the critical section');
    try {
      // Granted as soon as A's lease has run out on the nodes: the wait is the lock's, not a sleep of ours.
      ctx.must(await B.acquire({ waitMs: 3 * ctx.ttlMs }), 'B acquire');
      const seenB = ctx.valueOf(await B.read(), 'B read');
      ctx.must(await B.write(seenB + 1), 'B write');
      await B.release();
    } finally {
      A.resume();
    }
    await A.write(seen + 1);
    await A.release();
  },
};

const F2: Scenario = {
  id: 'F2',
  title: 'A holder pauses right after sending its acquire; the replies wait in its socket',
  story:
    'A sends its acquire; the network holds the replies until the requests have reached every node, then A is ' +
    "stopped (SIGSTOP) and the replies are delivered into its socket, unread. A's lease expires on the nodes " +
    'while A sleeps; B takes the lock and reads. A wakes up and reads its replies.',
  ttlMs: 1_000,
  requires: [],
  async run(ctx) {
    const { A, B } = ctx;
    const proxies = ctx.env.proxiesOfA;
    proxies.setMode('hold', { direction: 'to-client' });
    const held = ctx.span(
      'system',
      'hold',
      "the network holds the replies to A's acquire",
      "A's replies held",
    );
    const pending = A.acquire();
    try {
      const nodes = ctx.env.redis.urls.length;
      let seen = 0;
      await ctx.waitFor(
        () => `A's acquire has reached every node (seen on ${seen} of ${nodes})`,
        async () => (seen = await ctx.leaseKeyCount()) === nodes,
      );
      await A.pause('right after sending its acquire: the nodes granted it, A has not read the replies');
    } finally {
      proxies.release();
      held.end("the replies are delivered: they wait in A's socket while A is stopped");
    }
    let seenB: number;
    try {
      ctx.must(await B.acquire({ waitMs: 3 * ctx.ttlMs }), 'B acquire');
      seenB = ctx.valueOf(await B.read(), 'B read');
    } finally {
      A.resume();
    }
    const late = await pending;
    if (late.ok) {
      // A believes the grant it just read: it reads and computes its increment while B is about to write.
      const read = await A.read();
      ctx.must(await B.write(seenB + 1), 'B write');
      await B.release();
      if (read.ok && read.value !== undefined) await A.write(read.value + 1);
    } else {
      // A got no lease. It waits its turn like a well-behaved client and increments after B.
      ctx.must(await B.write(seenB + 1), 'B write');
      await B.release();
      ctx.must(await A.acquire({ waitMs: 3 * ctx.ttlMs }), 'A acquire (second try)');
      const seenA = ctx.valueOf(await A.read(), 'A read');
      await A.write(seenA + 1);
    }
    await A.release();
  },
};

const F3: Scenario = {
  id: 'F3',
  title: 'A write is held in the network longer than the TTL, then delivered',
  story:
    'A takes the lock, reads the counter and sends counter+1 to the counter service over HTTP; the network holds ' +
    "the request. A's lease runs out; B takes the lock, reads and writes through the service. Then the network " +
    "delivers A's request.",
  ttlMs: 1_000,
  requires: [],
  async run(ctx) {
    const { A, B } = ctx;
    const { db, store } = ctx.env.database;
    const service = await startCounterService({ db, store, mode: ctx.mode });
    const port = Number(new URL(service.url).port);
    const proxy = await FaultProxy.start({ target: { host: '127.0.0.1', port } });
    try {
      const direct = { serviceUrl: service.url };
      const throughNetwork = { serviceUrl: `http://127.0.0.1:${proxy.port}` };
      ctx.must(await A.acquire(), 'A acquire');
      const seen = ctx.valueOf(await A.read(), 'A read');
      proxy.setMode('hold');
      const held = ctx.span('A', 'hold', "the network holds A's write request", 'write held in the network');
      const pendingWrite = A.write(seen + 1, throughNetwork);
      try {
        await ctx.waitFor("A's request is in the network", () => proxy.stats.queuedBytes > 0);
        ctx.must(await B.acquire({ waitMs: 3 * ctx.ttlMs }), 'B acquire');
        const seenB = ctx.valueOf(await B.read(), 'B read');
        ctx.must(await B.write(seenB + 1, direct), 'B write');
        await B.release();
      } finally {
        proxy.release();
        held.end("the network delivers A's request, late");
      }
      await pendingWrite;
      await A.release();
    } finally {
      await proxy.stop();
      await service.stop();
    }
  },
};

/** Cuts worker A off from CUT_OFF_NODES for the rest of the run (the run's clean-up puts it back). */
function cutOffA(ctx: ScenarioContext): void {
  for (const i of CUT_OFF_NODES) ctx.env.proxiesOfA.proxies[i]!.setMode('blackhole');
  ctx.cutOff = ctx.span(
    'system',
    'cutoff',
    `A is cut off from nodes ${CUT_OFF_NODES.join(' and ')} (blackhole): its majority is nodes 0, 1, ${FAULTY_NODE}`,
    `A cut off from nodes ${CUT_OFF_NODES.join(', ')}`,
  );
}

/** Notes how long A's lease still had to run when B got its own: two holders at once. */
function noteOverlap(ctx: ScenarioContext, grantedAt: number, aValidUntil: number | undefined): void {
  if (aValidUntil !== undefined && aValidUntil > grantedAt) {
    ctx.note(
      'B',
      `B holds the lock while A's lease is still valid for ${Math.round(aValidUntil - grantedAt)} ms: two holders at once`,
      grantedAt,
    );
  }
}

const F4: Scenario = {
  id: 'F4',
  title: "A Redis node's clock jumps forward while a client is cut off from the others",
  story:
    `A is cut off from nodes ${CUT_OFF_NODES.join(' and ')} and takes the lock with nodes 0, 1 and ${FAULTY_NODE}, then reads. ` +
    `Node ${FAULTY_NODE}'s clock jumps 30 s forward (an NTP step, through an LD_PRELOAD clock shim): A's key there ` +
    `expires at once. B reaches nodes ${FAULTY_NODE}, 3 and 4 — a majority — while A's lease is still valid. B reads ` +
    'and writes; then A writes.',
  ttlMs: 2_000,
  requires: ['redis-processes', 'clock-shim'],
  async run(ctx) {
    const clock = ctx.env.clock;
    if (!clock || ctx.env.redis.urls.length !== NODE_COUNT)
      throw new ScenarioError('F4 needs the clock shim');
    const { A, B } = ctx;
    cutOffA(ctx);
    try {
      const a = ctx.must(await A.acquire(), 'A acquire');
      const seen = ctx.valueOf(await A.read(), 'A read');
      await clock.jump(30_000, { clocks: 'realtime' });
      ctx.event(
        'system',
        'clock',
        `node ${FAULTY_NODE}'s clock jumps 30 s forward: A's key there expires`,
        `node ${FAULTY_NODE}: clock +30 s`,
      );
      await ctx.waitFor(
        `A's key on node ${FAULTY_NODE} has expired`,
        async () => (await ctx.leaseKeyCount([FAULTY_NODE])) === 0,
      );
      const b = ctx.must(await B.acquire({ waitMs: ctx.ttlMs }), 'B acquire');
      noteOverlap(ctx, b.endedAt, a.lease?.validUntil);
      const seenB = ctx.valueOf(await B.read(), 'B read');
      ctx.must(await B.write(seenB + 1), 'B write');
      await B.release();
      await A.write(seen + 1);
      await A.release();
    } finally {
      await clock.reset();
    }
  },
};

const F6: Scenario = {
  id: 'F6',
  title: 'A Redis node is restarted empty, letting a second client get a majority',
  story:
    `A is cut off from nodes ${CUT_OFF_NODES.join(' and ')} and takes the lock with nodes 0, 1 and ${FAULTY_NODE}, then reads. ` +
    `Node ${FAULTY_NODE} is killed and restarted at once without its data: it forgot A's lease. B asks every node; ` +
    `nodes ${FAULTY_NODE}, 3 and 4 say yes. B reads and writes; then A writes.`,
  ttlMs: 2_000,
  requires: ['redis-processes'],
  async run(ctx) {
    const node = ctx.env.redis.nodes[FAULTY_NODE];
    if (!node) throw new ScenarioError('F6 needs Redis processes of its own');
    const { A, B } = ctx;
    cutOffA(ctx);
    const a = ctx.must(await A.acquire(), 'A acquire');
    const seen = ctx.valueOf(await A.read(), 'A read');
    await node.restart({ keepData: false });
    ctx.event(
      'system',
      'restart',
      `node ${FAULTY_NODE} killed and restarted empty: it forgot A's lease`,
      `node ${FAULTY_NODE} restarted empty`,
    );
    const b = ctx.must(await B.acquire({ waitMs: 3 * ctx.ttlMs }), 'B acquire');
    noteOverlap(ctx, b.endedAt, a.lease?.validUntil);
    if (ctx.mode === 'fenced' && b.endedAt - b.startedAt > ctx.ttlMs / 2) {
      ctx.note(
        'B',
        `B waited ${Math.round(b.endedAt - b.startedAt)} ms: node ${FAULTY_NODE} lost its incarnation key, so it ` +
          "abstains until repaired, and B needed A's lease on nodes 0 and 1 to run out",
        b.endedAt,
      );
    }
    const seenB = ctx.valueOf(await B.read(), 'B read');
    ctx.must(await B.write(seenB + 1), 'B write');
    await B.release();
    await A.write(seen + 1);
    await A.release();
  },
};

/** Token 2^63 − 1: the largest a fence can hold. */
const FORGED_TOKEN = (1n << 63n) - 1n;

const F20: Scenario = {
  id: 'F20',
  title: 'A misbehaving client forges a huge token',
  story:
    'Both runs use the coordinator and the guard. A takes the lock and reads the counter, then writes counter+1 ' +
    'presenting the token 2^63 − 1 instead of its own (with its real lease id and proof). Then B, an honest ' +
    'client, takes the lock, reads and writes; then A, honest this time, does the same. Unprotected means the ' +
    'store believes any token; fenced means the coordinator signs every lease and the store verifies the proofs.',
  ttlMs: 2_000,
  requires: [],
  protection: 'signatures',
  async run(ctx) {
    const { A, B } = ctx;
    ctx.must(await A.acquire(), 'A acquire');
    const seen = ctx.valueOf(await A.read(), 'A read');
    ctx.event('A', 'note', `A presents the forged token ${FORGED_TOKEN} with its own lease id and proof`);
    await A.forgedWrite(seen + 1, FORGED_TOKEN);
    await A.release();
    // Honest holders, one after the other: each reads in a guarded transaction and writes what it read + 1.
    for (const holder of [B, A]) {
      ctx.must(await holder.acquire({ waitMs: 3 * ctx.ttlMs }), `${holder.name} acquire`);
      const read = await holder.read();
      if (read.ok && read.value !== undefined) await holder.write(read.value + 1);
      else
        ctx.note(
          holder.name,
          `${holder.name} is locked out: the fence is above every token the coordinator has granted`,
        );
      await holder.release();
    }
  },
};

/** Every scenario, in the order they run. */
export const SCENARIOS: readonly Scenario[] = [F1, F2, F3, F4, F6, F20];

/** Thrown for a scenario name that does not exist; its message lists the ones that do. */
export class UnknownScenarioError extends Error {
  override readonly name = 'UnknownScenarioError';
}

/**
 * The scenarios named (case-insensitive, e.g. `f1`), in run order, each once; all of them for an empty list.
 * @throws UnknownScenarioError naming the bad name and the known ones.
 */
export function selectScenarios(names: readonly string[]): Scenario[] {
  const wanted = new Set<string>();
  for (const raw of names) {
    const name = raw.trim().toUpperCase();
    if (!SCENARIOS.some((s) => s.id === name)) {
      throw new UnknownScenarioError(
        `unknown scenario '${raw}': choose from ${SCENARIOS.map((s) => s.id).join(', ')} (see --list)`,
      );
    }
    wanted.add(name);
  }
  return wanted.size === 0 ? [...SCENARIOS] : SCENARIOS.filter((s) => wanted.has(s.id));
}
