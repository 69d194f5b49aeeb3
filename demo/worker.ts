// A demo worker: one real process that takes a lock and reads and writes the counter when the orchestrator
// (demo/run-demo.ts) tells it to over IPC. The orchestrator pauses it with SIGSTOP/SIGCONT, so a "GC pause"
// here is a real stopped process with its sockets open, not a sleep.
//
// Unprotected mode: plain Redlock (the `redlock` package) and plain UPDATEs; the lock is all there is.
// Fenced mode: a @fenced/coordinator lease with its fencing token, and every read and write in a guarded
// transaction of @fenced/guarded-store (or through the counter service's fencedWrites middleware).
//
// FENCED_DEMO_DEBUG=1 appends the coordinator's node errors to the message of a failed acquire.
import { createHash } from 'node:crypto';
import http from 'node:http';
import { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import Redlock, { type Lock } from 'redlock';
import { Coordinator, type Lease } from '@fenced/coordinator';
import { GuardedStore, createDatabase } from '@fenced/guarded-store';
import { FENCING_LEASE_ID_HEADER, FENCING_TOKEN_HEADER, StaleTokenError } from '@fenced/shared';
import { readCounter, writeCounter, type CounterDatabase } from './counter-table.js';
import {
  nowMs,
  type LeaseInfo,
  type WorkerCommand,
  type WorkerOutcome,
  type WorkerReply,
  type WorkerRequest,
  type WorkerSetup,
} from './worker-protocol.js';

const name = process.argv[2] ?? 'worker';
/** Pause between two plain Redlock attempts while waiting for the lock. */
const RETRY_DELAY_MS = 50;
/** How long a plain Redlock release may take before the worker stops waiting for it. */
const PLAIN_RELEASE_WAIT_MS = 300;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface Session {
  readonly setup: WorkerSetup;
  readonly db: Kysely<CounterDatabase>;
  readonly store: GuardedStore<CounterDatabase>;
  readonly coordinator?: Coordinator;
  readonly redlock?: Redlock;
  readonly redisClients: Redis[];
  lease?: Lease;
  lock?: Lock;
  leaseInfo?: LeaseInfo;
}

let session: Session | null = null;
const nodeErrors: string[] = [];

class CommandError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly extra: Partial<WorkerOutcome> = {},
  ) {
    super(message);
  }
}

function digest(secret: string): string {
  return createHash('sha256').update(secret).digest('hex').slice(0, 8);
}

function current(): Session {
  if (session === null) throw new CommandError('NOT_SET_UP', 'the worker has no session (setup first)');
  return session;
}

async function setUp(setup: WorkerSetup): Promise<void> {
  if (session !== null) await tearDown();
  const db = createDatabase<CounterDatabase>({
    connectionString: setup.databaseUrl,
    searchPath: setup.schema,
    maxConnections: 3,
    applicationName: `fenced-demo-${name}`,
  });
  const signing = setup.signing;
  const store = new GuardedStore(db, {
    schema: setup.schema,
    ...(signing ? { verifyKeys: { [signing.keyId]: signing.publicKeyPem } } : {}),
  });
  if (setup.mode === 'fenced') {
    const coordinator = new Coordinator({
      nodes: [...setup.redisUrls],
      keyPrefix: setup.keyPrefix,
      nodeTimeoutMs: setup.nodeTimeoutMs,
      maxTtlMs: setup.maxTtlMs,
      ...(signing ? { signingKey: { id: signing.keyId, privateKey: signing.privateKeyPem } } : {}),
    });
    // Expected during the faults; kept so a failed acquire can say what the nodes answered.
    coordinator.on('nodeError', (e) => {
      nodeErrors.push(
        `node ${e.node} ${e.operation}: ${e.error instanceof Error ? e.error.message : String(e.error)}`,
      );
      if (nodeErrors.length > 20) nodeErrors.shift();
    });
    session = { setup, db, store, coordinator, redisClients: [] };
    await coordinator.ready();
    // Loads the Lua scripts on every node, so a later acquire is one round trip: F2 holds the replies, and
    // a held NOSCRIPT would keep the acquire itself from ever reaching the nodes.
    const warm = await coordinator.acquire(`demo-warmup:${name}`, { ttlMs: 1_000 });
    await warm.release();
  } else {
    // No command timeout: a node cut off by a blackhole leaves its vote pending, and plain Redlock goes on
    // with the majority it has, which is exactly the behaviour the scenarios exercise.
    const redisClients = setup.redisUrls.map((url) => {
      const client = new Redis(url, { lazyConnect: true });
      client.on('error', () => undefined);
      return client;
    });
    await Promise.all(redisClients.map((c) => c.connect()));
    const redlock = new Redlock(redisClients, { retryCount: 0, retryDelay: 100, retryJitter: 20 });
    redlock.on('error', () => undefined);
    session = { setup, db, store, redlock, redisClients };
    const warm = await redlock.acquire([`demo-warmup:${name}`], 1_000); // loads the script (see above)
    await warm.release();
  }
}

async function tearDown(): Promise<void> {
  const s = session;
  session = null;
  if (s === null) return;
  await releaseLease(s).catch(() => undefined);
  await s.coordinator?.close().catch(() => undefined);
  for (const client of s.redisClients) client.disconnect();
  await s.db.destroy().catch(() => undefined);
}

