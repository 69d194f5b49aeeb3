// The floor (issue 21, item 1): the Redis writes one fenced acquire+release cycle makes, with nothing else — no
// script, no reads, no token comparison, no MULTI/EXEC — sent by the cheapest client this bench can build. What it
// reaches on the same five fsync-always nodes at the same concurrency is the nodes' own limit on this machine;
// fenced ÷ floor says how much of it the coordinator leaves on the table.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { installedVersion, type HeldLock, type LockLibrary } from '../lock-library.js';

/** The column name of the floor in the throughput tables. */
export const FLOOR_NAME = 'floor';

/**
 * Key prefix of the floor's keys: as long as fenced's default `fenced`, so keys, values and AOF records have
 * the same sizes as the coordinator's.
 */
const FLOOR_PREFIX = 'floor0';

interface Queued {
  readonly command: (string | number)[];
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * One node of the floor: commands queued during one event-loop turn go out together as one ioredis pipeline
 * (one socket write), flushed by `setImmediate` as fenced's `NodeConnection` flushes its batches; several
 * pipelines may be in flight on the connection (unlike ioredis' auto-pipelining, which waits for the previous
 * one). The same batching fenced does, with plain commands instead of a script.
 */
class FloorNode {
  private queue: Queued[] = [];
  private scheduled = false;
  /** Pipelines sent (each one socket write of this client, and one round trip). */
  writes = 0;

  constructor(readonly client: Redis) {}

  send(command: (string | number)[]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.queue.push({ command, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    this.writes++;
    this.client
      .pipeline(batch.map((q) => q.command))
      .exec()
      .then(
        (replies) => {
          batch.forEach((q, i) => {
            const [error, reply] = replies?.[i] ?? [new Error('no reply'), null];
            if (error) q.reject(error);
            else q.resolve(reply);
          });
        },
        (error: unknown) => {
          for (const q of batch) q.reject(error);
        },
      );
  }
}

/**
 * Resolves once a majority of `calls` succeeded (as fenced's acquire and release resolve at quorum, and leave
 * the other nodes' replies to arrive later); rejects once a majority is out of reach.
 */
function majority(calls: readonly Promise<unknown>[]): Promise<void> {
  const quorum = Math.floor(calls.length / 2) + 1;
  return new Promise((resolve, reject) => {
    let ok = 0;
    let failed = 0;
    for (const call of calls) {
      call.then(
        () => {
          if (++ok === quorum) resolve();
        },
        (error: unknown) => {
          if (++failed === calls.length - quorum + 1) {
            reject(error instanceof Error ? error : new Error(String(error)));
          }
        },
      );
    }
  });
}

/**
 * The floor as a lock library (so the throughput scenario drives it like the others): an "acquire" writes, on
 * every node, the lease key (`SET key value NX PX ttl`, the value `<22-character id>|<19-digit token>` as
 * fenced's `<leaseId>|<token>`) and the token register (`SET`), the two writes acquire.lua makes; a "release"
 * deletes the lease key (`DEL`), the one write release.lua makes (its PUBLISH is left out: nobody listens, and
 * the floor is the writes). Each step resolves at a majority of nodes. It is not a lock: a refused NX is not
 * checked, and it cannot wait.
 */
export function createFloorLibrary(urls: readonly string[]): LockLibrary & {
  /** Pipelines sent so far, over all nodes. */
  readonly writes: () => number;
} {
  const nodes = urls.map((url) => new FloorNode(new Redis(url, { enableAutoPipelining: false })));
  let pool = Buffer.alloc(0);
  let offset = 0;
  const leaseId = (): string => {
    if (offset + 16 > pool.length) {
      pool = randomBytes(16 * 256);
      offset = 0;
    }
    const id = pool.toString('base64url', offset, offset + 16);
    offset += 16;
    return id;
  };
  // Tokens as fenced's first guess makes them: milliseconds << 20, 19 digits today.
  let lastToken = 0n;
  const token = (): string => {
    const candidate = BigInt(Date.now()) << 20n;
    lastToken = candidate > lastToken ? candidate : lastToken + 1n;
    return String(lastToken);
  };
  const acquire = async (resource: string, ttlMs: number): Promise<HeldLock> => {
    const lease = `${FLOOR_PREFIX}:{${resource}}:lease`;
    const register = `${FLOOR_PREFIX}:{${resource}}:token`;
    const t = token();
    const value = `${leaseId()}|${t}`;
    const calls: Promise<unknown>[] = [];
    for (const node of nodes) {
      calls.push(node.send(['set', lease, value, 'PX', ttlMs, 'NX']));
      calls.push(node.send(['set', register, t]));
    }
    // A node's two writes are one vote: both must have been answered.
    await majority(nodes.map((_, i) => Promise.all([calls[2 * i], calls[2 * i + 1]])));
    return { release: () => majority(nodes.map((node) => node.send(['del', lease]))) };
  };
  return {
    name: FLOOR_NAME,
    packageName: 'ioredis',
    version: installedVersion('ioredis'),
    configuration: {
      writes:
        'per node and cycle: SET lease NX PX + SET register (acquire), DEL lease (release); no script, no reads',
      keys: `${FLOOR_PREFIX}:{resource}:lease / :token (as long as fenced's)`,
      batching:
        'one pipeline per node per event-loop turn (setImmediate), several in flight; each step resolves at a majority',
      clients: 'ioredis, auto-pipelining off',
    },
    waitStrategy: 'none (not a lock)',
    acquire,
    acquireWaiting: () => Promise.reject(new Error('the floor does not wait')),
    writes: () => nodes.reduce((a, n) => a + n.writes, 0),
    close: async () => {
      await Promise.all(nodes.map((n) => n.client.quit().catch(() => n.client.disconnect())));
    },
  };
}
