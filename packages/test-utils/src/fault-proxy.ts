import net from 'node:net';

/**
 * What the proxy does to the bytes of every connection through it (DESIGN §6):
 * - `pass`: forwards both ways.
 * - `blackhole`: accepts connections and swallows bytes, no reply — a partition as the client sees it.
 * - `reset`: resets every open connection, and resets new ones as soon as they are accepted.
 * - `delay`: forwards each chunk after `delayMs` plus up to `jitterMs`, keeping the order per direction.
 * - `hold`: keeps every byte (and every close) in the proxy; `release()` delivers them in order.
 * - `drop-responses`: forwards requests to the server and swallows its replies — applied, reply lost (F9).
 */
export type FaultMode = 'pass' | 'blackhole' | 'reset' | 'delay' | 'hold' | 'drop-responses';

/** Which way a fault acts; the other way passes. `to-server` carries requests, `to-client` replies. */
export type FaultDirection = 'both' | 'to-server' | 'to-client';

export interface FaultModeOptions {
  /**
   * For `blackhole`, `delay` and `hold`: the direction the fault applies to. Holding only `to-client` lets
   * requests reach the server while their replies wait in the network (F2).
   * @defaultValue `'both'`
   */
  direction?: FaultDirection;
  /** For `delay`: the fixed delay of every chunk. @defaultValue `0` */
  delayMs?: number;
  /** For `delay`: a uniformly random extra delay in [0, jitterMs] per chunk; order is still kept. @defaultValue `0` */
  jitterMs?: number;
}

export interface FaultProxyOptions {
  /** The server the proxy forwards to: host and port, or a URL such as `redis://127.0.0.1:6379/0`. */
  target: { host: string; port: number } | string;
  /** Mode at start. @defaultValue `'pass'` */
  mode?: FaultMode;
  /** Options of the initial mode. */
  modeOptions?: FaultModeOptions;
  /** Loopback port to listen on; a free one is picked when absent. */
  port?: number;
}

/** Counters since start, for tests that must know the proxy actually saw (or stopped) traffic. */
export interface FaultProxyStats {
  /** Connections accepted, including ones reset on accept. */
  accepted: number;
  /** Connections currently open. */
  open: number;
  /** Connections the proxy reset (mode `reset`, or a connection that lost bytes being cut on heal). */
  reset: number;
  bytesToServer: number;
  bytesToClient: number;
  droppedToServer: number;
  droppedToClient: number;
  /** Bytes waiting in the proxy right now (held or delayed). */
  queuedBytes: number;
}

type Policy =
  | { kind: 'pass' }
  | { kind: 'drop' }
  | { kind: 'hold' }
  | { kind: 'delay'; delayMs: number; jitterMs: number };

interface Item {
  /** A chunk of bytes, or null for the end of the stream (the sender's FIN). */
  bytes: Buffer | null;
  /** Monotonic time (ms) it may be delivered; Infinity while held. */
  dueAt: number;
}

/**
 * A TCP proxy between one client and one server on a free loopback port, whose behaviour a test switches
 * at run time. Give each client→server pair its own proxy (see `proxyEach`) to cut one client off from one
 * node while the others still talk.
 *
 * Swallowed bytes cannot be delivered later, so a connection that lost bytes (in `blackhole` or
 * `drop-responses`) would leave the client and server out of step — replies matched to the wrong requests.
 * Such a connection is therefore reset as soon as the proxy switches to a mode that delivers anything, as
 * a client's socket timeout would end it in a real partition. Held and delayed bytes are never lost.
 *
 * @example
 * const proxy = await FaultProxy.start({ target: node.url });
 * const redis = new Redis(proxy.url);
 * proxy.setMode('hold', { direction: 'to-client' }); // commands run, replies wait
 * proxy.release(); // replies delivered in order, back to 'pass'
 */
export class FaultProxy {
  private modeName: FaultMode;
  private modeOpts: FaultModeOptions;
  private readonly links = new Set<Link>();
  private stopped = false;
  /** @internal counters shared with links */
  readonly counters: Omit<FaultProxyStats, 'open' | 'queuedBytes'> = {
    accepted: 0,
    reset: 0,
    bytesToServer: 0,
    bytesToClient: 0,
    droppedToServer: 0,
    droppedToClient: 0,
  };

  private constructor(
    private readonly server: net.Server,
    readonly port: number,
    readonly target: { host: string; port: number },
    private readonly targetUrl: URL | null,
    mode: FaultMode,
    modeOptions: FaultModeOptions,
  ) {
    this.modeName = mode;
    this.modeOpts = validate(mode, modeOptions);
  }

