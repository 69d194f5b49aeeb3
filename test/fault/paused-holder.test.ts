// F1, F2, F12: a lease holder that stops (GC pause, VM freeze, SIGSTOP) and comes back after its lease ended.
// The lock cannot help — a paused process does not know it was paused — so the guard must refuse its writes.
// F1 and F12 run through every guard path (test/fixtures/fault/guard-paths.ts): holder and successor write through the Kysely
// store, node-postgres with PgGuard, Prisma with PrismaGuard, or Drizzle with DrizzleGuard.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Coordinator } from '@fenced/coordinator';
import { proxyEach } from '@fenced/test-utils/fault-proxy';
import { History } from '@fenced/test-utils/history';
import {
  GUARD_PATHS,
  holderIncrement,
  recordedIncrement,
  type CounterTarget,
  type GuardPath,
  type WriteMode,
} from '../fixtures/fault/counter-ops.js';
import { FaultWorld, unique } from '../fixtures/fault/fault-world.js';
import { naiveLock } from '../fixtures/fault/naive-token-source.js';
import {
  judge,
  recordedAcquire,
  recordedRelease,
  sleep,
  until,
  type Verdict,
} from '../fixtures/fault/verdict.js';
import { WorkerProcess } from '../fixtures/fault/worker-process.js';

const TTL_MS = 600;
/** Longer than a lease: the paused holder's lease has certainly expired on every node when it resumes. */
const PAUSE_MS = TTL_MS * 2;
const IDLE_TIMEOUT_MS = PAUSE_MS + 1_500;

let world: FaultWorld;
let successor: Coordinator;

beforeAll(async () => {
  world = await FaultWorld.start();
  successor = world.coordinator();
  await successor.ready();
});

afterAll(async () => {
  await world?.close();
});

/** A, the holder: a worker process writing through `path`. */
function startHolder(path: GuardPath): Promise<WorkerProcess> {
  return WorkerProcess.start('A', new History(), {
    redisUrls: world.urls,
    nodeTimeoutMs: 400,
    maxTtlMs: 3_000,
    databaseUrl: world.postgres.url,
    schema: world.schema.schema,
    // F12: a guarded transaction left idle by a stopped client is ended by Postgres after this long, which frees
    // the fence row for the successor. Longer than the pause before B starts, so B really waits on the row.
    idleInTransactionTimeoutMs: IDLE_TIMEOUT_MS,
    path,
    ...(path === 'prisma' ? { prismaClient: world.prismaClientFile() } : {}),
  });
}

/**
 * B, the successor: acquires (waiting out A's lease), increments once in `mode` through `store`, releases.
 * `whileWriting` runs once B's increment has started.
 */
async function successorIncrements(
  history: History,
  resource: string,
  mode: WriteMode,
  store: CounterTarget = world.store,
  whileWriting: () => Promise<void> = () => Promise.resolve(),
): Promise<void> {
  const lease = await recordedAcquire(history, 'B', successor, resource, { ttlMs: 3_000, waitMs: 10_000 });
  if (!lease) throw new Error('the successor never got the lease');
  const write = recordedIncrement(history, store, holderIncrement('B', lease, mode)).catch(() => undefined);
  await whileWriting();
  await write;
  await recordedRelease(history, 'B', lease);
}

/** Whether some session of the world's store is waiting for a row lock (B on the fence row A holds). */
async function someoneWaitsOnALock(): Promise<boolean> {
  const { rows } = await world.admin.query<{ n: number }>(
    `select count(*)::int as n from pg_stat_activity
      where application_name = 'fenced-fault' and wait_event_type = 'Lock'`,
  );
  return (rows[0]?.n ?? 0) > 0;
}

/** A holder process and the successor's store, both writing through one guard path. */
interface PathUnderTest {
  readonly holder: WorkerProcess;
  readonly store: CounterTarget;
}

