// The floor (issue 21, item 1): the Redis writes one fenced acquire+release cycle makes, with nothing else — no
// script, no reads, no token comparison, no MULTI/EXEC — sent by the cheapest client this bench can build. What it
// reaches on the same five fsync-always nodes at the same concurrency is the nodes' own limit on this machine;
// fenced ÷ floor says how much of it the coordinator leaves on the table.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { installedVersion, type HeldLock, type LockLibrary } from '../lock-library.js';

/** The column name of the floor in the throughput and scale tables. */
export const FLOOR_NAME = 'floor';

/**
 * Key prefix of the floor's keys: as long as fenced's default `fenced`, so keys, values and AOF records have
 * the same sizes as the coordinator's.
 */
const FLOOR_PREFIX = 'floor0';

/**
 * One node of the floor, on a raw socket with nothing between the bench and Redis but RESP: commands queued
 * during one event-loop turn go out together as one socket write, flushed by `setImmediate` as fenced's
 * `NodeConnection` flushes its batches, and any number of writes may be in flight (unlike ioredis'
 * auto-pipelining, which waits for the previous pipeline). The same batching fenced does, with plain commands
 * instead of a script, and without a client library's per-command work. Replies come back in order; the floor's
 * commands only ever answer `+OK`, `$-1` (a refused NX), `:n` (DEL) or an error.
 */
class FloorNode {
  private queued: string[] = [];
  private queuedCallbacks: ((reply: Error | undefined) => void)[] = [];
  private readonly waiting: ((reply: Error | undefined) => void)[] = [];
  private head = 0;
  private scheduled = false;
  private rest = '';
  private closedWith: Error | undefined;

  private constructor(private readonly socket: net.Socket) {
    socket.setNoDelay(true);
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => this.onData(chunk));
    const fail = (error: Error): void => {
      this.closedWith ??= error;
      const pending = this.waiting.splice(this.head).concat(this.queuedCallbacks.splice(0));
      this.head = 0;
      this.waiting.length = 0;
      for (const callback of pending) callback(this.closedWith);
    };
    socket.on('error', fail);
    socket.on('close', () => fail(new Error('floor: connection closed')));
  }

  static connect(url: string): Promise<FloorNode> {
    const { hostname, port } = new URL(url);
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: hostname, port: Number(port) });
      socket.once('error', reject);
      socket.once('connect', () => {
        socket.off('error', reject);
        resolve(new FloorNode(socket));
      });
    });
  }

  send(args: readonly (string | number)[]): Promise<void> {
    if (this.closedWith !== undefined) return Promise.reject(this.closedWith);
    return new Promise((resolve, reject) => {
      let command = `*${args.length}\r\n`;
      for (const arg of args) {
        const text = String(arg);
        command += `$${Buffer.byteLength(text)}\r\n${text}\r\n`;
      }
      this.queued.push(command);
      this.queuedCallbacks.push((error) => (error === undefined ? resolve() : reject(error)));
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    if (this.queued.length === 0) return;
    const text = this.queued.join('');
    this.queued = [];
    for (const callback of this.queuedCallbacks) this.waiting.push(callback);
    this.queuedCallbacks = [];
    this.socket.write(text, 'utf8');
  }

  private onData(chunk: string): void {
    const data = this.rest + chunk;
    let at = 0;
    for (;;) {
      const end = data.indexOf('\r\n', at);
      if (end < 0) break;
      const error =
        data.charCodeAt(at) === 45 /* - */ ? new Error(`floor: ${data.slice(at + 1, end)}`) : undefined;
      at = end + 2;
      const callback = this.waiting[this.head++];
      if (this.head > 1024 && this.head * 2 > this.waiting.length) {
        this.waiting.splice(0, this.head);
        this.head = 0;
      }
      callback?.(error);
    }
    this.rest = data.slice(at);
  }

  close(): void {
    this.socket.destroy();
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
 * The floor as a lock library (so the throughput and scale scenarios drive it like the others): an "acquire"
 * writes, on every node, the lease key (`SET key value NX PX ttl`, the value `<22-character id>|<19-digit token>`
 * as fenced's `<leaseId>|<token>`) and the token register (`SET`), the two writes acquire.lua makes; a "release"
 * deletes the lease key (`DEL`), the one write release.lua makes (its PUBLISH is left out: nobody listens, and
 * the floor is the writes). Each step resolves at a majority of nodes. It is not a lock: a refused NX is not
 * checked, and it cannot wait. Its registers stay after the release, as fenced's do until a fold pass takes
 * them, but nothing folds the floor's: they are its `leftoverKeyPattern`.
 */
export async function createFloorLibrary(urls: readonly string[]): Promise<LockLibrary> {
  const nodes = await Promise.all(urls.map((url) => FloorNode.connect(url)));
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
    const calls: Promise<void>[] = [];
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
    packageName: 'bench/suite/scenarios/floor.ts',
    version: installedVersion('@fenced/coordinator'),
    configuration: {
      writes:
        'per node and cycle: SET lease NX PX + SET register (acquire), DEL lease (release); no script, no reads',
      keys: `${FLOOR_PREFIX}:{resource}:lease / :token (as long as fenced's)`,
      batching:
        'one pipeline per node per event-loop turn (setImmediate), several in flight; each step resolves at a majority',
      clients: 'a raw socket per node speaking RESP (no client library)',
    },
    waitStrategy: 'none (not a lock)',
    leftoverKeyPattern: `${FLOOR_PREFIX}:*:token`,
    acquire,
    acquireWaiting: () => Promise.reject(new Error('the floor does not wait')),
    close: () => {
      for (const node of nodes) node.close();
      return Promise.resolve();
    },
  };
}