  static async start(options: FaultProxyOptions): Promise<FaultProxy> {
    const targetUrl = typeof options.target === 'string' ? new URL(options.target) : null;
    const target = targetUrl
      ? { host: stripBrackets(targetUrl.hostname), port: Number(targetUrl.port || defaultPort(targetUrl)) }
      : (options.target as { host: string; port: number });
    const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: false });
    const port = await new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(options.port ?? 0, '127.0.0.1', () => {
        server.off('error', reject);
        const address = server.address();
        if (address === null || typeof address === 'string') reject(new Error('proxy has no port'));
        else resolve(address.port);
      });
    });
    const proxy = new FaultProxy(
      server,
      port,
      target,
      targetUrl,
      options.mode ?? 'pass',
      options.modeOptions ?? {},
    );
    server.on('connection', (socket) => proxy.accept(socket));
    return proxy;
  }

  /** The host clients connect to: always loopback. */
  get host(): string {
    return '127.0.0.1';
  }

  /**
   * The target's URL with host and port replaced by the proxy's (user, password, database and query are
   * kept); `redis://127.0.0.1:<port>` when the target was given as host and port.
   */
  get url(): string {
    if (!this.targetUrl) return `redis://${this.host}:${this.port}`;
    const url = new URL(this.targetUrl.href);
    url.hostname = this.host;
    url.port = String(this.port);
    return url.href;
  }

  get mode(): FaultMode {
    return this.modeName;
  }

  get modeOptions(): Readonly<FaultModeOptions> {
    return this.modeOpts;
  }

  get stats(): FaultProxyStats {
    let queuedBytes = 0;
    for (const link of this.links) queuedBytes += link.queuedBytes();
    return { ...this.counters, open: this.links.size, queuedBytes };
  }

  /**
   * Switches the mode for open and new connections alike. Bytes held or delayed so far are re-routed by the
   * new mode, in order: delivered (`pass`, and after their delay under `delay`), dropped (`blackhole`), or
   * cut off with the connection (`reset`).
   */
  setMode(mode: FaultMode, options: FaultModeOptions = {}): void {
    if (this.stopped) throw new Error('proxy stopped');
    this.modeOpts = validate(mode, options);
    this.modeName = mode;
    if (mode === 'reset') {
      for (const link of [...this.links]) link.reset();
      return;
    }
    const [up, down] = this.policies();
    const stillDeaf = up.kind === 'drop' && down.kind === 'drop';
    for (const link of [...this.links]) {
      if (link.tainted && !stillDeaf) link.reset();
      else link.apply(up, down);
    }
  }

  /** Delivers everything held, in order per direction, and goes back to `pass`. */
  release(): void {
    this.setMode('pass');
  }

  /** Closes the listener and destroys every connection through it. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const link of [...this.links]) link.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** @internal */
  forget(link: Link): void {
    this.links.delete(link);
  }

  private policies(): [Policy, Policy] {
    const { direction = 'both', delayMs = 0, jitterMs = 0 } = this.modeOpts;
    const faulty = (d: 'to-server' | 'to-client'): boolean => direction === 'both' || direction === d;
    const pick = (fault: Policy): [Policy, Policy] => [
      faulty('to-server') ? fault : { kind: 'pass' },
      faulty('to-client') ? fault : { kind: 'pass' },
    ];
    switch (this.modeName) {
      case 'pass':
      case 'reset':
        return [{ kind: 'pass' }, { kind: 'pass' }];
      case 'blackhole':
        return pick({ kind: 'drop' });
      case 'hold':
        return pick({ kind: 'hold' });
      case 'delay':
        return pick({ kind: 'delay', delayMs, jitterMs });
      case 'drop-responses':
        return [{ kind: 'pass' }, { kind: 'drop' }];
    }
  }

  private accept(client: net.Socket): void {
    this.counters.accepted++;
    if (this.stopped || this.modeName === 'reset') {
      this.counters.reset++;
      client.on('error', () => undefined);
      client.resetAndDestroy();
      return;
    }
    const [up, down] = this.policies();
    const link = new Link(this, client, up, down);
    this.links.add(link);
  }
}

/** One client connection and its upstream connection to the target. */
class Link {
  tainted = false;
  private upstream: net.Socket | null = null;
  private connected = false;
  private finished = false;
  private readonly toServer: Pipe;
  private readonly toClient: Pipe;