/**
 * F1: A (a real process) acquires with a keep-alive, is stopped with SIGSTOP inside its critical section for
 * longer than the ttl — so no extension runs — and B takes over and increments. Then A resumes and increments.
 * Unguarded, A acts on the value it read before the pause, as a real critical section would.
 */
async function holderPausedInCriticalSection(
  { holder, store }: PathUnderTest,
  mode: WriteMode,
): Promise<Verdict> {
  const resource = unique('f1');
  await world.ensureCounter(resource);
  const history = new History();
  holder.record(history);
  const lease = await holder.acquire(resource, { ttlMs: TTL_MS, keepAlive: true });
  if (!lease) throw new Error('A did not get the lease');
  const readBefore = mode === 'guarded' ? undefined : await holder.read(resource);
  holder.pause();
  await sleep(PAUSE_MS);
  await successorIncrements(history, resource, mode, store);
  holder.resume();
  await holder.increment(resource, {
    mode,
    opId: `A-${resource}`,
    ...(readBefore === undefined ? {} : { readBefore }),
  });
  await holder.release();
  return judge(world, history, [resource]);
}

/**
 * F12: A opens its guarded transaction, reads, and is stopped before it writes; B's fence statement waits on
 * the fence row A holds. Postgres ends A's idle transaction (idle_in_transaction_session_timeout), B commits,
 * and A's write on resume finds its connection gone.
 */
async function holderPausedInsideTransaction(
  { holder, store }: PathUnderTest,
  mode: WriteMode,
): Promise<Verdict> {
  const resource = unique('f12');
  await world.ensureCounter(resource);
  const history = new History();
  holder.record(history);
  const lease = await holder.acquire(resource, { ttlMs: TTL_MS, keepAlive: true });
  if (!lease) throw new Error('A did not get the lease');
  let inside!: () => void;
  const isInside = new Promise<void>((resolve) => (inside = resolve));
  const aIncrement = holder.increment(resource, { mode, opId: `A-${resource}`, onInside: () => inside() });
  await isInside;
  holder.pause();
  await sleep(PAUSE_MS);
  // Guarded, B's fence statement queues behind the fence row A's stopped transaction holds, until Postgres ends
  // A's idle session; unguarded, nothing makes B wait.
  await successorIncrements(history, resource, mode, store, async () => {
    if (mode === 'guarded') await until('B waiting on the fence row A holds', someoneWaitsOnALock);
  });
  holder.resume();
  holder.proceed();
  await aIncrement;
  await holder.release();
  return judge(world, history, [resource]);
}

describe.each(GUARD_PATHS)('writing through the %s guard path', (path) => {
  let under: PathUnderTest | undefined;
  const setUp = (): PathUnderTest => {
    if (!under) throw new Error(`the ${path} path was not set up`);
    return under;
  };

  beforeAll(async () => {
    under = { store: await world.counterStore(path), holder: await startHolder(path) };
  });

  afterAll(async () => {
    await under?.holder.stop();
  });

  describe('a holder paused in its critical section (F1)', () => {
    it('cannot commit after its successor fenced in: the guard refuses its stale token', async () => {
      const verdict = await holderPausedInCriticalSection(setUp(), 'guarded');
      expect(verdict.violations).toEqual([]);
      expect(verdict.info.join('\n')).toMatch(/final 1, 1 increments ok/);
    });

    it('negative control: without the guard its write lands after the successor’s and loses an update', async () => {
      const verdict = await holderPausedInCriticalSection(setUp(), 'unguarded');
      expect(verdict.ok).toBe(false);
      expect(verdict.violations.join('\n')).toMatch(/below the high-water mark/);
      expect(verdict.violations.join('\n')).toMatch(/lost update/);
    });
  });

  describe('a holder paused inside an open guarded transaction (F12)', () => {
    it('is cut off by Postgres, its successor commits, and its late write never lands', async () => {
      const verdict = await holderPausedInsideTransaction(setUp(), 'guarded');
      expect(verdict.violations).toEqual([]);
      expect(verdict.info.join('\n')).toMatch(/final 1, 1 increments ok, 1 unknown/);
    });

    it('negative control: in a plain transaction the resumed holder overwrites its successor', async () => {
      const verdict = await holderPausedInsideTransaction(setUp(), 'unguarded');
      expect(verdict.ok).toBe(false);
      expect(verdict.violations.join('\n')).toMatch(/lost update/);
    });
  });
});

