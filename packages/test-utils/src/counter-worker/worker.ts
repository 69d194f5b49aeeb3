// A counter worker: one real process that takes a lease and reads, increments and writes the counter
// (counter-tables.ts) when its parent tells it to over IPC (protocol.ts; the parent's side is handle.ts). The
// parent pauses it with SIGSTOP/SIGCONT, so a "GC pause" here is a real stopped process with its sockets, its
// lease keep-alive and its open transaction frozen, not a sleep.
//
// Its lock is a @fenced/coordinator lease with a fencing token, or plain Redlock (the `redlock` package, no
// token: the demo's unprotected runs). Its writes go through one guard path (guard-paths.ts), guarded or plain
// as each command says, or over HTTP to a service that guards them.
//
// FENCED_WORKER_DEBUG=1 appends the coordinator's node errors to the message of a failed acquire.
import http from 'node:http';
import { Redis } from 'ioredis';
import Redlock, { type Lock } from 'redlock';
import { Coordinator, type Lease } from '@fenced/coordinator';
import type { FenceTarget } from '@fenced/guarded-store';
import { FENCING_LEASE_ID_HEADER, FENCING_TOKEN_HEADER, StaleTokenError } from '@fenced/shared';
import { increment, type CounterStore } from './counter-store.js';
import { openCounterStore } from './guard-paths.js';
import {
  leaseRef,
  nowMs,
  type LeaseInfo,
  type WorkerCommand,
  type WorkerMessage,
  type WorkerOutcome,
  type WorkerRequest,
  type WorkerSetup,
} from './protocol.js';

const name = process.argv[2] ?? 'worker';
/** Pause between two plain Redlock attempts while waiting for the lock. */
const RETRY_DELAY_MS = 50;
/** How long a plain Redlock release may take before the worker stops waiting for it. */
const PLAIN_RELEASE_WAIT_MS = 300;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface Session {
  readonly setup: WorkerSetup;
  readonly store: CounterStore;
  readonly coordinator?: Coordinator;
  readonly redlock?: Redlock;
  readonly redisClients: Redis[];
  lease?: Lease;
  lock?: Lock;
  leaseInfo?: LeaseInfo;
  keeper?: NodeJS.Timeout;
}

let session: Session | null = null;
const nodeErrors: string[] = [];
const proceeds = new Map<number, () => void>();

class CommandError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly extra: Partial<WorkerOutcome> = {},
  ) {
    super(message);
  }
}

function send(message: WorkerMessage): void {
  // After the parent disconnected (teardown), a late reply has nowhere to go: drop it instead of crashing.
  if (process.connected) process.send?.(message, undefined, {}, () => undefined);
}

function current(): Session {
  if (session === null) throw new CommandError('NOT_SET_UP', 'the worker has no session (setup first)');
  return session;
}

function stopKeeper(s: Session): void {
  if (s.keeper) clearInterval(s.keeper);
  s.keeper = undefined;
}

async function setUp(setup: WorkerSetup): Promise<void> {
  if (session !== null) await tearDown();
  const signing = setup.signing;
  const store = await openCounterStore({
    path: setup.path ?? 'kysely',
    connectionString: setup.databaseUrl,
    schema: setup.schema,
    maxConnections: 3,
    applicationName: `fenced-worker-${name}`,
    guardOptions: {
      ...(setup.lockTimeoutMs === undefined ? {} : { lockTimeoutMs: setup.lockTimeoutMs }),
      ...(setup.idleInTransactionTimeoutMs === undefined
        ? {}
        : { idleInTransactionTimeoutMs: setup.idleInTransactionTimeoutMs }),
      ...(signing ? { verifyKeys: { [signing.keyId]: signing.publicKeyPem } } : {}),
    },
    ...(setup.prismaClient === undefined ? {} : { prismaClient: setup.prismaClient }),
  });
  const warmUpResource = `warm-up-${name}-${process.pid}`;
  if ((setup.lock ?? 'fenced') === 'fenced') {
    const coordinator = new Coordinator({
      nodes: [...setup.redisUrls],
      nodeTimeoutMs: setup.nodeTimeoutMs,
      maxTtlMs: setup.maxTtlMs,
      retryDelayMs: 50,
      ...(setup.keyPrefix === undefined ? {} : { keyPrefix: setup.keyPrefix }),
      ...(signing ? { signingKey: { id: signing.keyId, privateKey: signing.privateKeyPem } } : {}),
    });
    // Expected during the faults; kept so a failed acquire can say what the nodes answered.
    coordinator.on('nodeError', (e) => {
      nodeErrors.push(
        `node ${e.node} ${e.operation}: ${e.error instanceof Error ? e.error.message : String(e.error)}`,
      );
      if (nodeErrors.length > 20) nodeErrors.shift();
    });
    session = { setup, store, coordinator, redisClients: [] };
    await coordinator.ready();
    if (setup.warmUp ?? true) {
      // Loads the Lua scripts on every node, so a later acquire is one round trip: a scenario that holds the
      // replies would otherwise hold a NOSCRIPT and keep the acquire itself from ever reaching the nodes.
      const warm = await coordinator.acquire(warmUpResource, { ttlMs: 1_000 });
      await warm.release();
    }
  } else {
    // No command timeout: a node cut off by a blackhole leaves its vote pending, and plain Redlock goes on
    // with the majority it has, which is exactly the behaviour the demo's scenarios exercise.
    const redisClients = setup.redisUrls.map((url) => {
      const client = new Redis(url, { lazyConnect: true });
      client.on('error', () => undefined);
      return client;
    });
    await Promise.all(redisClients.map((c) => c.connect()));
    const redlock = new Redlock(redisClients, { retryCount: 0, retryDelay: 100, retryJitter: 20 });
    redlock.on('error', () => undefined);
    session = { setup, store, redlock, redisClients };
    if (setup.warmUp ?? true) {
      const warm = await redlock.acquire([warmUpResource], 1_000); // loads the script (see above)
      await warm.release();
    }
  }
}