  constructor(
    private readonly proxy: FaultProxy,
    private readonly client: net.Socket,
    up: Policy,
    down: Policy,
  ) {
    client.setNoDelay(true);
    this.toServer = new Pipe(up, {
      ready: () => this.connected,
      write: (bytes) => {
        this.proxy.counters.bytesToServer += bytes.length;
        this.upstream?.write(bytes);
      },
      end: () => this.upstream?.end(),
      dropped: (bytes) => {
        this.proxy.counters.droppedToServer += bytes;
        this.tainted = true;
      },
    });
    this.toClient = new Pipe(down, {
      ready: () => true,
      write: (bytes) => {
        this.proxy.counters.bytesToClient += bytes.length;
        this.client.write(bytes);
      },
      end: () => this.client.end(),
      dropped: (bytes) => {
        this.proxy.counters.droppedToClient += bytes;
        this.tainted = true;
      },
    });
    client.on('data', (chunk: Buffer) => {
      this.toServer.push(chunk);
      this.ensureUpstream();
    });
    client.on('end', () => this.toServer.push(null));
    client.on('error', () => undefined);
    client.on('close', () => {
      // A client that is gone cannot receive anything more; its FIN (if not seen yet) travels on.
      this.toClient.discard();
      this.toServer.push(null);
      this.ensureUpstream();
      this.maybeFinish();
    });
    // Connect at once unless requests are being swallowed: then the server never hears of this client.
    if (up.kind !== 'drop') this.ensureUpstream();
  }

  queuedBytes(): number {
    return this.toServer.queuedBytes() + this.toClient.queuedBytes();
  }

  apply(up: Policy, down: Policy): void {
    this.toServer.setPolicy(up);
    this.toClient.setPolicy(down);
    if (up.kind !== 'drop') this.ensureUpstream();
  }

  reset(): void {
    this.proxy.counters.reset++;
    this.teardown((socket) => socket.resetAndDestroy());
  }

  destroy(): void {
    this.teardown((socket) => socket.destroy());
  }

  private teardown(end: (socket: net.Socket) => void): void {
    this.toServer.discard();
    this.toClient.discard();
    if (!this.client.destroyed) end(this.client);
    if (this.upstream && !this.upstream.destroyed) end(this.upstream);
    this.finish();
  }

  private ensureUpstream(): void {
    if (this.upstream || this.finished || this.toServer.isDropping()) return;
    if (this.client.destroyed && this.toServer.queuedBytes() === 0) {
      this.maybeFinish();
      return;
    }
    const { host, port } = this.proxy.target;
    const upstream = net.connect({ host, port, allowHalfOpen: true });
    this.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.on('connect', () => {
      this.connected = true;
      this.toServer.pump();
    });
    upstream.on('data', (chunk: Buffer) => this.toClient.push(chunk));
    upstream.on('end', () => this.toClient.push(null));
    upstream.on('error', () => undefined);
    upstream.on('close', () => {
      if (!this.connected) {
        // Refused or unreachable: the client sees its connection reset, as it would without the proxy.
        this.reset();
        return;
      }
      this.toServer.discard();
      this.toClient.push(null);
      this.maybeFinish();
    });
  }

  private maybeFinish(): void {
    const upstreamDone = this.upstream === null || this.upstream.destroyed;
    if (this.client.destroyed && upstreamDone && this.toServer.queuedBytes() === 0) this.finish();
    else if (this.client.destroyed && upstreamDone && this.toServer.isDropping()) this.finish();
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.proxy.forget(this);
  }
}

interface Sink {
  ready(): boolean;
  write(bytes: Buffer): void;
  end(): void;
  dropped(bytes: number): void;
}

/** One direction of a link: an ordered queue that delivers, delays, holds or drops by policy. */
class Pipe {
  private queue: Item[] = [];
  private timer: NodeJS.Timeout | null = null;
  private ended = false;
  private dead = false;

  constructor(
    private policy: Policy,
    private readonly sink: Sink,
  ) {}

  isDropping(): boolean {
    return this.policy.kind === 'drop';
  }

  queuedBytes(): number {
    let n = 0;
    for (const item of this.queue) n += item.bytes?.length ?? 0;
    return n;
  }

  push(bytes: Buffer | null): void {
    if (this.dead || this.ended) return;
    if (bytes === null) this.ended = true;
    if (this.policy.kind === 'drop') {
      this.sink.dropped(bytes?.length ?? 0);
      return;
    }
    this.queue.push({ bytes, dueAt: this.dueAt(performance.now()) });
    this.pump();
  }