describe('a holder paused right after sending its acquire (F2)', () => {
  // Simulated by holding A's replies in the network (FaultProxy 'hold', to-client) while A's per-node timeout
  // is longer than the hold: the same effect as a process stopped right after sending — the acquire is applied
  // on the nodes, A reads the replies only when it "resumes" — without racing SIGSTOP against the send.
  async function acquireRepliesHeld(protectedRun: boolean): Promise<Verdict> {
    const resource = unique('f2');
    await world.ensureCounter(resource);
    const history = new History();
    const links = await proxyEach(world.urls);
    try {
      if (protectedRun) {
        const a = world.coordinator({ nodes: links.urls, nodeTimeoutMs: 10_000 });
        await a.ready();
        links.setMode('hold', { direction: 'to-client' });
        const aAcquire = recordedAcquire(history, 'A', a, resource, { ttlMs: TTL_MS });
        await until('A’s acquire reaching the nodes', () =>
          links.proxies.every((p) => p.stats.queuedBytes > 0),
        );
        await sleep(PAUSE_MS);
        await successorIncrements(history, resource, 'guarded');
        links.release();
        const lease = await aAcquire;
        // A holds a lease only if the coordinator handed out one after its validity ran out; it must not.
        if (lease) {
          await recordedIncrement(history, world.store, holderIncrement('A', lease, 'guarded')).catch(
            () => undefined,
          );
        }
        return await judge(world, history, [resource]);
      }
      // Negative control: plain Redlock without the validity check, naive INCR tokens taken with the lock, and
      // no guard. A believes whatever majority of OKs it finally reads.
      const aClients = links.urls.map((url) => world.client(url));
      const bClients = world.urls.map((url) => world.client(url));
      await world.nodesAnswer([...aClients, ...bClients]);
      links.setMode('hold', { direction: 'to-client' });
      const aPending = history.invoke('A', 'acquire', resource);
      const aLock = naiveLock(aClients, resource, TTL_MS);
      await until('A’s acquire reaching the nodes', () =>
        links.proxies.every((p) => p.stats.queuedBytes > 0),
      );
      await sleep(PAUSE_MS);
      const bPending = history.invoke('B', 'acquire', resource);
      const bLock = await naiveLock(bClients, resource, 3_000);
      if (!bLock) throw new Error('B did not get the naive lock');
      bPending.ok({ token: bLock.token, leaseId: bLock.value });
      await recordedIncrement(history, world.store, {
        resource,
        token: bLock.token,
        leaseRef: bLock.value,
        process: 'B',
        opId: `B-${resource}`,
        mode: 'unguarded',
      });
      links.release();
      const granted = await aLock;
      if (!granted) throw new Error('A’s naive lock was not granted');
      aPending.ok({ token: granted.token, leaseId: granted.value });
      await recordedIncrement(history, world.store, {
        resource,
        token: granted.token,
        leaseRef: granted.value,
        process: 'A',
        opId: `A-${resource}`,
        mode: 'unguarded',
      });
      return await judge(world, history, [resource]);
    } finally {
      await links.stop();
    }
  }

  it('never gets a lease whose validity ran out while its replies waited', async () => {
    const verdict = await acquireRepliesHeld(true);
    expect(verdict.violations).toEqual([]);
    expect(verdict.info.join('\n')).toMatch(/final 1, 1 increments ok/);
  });

  it('negative control: plain Redlock with naive tokens and no guard lets the late holder overwrite', async () => {
    const verdict = await acquireRepliesHeld(false);
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/below the high-water mark/);
  });
});