async function tearDown(): Promise<void> {
  const s = session;
  session = null;
  if (s === null) return;
  await releaseLease(s).catch(() => undefined);
  await s.coordinator?.close().catch(() => undefined);
  for (const client of s.redisClients) client.disconnect();
  await s.store.close().catch(() => undefined);
}

async function acquire(command: Extract<WorkerCommand, { cmd: 'acquire' }>): Promise<Partial<WorkerOutcome>> {
  const { resource, ttlMs, waitMs } = command;
  const s = current();
  stopKeeper(s);
  if (s.coordinator) {
    nodeErrors.length = 0;
    let lease: Lease;
    try {
      lease = await s.coordinator.acquire(resource, { ttlMs, waitMs });
    } catch (error) {
      const e = asCommandError(error);
      if (process.env.FENCED_WORKER_DEBUG) e.message += ` [node errors: ${nodeErrors.join('; ')}]`;
      throw e;
    }
    s.lease = lease;
    s.leaseInfo = {
      resource,
      token: lease.token.toString(),
      leaseRef: leaseRef(lease.id),
      validityMs: lease.validityMs,
      validUntil: nowMs() + lease.remainingMs(),
    };
    if (command.keepAlive) {
      // A keep-alive like using()'s: it cannot run while the process is stopped, which is the point.
      s.keeper = setInterval(
        () => {
          lease.extend().catch(() => stopKeeper(s));
        },
        Math.max(10, Math.floor(ttlMs / 3)),
      );
    }
  } else {
    const lock = await acquirePlain(s.redlock!, resource, ttlMs, waitMs);
    s.lock = lock;
    // Plain Redlock hands out the lock whatever its remaining validity; so does this naive worker.
    const validUntil = nowMs() + (lock.expiration - Date.now());
    s.leaseInfo = {
      resource,
      leaseRef: leaseRef(lock.value),
      validityMs: Math.round(validUntil - nowMs()),
      validUntil,
    };
  }
  return { lease: s.leaseInfo };
}

/**
 * One plain Redlock attempt at a time, retried here while `waitMs` lasts: the package's own retries measure
 * the validity from the first attempt, which would misstate the lock a waiting worker finally gets.
 */
async function acquirePlain(
  redlock: Redlock,
  resource: string,
  ttlMs: number,
  waitMs: number,
): Promise<Lock> {
  const deadline = nowMs() + waitMs;
  for (;;) {
    try {
      return await redlock.acquire([resource], ttlMs, { retryCount: 0 });
    } catch (error) {
      if (nowMs() + RETRY_DELAY_MS > deadline)
        throw new CommandError(
          'LOCKED',
          `not granted: ${error instanceof Error ? error.message : String(error)}`,
        );
      await sleep(RETRY_DELAY_MS + Math.random() * 20);
    }
  }
}

function heldLease(s: Session): Lease {
  if (!s.lease) throw new CommandError('NO_LEASE', 'no lease held: a guarded read or write runs under one');
  return s.lease;
}

async function read(resource: string, guarded: boolean): Promise<Partial<WorkerOutcome>> {
  const s = current();
  if (!guarded) return { value: Number(await s.store.readOutside(resource)) };
  // A guarded read fences in (G3): it is never older than the fence.
  const value = await s.store.guarded(heldLease(s), undefined, async (tx) => Number(await tx.read(resource)));
  return { value };
}

async function write(command: Extract<WorkerCommand, { cmd: 'write' }>): Promise<Partial<WorkerOutcome>> {
  const { resource, value, guarded, forgeToken } = command;
  const s = current();
  const ref = s.leaseInfo?.leaseRef ?? 'none';
  if (command.httpUrl !== undefined) return writeOverHttp(s, command.httpUrl, value, ref);
  if (!guarded) {
    const token = s.lease?.token ?? null;
    await s.store.unguarded(async (tx) => {
      await tx.write({ resource, token, leaseRef: ref, process: name, via: 'db' }, BigInt(value));
      return value;
    });
    return { value };
  }
  const lease = heldLease(s);
  // A forged write presents another token with the lease's own id and proof: a signing store refuses it.
  const fence: FenceTarget =
    forgeToken === undefined
      ? lease
      : { resource: lease.resource, token: BigInt(forgeToken), leaseId: lease.id, proof: lease.proof };
  await s.store.guarded(fence, undefined, async (tx) => {
    await tx.write({ resource, token: fence.token, leaseRef: ref, process: name, via: 'db' }, BigInt(value));
    return value;
  });
  return { value };
}