  setPolicy(policy: Policy): void {
    this.policy = policy;
    if (policy.kind === 'drop') {
      // A partition loses what was in flight, too.
      for (const item of this.queue.splice(0)) this.sink.dropped(item.bytes?.length ?? 0);
      this.clearTimer();
      return;
    }
    // Held bytes get the new mode's timing, in their order; bytes already delayed keep their due time.
    const now = performance.now();
    let floor = 0;
    for (const item of this.queue) {
      if (item.dueAt === Infinity) item.dueAt = this.nextDue(now, floor);
      floor = item.dueAt;
    }
    this.pump();
  }

  /** Throws away everything queued and ignores what comes later: the receiving socket is gone. */
  discard(): void {
    this.dead = true;
    this.queue = [];
    this.clearTimer();
  }

  pump(): void {
    this.clearTimer();
    if (this.dead || !this.sink.ready()) return;
    const now = performance.now();
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      if (head.dueAt > now) break;
      this.queue.shift();
      if (head.bytes === null) this.sink.end();
      else this.sink.write(head.bytes);
    }
    const head = this.queue[0];
    if (head && head.dueAt !== Infinity) {
      this.timer = setTimeout(() => this.pump(), Math.max(0, head.dueAt - now));
    }
  }

  private dueAt(now: number): number {
    const tail = this.queue.at(-1);
    if (tail?.dueAt === Infinity) return Infinity; // nothing overtakes a held byte
    return this.nextDue(now, tail?.dueAt ?? 0);
  }

  private nextDue(now: number, floor: number): number {
    switch (this.policy.kind) {
      case 'hold':
        return Infinity;
      case 'delay':
        return Math.max(floor, now + this.policy.delayMs + Math.random() * this.policy.jitterMs);
      default:
        return Math.max(floor, now);
    }
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

function validate(mode: FaultMode, options: FaultModeOptions): FaultModeOptions {
  const { delayMs = 0, jitterMs = 0, direction = 'both' } = options;
  if (!(delayMs >= 0) || !(jitterMs >= 0) || !Number.isFinite(delayMs + jitterMs))
    throw new RangeError(`delayMs and jitterMs must be finite and >= 0 (got ${delayMs}, ${jitterMs})`);
  if (!['both', 'to-server', 'to-client'].includes(direction))
    throw new RangeError(`unknown direction ${direction}`);
  if (mode === 'delay') return Object.freeze({ direction, delayMs, jitterMs });
  if (mode === 'blackhole' || mode === 'hold') return Object.freeze({ direction });
  return Object.freeze({});
}

function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

function defaultPort(url: URL): number {
  switch (url.protocol) {
    case 'redis:':
    case 'rediss:':
      return 6379;
    case 'postgres:':
    case 'postgresql:':
      return 5432;
    default:
      throw new Error(`no port in ${url.protocol}// target and no default for that scheme`);
  }
}

/** One proxy per server URL, in the same order, for one client (or one group of clients). */
export interface FaultProxies {
  readonly proxies: FaultProxy[];
  /** The proxied URLs, in the order of the input URLs. */
  readonly urls: string[];
  /** Sets the same mode on every proxy. */
  setMode(mode: FaultMode, options?: FaultModeOptions): void;
  /** Releases every proxy (delivers held bytes, back to `pass`). */
  release(): void;
  stop(): Promise<void>;
}

/**
 * Starts one `FaultProxy` per URL, e.g. per Redis node, so a test can partition one client from some nodes
 * only: call it once per client for per-pair control. Stops what it started if any proxy fails to start.
 */
export async function proxyEach(
  urls: readonly string[],
  options: Omit<FaultProxyOptions, 'target'> = {},
): Promise<FaultProxies> {
  const started = await Promise.allSettled(urls.map((target) => FaultProxy.start({ ...options, target })));
  const proxies = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await Promise.all(proxies.map((p) => p.stop()));
    throw failed.reason instanceof Error ? failed.reason : new Error(String(failed.reason));
  }
  return {
    proxies,
    urls: proxies.map((p) => p.url),
    setMode: (mode, modeOptions) => proxies.forEach((p) => p.setMode(mode, modeOptions)),
    release: () => proxies.forEach((p) => p.release()),
    stop: async () => {
      await Promise.all(proxies.map((p) => p.stop()));
    },
  };
}
