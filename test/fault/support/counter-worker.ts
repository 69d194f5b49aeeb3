// A counter worker: one real process holding a coordinator, a lease and a guarded store (through the guard path
// its set-up names: support/guard-paths.ts), driven over IPC by a fault test (worker-process.ts). The test stops it with SIGSTOP to make a pause that freezes everything —
// its lease keep-alive, its sockets, its open transaction — the way a GC pause or a VM freeze does.
import { Coordinator, type Lease } from '@fenced/coordinator';
import { increment, type CounterStore } from './counter-ops.js';
import { leaseRef } from './fault-world.js';
import { openCounterStore } from './guard-paths.js';
import type { WorkerCommand, WorkerMessage, WorkerRequest, WorkerResult } from './worker-protocol.js';

const name = process.argv[2] ?? 'worker';

interface Session {
  coordinator: Coordinator;
  store: CounterStore;
  lease?: Lease;
  keeper?: NodeJS.Timeout;
}

let session: Session | undefined;
const proceeds = new Map<number, () => void>();

function send(message: WorkerMessage): void {
  // After the test disconnected (teardown), a late reply has nowhere to go: drop it instead of crashing.
  if (process.connected) process.send?.(message, undefined, {}, () => undefined);
}

function current(): Session {
  if (!session) throw new Error('not set up');
  return session;
}

function stopKeeper(s: Session): void {
  if (s.keeper) clearInterval(s.keeper);
  s.keeper = undefined;
}

async function run(request: WorkerRequest): Promise<WorkerResult> {
  const command: WorkerCommand = request;
  switch (command.cmd) {
    case 'setup': {
      const { setup } = command;
      const coordinator = new Coordinator({
        nodes: [...setup.redisUrls],
        nodeTimeoutMs: setup.nodeTimeoutMs,
        maxTtlMs: setup.maxTtlMs,
        retryDelayMs: 50,
        ...(setup.keyPrefix === undefined ? {} : { keyPrefix: setup.keyPrefix }),
      });
      coordinator.on('nodeError', () => undefined);
      const store = await openCounterStore({
        path: setup.path ?? 'kysely',
        connectionString: setup.databaseUrl,
        schema: setup.schema,
        maxConnections: 3,
        applicationName: `fenced-fault-${name}`,
        guardOptions: {
          ...(setup.lockTimeoutMs === undefined ? {} : { lockTimeoutMs: setup.lockTimeoutMs }),
          ...(setup.idleInTransactionTimeoutMs === undefined
            ? {}
            : { idleInTransactionTimeoutMs: setup.idleInTransactionTimeoutMs }),
        },
        ...(setup.prismaClient === undefined ? {} : { prismaClient: setup.prismaClient }),
      });
      session = { coordinator, store };
      await coordinator.ready();
      if (setup.warmUp ?? true) {
        // Loads the scripts on every node, so the scenario's acquire is a single round trip.
        const warm = await coordinator.acquire(`warm-up-${name}-${process.pid}`, { ttlMs: 1_000 });
        await warm.release();
      }
      return { ok: true };
    }
    case 'acquire': {
      const s = current();
      stopKeeper(s);
      const lease = await s.coordinator.acquire(command.resource, {
        ttlMs: command.ttlMs,
        waitMs: command.waitMs,
      });
      s.lease = lease;
      if (command.keepAlive) {
        // A keep-alive like using()'s: it cannot run while the process is stopped, which is the point.
        s.keeper = setInterval(
          () => {
            lease.extend().catch(() => stopKeeper(s));
          },
          Math.max(10, Math.floor(command.ttlMs / 3)),
        );
      }
      return {
        ok: true,
        token: lease.token.toString(),
        leaseRef: leaseRef(lease.id),
        validityMs: lease.validityMs,
      };
    }
    case 'read':
      return { ok: true, value: (await current().store.readOutside(command.resource)).toString() };
    case 'increment': {
      const s = current();
      const lease = s.lease;
      if (!lease) throw new Error('no lease held');
      const afterRead = command.pauseInside
        ? () =>
            new Promise<void>((resolve) => {
              proceeds.set(request.id, resolve);
              send({ kind: 'inside', id: request.id });
            })
        : undefined;
      const value = await increment(
        s.store,
        {
          resource: command.resource,
          token: lease.token,
          leaseRef: leaseRef(lease.id),
          process: name,
          opId: command.opId,
          mode: command.mode,
          ...(command.readBefore === undefined ? {} : { readBefore: BigInt(command.readBefore) }),
        },
        afterRead,
      );
      return { ok: true, value: String(value) };
    }
    case 'now':
      return { ok: true, value: String(Date.now()) };
    case 'proceed':
      proceeds.get(command.of)?.();
      proceeds.delete(command.of);
      return { ok: true };
    case 'release': {
      const s = current();
      stopKeeper(s);
      const lease = s.lease;
      s.lease = undefined;
      await lease?.release();
      return { ok: true };
    }
    case 'teardown':
      await tearDown();
      return { ok: true };
  }
}

async function tearDown(): Promise<void> {
  const s = session;
  session = undefined;
  if (!s) return;
  stopKeeper(s);
  await s.lease?.release().catch(() => undefined);
  await s.coordinator.close().catch(() => undefined);
  await s.store.close().catch(() => undefined);
}

function failure(error: unknown): WorkerResult {
  const code = (error as { code?: unknown } | null)?.code;
  return {
    ok: false,
    code: typeof code === 'string' ? code : error instanceof Error ? error.name : 'ERROR',
    message: error instanceof Error ? error.message : String(error),
  };
}

process.on('message', (request: WorkerRequest) => {
  run(request).then(
    (result) => send({ kind: 'reply', id: request.id, result }),
    (error: unknown) => send({ kind: 'reply', id: request.id, result: failure(error) }),
  );
});

// The test owns this process: when it goes, so do we.
process.on('disconnect', () => {
  void tearDown().finally(() => process.exit(0));
});

send({ kind: 'ready' });