async function writeOverHttp(
  s: Session,
  url: string,
  value: number,
  ref: string,
): Promise<Partial<WorkerOutcome>> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (s.lease) {
    headers[FENCING_TOKEN_HEADER] = s.lease.token.toString();
    headers[FENCING_LEASE_ID_HEADER] = s.lease.id;
  }
  const { status, body } = await put(url, headers, JSON.stringify({ value, worker: name, leaseRef: ref }));
  if (status === 200) return { value, status };
  let code = `HTTP_${status}`;
  let message = body;
  try {
    const parsed = JSON.parse(body) as { error?: { code?: string; message?: string } };
    code = parsed.error?.code ?? code;
    message = parsed.error?.message ?? message;
  } catch {
    // not JSON: keep the raw body
  }
  // The 409 body names both tokens; carry them like a StaleTokenError does.
  const tokens = /presented (\d+), the fence is at (\d+)/.exec(message);
  throw new CommandError(code, `${status} ${code}: ${message}`, {
    status,
    ...(tokens ? { presented: tokens[1], current: tokens[2] } : {}),
  });
}

/** One PUT on a fresh connection (no keep-alive: a connection must not outlive a fault proxy). */
function put(
  url: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'PUT', headers, agent: false }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body);
  });
}

async function incrementCommand(
  request: Extract<WorkerRequest, { cmd: 'increment' }>,
): Promise<Partial<WorkerOutcome>> {
  const s = current();
  const lease = heldLease(s);
  const afterRead = request.pauseInside
    ? () =>
        new Promise<void>((resolve) => {
          proceeds.set(request.id, resolve);
          send({ kind: 'inside', id: request.id });
        })
    : undefined;
  const value = await increment(
    s.store,
    {
      resource: request.resource,
      token: lease.token,
      leaseRef: leaseRef(lease.id),
      process: name,
      opId: request.opId,
      mode: request.mode,
      ...(request.readBefore === undefined ? {} : { readBefore: BigInt(request.readBefore) }),
    },
    afterRead,
  );
  return { value };
}

async function releaseLease(s: Session): Promise<void> {
  stopKeeper(s);
  const { lease, lock } = s;
  s.lease = undefined;
  s.lock = undefined;
  s.leaseInfo = undefined;
  if (lease) await lease.release();
  // Plain Redlock throws when the lock already expired, and waits forever when a node it cannot reach holds
  // the deciding vote (F4, F6): give up after a moment, the lock expires by itself.
  if (lock) await Promise.race([lock.release().catch(() => undefined), sleep(PLAIN_RELEASE_WAIT_MS)]);
}

function asCommandError(error: unknown): CommandError {
  if (error instanceof CommandError) return error;
  if (error instanceof StaleTokenError) {
    return new CommandError('STALE_TOKEN', error.message, {
      presented: error.presented.toString(),
      current: error.current.toString(),
    });
  }
  const code = (error as { code?: unknown } | null)?.code;
  return new CommandError(
    typeof code === 'string' ? code : error instanceof Error ? error.name : 'ERROR',
    error instanceof Error ? error.message : String(error),
  );
}

async function run(request: WorkerRequest): Promise<Partial<WorkerOutcome>> {
  const command: WorkerCommand = request;
  switch (command.cmd) {
    case 'setup':
      await setUp(command.setup);
      return {};
    case 'acquire':
      return acquire(command);
    case 'read':
      return read(command.resource, command.guarded ?? false);
    case 'write':
      return write(command);
    case 'increment':
      return incrementCommand({ ...command, id: request.id });
    case 'proceed':
      proceeds.get(command.of)?.();
      proceeds.delete(command.of);
      return {};
    case 'now':
      return { value: Date.now() };
    case 'release':
      await releaseLease(current());
      return {};
    case 'teardown':
      await tearDown();
      return {};
  }
}

process.on('message', (request: WorkerRequest) => {
  const startedAt = nowMs();
  run(request).then(
    (result) =>
      send({ kind: 'reply', id: request.id, outcome: { ok: true, startedAt, endedAt: nowMs(), ...result } }),
    (error: unknown) => {
      const e = asCommandError(error);
      send({
        kind: 'reply',
        id: request.id,
        outcome: { ok: false, startedAt, endedAt: nowMs(), code: e.code, message: e.message, ...e.extra },
      });
    },
  );
});

// The parent owns this process: when it goes away, so do we.
process.on('disconnect', () => {
  void tearDown().finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 1_000).unref();
});

send({ kind: 'ready', pid: process.pid });
