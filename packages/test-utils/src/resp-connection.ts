import net from 'node:net';

/** A decoded RESP2 reply. Errors are returned as values, not thrown, so tests can assert on them. */
export type RespValue = string | number | null | RespError | RespValue[];

/** What `sendWithin` resolves with when no reply came in time. */
export const NO_REPLY: unique symbol = Symbol('no reply');

export class RespError {
  constructor(readonly message: string) {}
}

/**
 * A deliberately small Redis connection over a raw socket: no reconnects, no retries, no offline queue, so
 * a test sees exactly what the network (or the fault proxy) did. Replies are matched to commands in order.
 */
export class RespConnection {
  private buffer = Buffer.alloc(0);
  private readonly waiting: { resolve: (v: RespValue) => void; reject: (e: Error) => void }[] = [];
  private closedWith: Error | null = null;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      try {
        for (;;) {
          const parsed = parse(this.buffer, 0);
          if (!parsed) break;
          this.buffer = this.buffer.subarray(parsed.end);
          this.waiting.shift()?.resolve(parsed.value);
        }
      } catch (error) {
        socket.destroy(error as Error);
      }
    });
    const fail = (error: Error): void => {
      this.closedWith ??= error;
      for (const w of this.waiting.splice(0)) w.reject(this.closedWith);
    };
    socket.on('error', fail);
    socket.on('close', () => fail(new Error('connection closed')));
  }

  static connect(port: number, host = '127.0.0.1', timeoutMs = 2_000): Promise<RespConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ port, host });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`connect to ${host}:${port} timed out`));
      }, timeoutMs);
      socket.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      socket.once('connect', () => {
        clearTimeout(timer);
        socket.removeAllListeners('error');
        resolve(new RespConnection(socket));
      });
    });
  }

  /** Sends one command; resolves with its reply, rejects when the connection closes first. */
  send(...args: (string | number)[]): Promise<RespValue> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.socket.write(encode(args));
    });
  }

  /** Like `send`, but resolves with `NO_REPLY` when no reply arrives within `ms` (the reply is then lost). */
  async sendWithin(ms: number, ...args: (string | number)[]): Promise<RespValue | typeof NO_REPLY> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<typeof NO_REPLY>(
      (resolve) => (timer = setTimeout(() => resolve(NO_REPLY), ms)),
    );
    try {
      return await Promise.race([this.send(...args), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The error that closed the connection, or null while it is open. */
  get closed(): Error | null {
    return this.closedWith;
  }

  close(): void {
    this.socket.destroy();
  }
}

export function encode(args: (string | number)[]): Buffer {
  const parts = [`*${args.length}\r\n`];
  for (const arg of args) {
    const s = String(arg);
    parts.push(`$${Buffer.byteLength(s)}\r\n${s}\r\n`);
  }
  return Buffer.from(parts.join(''));
}

function parse(buf: Buffer, at: number): { value: RespValue; end: number } | null {
  const lineEnd = buf.indexOf('\r\n', at);
  if (lineEnd < 0) return null;
  const type = String.fromCharCode(buf[at] ?? 0);
  const line = buf.toString('utf8', at + 1, lineEnd);
  const next = lineEnd + 2;
  switch (type) {
    case '+':
      return { value: line, end: next };
    case '-':
      return { value: new RespError(line), end: next };
    case ':':
      return { value: Number(line), end: next };
    case '$': {
      const length = Number(line);
      if (length < 0) return { value: null, end: next };
      if (buf.length < next + length + 2) return null;
      return { value: buf.toString('utf8', next, next + length), end: next + length + 2 };
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return { value: null, end: next };
      const items: RespValue[] = [];
      let end = next;
      for (let i = 0; i < count; i++) {
        const item = parse(buf, end);
        if (!item) return null;
        items.push(item.value);
        end = item.end;
      }
      return { value: items, end };
    }
    default:
      throw new Error(`unexpected RESP type byte ${JSON.stringify(type)}`);
  }
}