async function acquire(resource: string, ttlMs: number, waitMs: number): Promise<Partial<WorkerOutcome>> {
  const s = current();
  if (s.coordinator) {
    nodeErrors.length = 0;
    try {
      const lease = await s.coordinator.acquire(resource, { ttlMs, waitMs });
      s.lease = lease;
      s.leaseInfo = {
        resource,
        token: lease.token.toString(),
        leaseRef: digest(lease.id),
        validityMs: lease.validityMs,
        validUntil: nowMs() + lease.remainingMs(),
      };
    } catch (error) {
      const e = asCommandError(error);
      if (process.env.FENCED_DEMO_DEBUG) e.message += ` [node errors: ${nodeErrors.join('; ')}]`;
      throw e;
    }
  } else {
    const lock = await acquirePlain(s.redlock!, resource, ttlMs, waitMs);
    s.lock = lock;
    // Plain Redlock hands out the lock whatever its remaining validity; so does this naive worker.
    const validUntil = nowMs() + (lock.expiration - Date.now());
    s.leaseInfo = {
      resource,
      leaseRef: digest(lock.value),
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
  if (!s.lease)
    throw new CommandError('NO_LEASE', 'no lease held: a fenced worker reads and writes under one');
  return s.lease;
}

async function read(counter: string): Promise<Partial<WorkerOutcome>> {
  const s = current();
  if (s.setup.mode === 'unprotected') return { value: await readCounter(s.db, s.setup.schema, counter) };
  // Fenced: the read is a guarded transaction too, so it fences in (G3) and is never older than the fence.
  try {
    const value = await s.store.run(heldLease(s), (trx) => readCounter(trx, s.setup.schema, counter));
    return { value };
  } catch (error) {
    throw asCommandError(error);
  }
}

async function write(
  counter: string,
  value: number,
  via: 'db' | 'http',
  serviceUrl: string | undefined,
  forgeToken: string | undefined,
): Promise<Partial<WorkerOutcome>> {
  const s = current();
  const leaseRef = s.leaseInfo?.leaseRef ?? 'none';
  if (via === 'http') return writeOverHttp(s, counter, value, leaseRef, serviceUrl);
  if (s.setup.mode === 'unprotected') {
    await s.db
      .transaction()
      .execute((trx) =>
        writeCounter(trx, s.setup.schema, { counter, value, worker: name, leaseRef, token: null, via }),
      );
    return { value };
  }
  const lease = heldLease(s);
  // A forged write presents another token with the lease's own id and proof: a signing store refuses it.
  const fence =
    forgeToken === undefined
      ? lease
      : { resource: lease.resource, token: BigInt(forgeToken), leaseId: lease.id, proof: lease.proof };
  try {
    await s.store.run(fence, (trx) =>
      writeCounter(trx, s.setup.schema, { counter, value, worker: name, leaseRef, token: fence.token, via }),
    );
  } catch (error) {
    throw asCommandError(error);
  }
  return { value };
}

async function writeOverHttp(
  s: Session,
  counter: string,
  value: number,
  leaseRef: string,
  serviceUrl: string | undefined,
): Promise<Partial<WorkerOutcome>> {
  if (!serviceUrl) throw new CommandError('NO_SERVICE', 'an http write needs the service url');
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (s.setup.mode === 'fenced') {
    const lease = heldLease(s);
    headers[FENCING_TOKEN_HEADER] = lease.token.toString();
    headers[FENCING_LEASE_ID_HEADER] = lease.id;
  }
  const { status, body } = await put(
    `${serviceUrl}/counters/${counter}`,
    headers,
    JSON.stringify({ value, worker: name, leaseRef }),
  );
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

/** One PUT on a fresh connection (no keep-alive: a connection must not outlive the run's fault proxy). */
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

async function releaseLease(s: Session): Promise<void> {
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
  const code = (error as { code?: unknown }).code;
  return new CommandError(
    typeof code === 'string' ? code : error instanceof Error ? error.name : 'ERROR',
    error instanceof Error ? error.message : String(error),
  );
}

async function run(command: WorkerCommand): Promise<Partial<WorkerOutcome>> {
  switch (command.cmd) {
    case 'setup':
      await setUp(command.setup);
      return {};
    case 'acquire':
      return acquire(command.resource, command.ttlMs, command.waitMs);
    case 'read':
      return read(command.counter);
    case 'write':
      return write(command.counter, command.value, command.via, command.serviceUrl, command.forgeToken);
    case 'release':
      await releaseLease(current());
      return {};
    case 'teardown':
      await tearDown();
      return {};
  }
}

process.on('message', (message: WorkerRequest) => {
  const startedAt = nowMs();
  run(message).then(
    (result) => reply({ id: message.id, outcome: { ok: true, startedAt, endedAt: nowMs(), ...result } }),
    (error: unknown) => {
      const e = asCommandError(error);
      reply({
        id: message.id,
        outcome: { ok: false, startedAt, endedAt: nowMs(), code: e.code, message: e.message, ...e.extra },
      });
    },
  );
});

function reply(message: WorkerReply): void {
  process.send?.(message);
}

// The orchestrator owns this process: when it goes away, so do we.
process.on('disconnect', () => {
  void tearDown().finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 1_000).unref();
});

process.send?.({ ready: true, pid: process.pid });
