import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Which clocks a jump shifts. `realtime` is what an NTP step moves, and all Redis 7.0 needs for key expiry
 * and PTTL (it reads `gettimeofday`); `monotonic` also moves `CLOCK_MONOTONIC`/`BOOTTIME`, which Redis
 * uses for its event-loop timers: moving it backwards stalls `serverCron` (and with it active expiry) for
 * that long, while lazy expiry on access still follows the wall clock.
 */
export type ShiftedClocks = 'all' | 'realtime' | 'monotonic';

/** The offsets one shim currently adds, in milliseconds (may be fractional). */
export interface ClockOffsets {
  readonly realtimeMs: number;
  readonly monotonicMs: number;
}

/** Environment that makes a child process run on the shim's clock: pass it to `RedisNode.start({ env })`. */
// A type literal, not an interface: it must stay assignable to NodeJS.ProcessEnv.
export type ClockShimEnv = { readonly LD_PRELOAD: string; readonly FENCED_CLOCK_SHIM_FILE: string };

const SOURCE = fileURLToPath(new URL('./clock-shim/clock-shim.c', import.meta.url));
const CONTROL_BYTES = 32;
const MAGIC = 0x66656e636564636cn; // "fencedcl", the check word of clock-shim.c

let building: Promise<string> | undefined;

/**
 * Compiles clock-shim.c with gcc once per source version, into `src/clock-shim/` of this package (gitignored), or
 * into the temp directory when that is read-only. Safe against concurrent test workers: each compiles to a
 * unique name and renames into place atomically.
 */
export function buildClockShim(): Promise<string> {
  building ??= build().catch((error: unknown) => {
    building = undefined;
    throw error;
  });
  return building;
}

async function build(): Promise<string> {
  const source = await fs.readFile(SOURCE);
  const hash = createHash('sha256').update(source).update(process.arch).digest('hex').slice(0, 12);
  const name = `clock-shim-${hash}.so`;
  const candidates = [path.dirname(SOURCE), path.join(os.tmpdir(), 'fenced-clock-shim')];
  let lastError: unknown;
  for (const dir of candidates) {
    const target = path.join(dir, name);
    if (await exists(target)) return target;
    // Ends in .so, so a partial file left by a crash is gitignored too.
    const partial = path.join(dir, `.${process.pid}-${randomBytes(4).toString('hex')}-${name}`);
    try {
      await fs.mkdir(dir, { recursive: true });
      await gcc(['-O2', '-Wall', '-shared', '-fPIC', '-o', partial, SOURCE, '-ldl']);
      await fs.rename(partial, target);
      return target;
    } catch (error) {
      lastError = error;
      await fs.rm(partial, { force: true });
    }
  }
  throw new Error(`could not build the clock shim: ${String(lastError)}`, { cause: lastError });
}

function gcc(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.env.CC ?? 'gcc', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`gcc exited with ${code}: ${stderr.trim()}`)),
    );
  });
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.access(file);
    return true;
  } catch {
    return false;
  }
}

/**
 * One process's private clock (DESIGN §6): an `LD_PRELOAD` shim over `clock_gettime`, `gettimeofday` and
 * `time` that adds an offset read from a small memory-mapped control file, so a test can jump the clock of
 * a running Redis node forwards or backwards while the machine's clock stays untouched. One shim per node:
 * two nodes given the same `env` share one clock.
 *
 * @example
 * const clock = await ClockShim.create();
 * const node = await RedisNode.start({ env: clock.env });
 * await clock.jump(61_000); // keys with less than 61 s to live are now expired on this node
 */
export class ClockShim {
  private offsetsNs = { realtime: 0n, monotonic: 0n };
  private writes: Promise<void> = Promise.resolve();

  private constructor(
    /** Path of the compiled shared library. */
    readonly library: string,
    /** Path of the control file the shim maps. */
    readonly controlFile: string,
  ) {}

  /** Builds the shim if needed and creates a control file with zero offsets. */
  static async create(): Promise<ClockShim> {
    const library = await buildClockShim();
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'fenced-clock-'));
    const shim = new ClockShim(library, path.join(dir, 'offset'));
    await fs.writeFile(shim.controlFile, encode(0n, 0n));
    return shim;
  }

  /** `LD_PRELOAD` plus the control file's path. */
  get env(): ClockShimEnv {
    // Appended to, not replacing, a preload the test runner itself may be running under.
    const preload = [this.library, process.env.LD_PRELOAD].filter(Boolean).join(':');
    return { LD_PRELOAD: preload, FENCED_CLOCK_SHIM_FILE: this.controlFile };
  }

  get offsets(): ClockOffsets {
    return {
      realtimeMs: Number(this.offsetsNs.realtime) / 1e6,
      monotonicMs: Number(this.offsetsNs.monotonic) / 1e6,
    };
  }

  /**
   * Moves the clock by `deltaMs` (negative: backwards), on top of earlier jumps. Takes effect on the
   * process's next clock read; resolves once the control file is written.
   * @param options.clocks which clocks move. @defaultValue `'all'`
   */
  jump(deltaMs: number, options: { clocks?: ShiftedClocks } = {}): Promise<void> {
    const delta = msToNs(deltaMs);
    const clocks = options.clocks ?? 'all';
    const next = { ...this.offsetsNs };
    if (clocks !== 'monotonic') next.realtime += delta;
    if (clocks !== 'realtime') next.monotonic += delta;
    return this.write(next);
  }

  /**
   * Sets the offset to `offsetMs` from the real clock (not cumulative).
   * @param options.clocks which clocks are set. @defaultValue `'all'`
   */
  set(offsetMs: number, options: { clocks?: ShiftedClocks } = {}): Promise<void> {
    const offset = msToNs(offsetMs);
    const clocks = options.clocks ?? 'all';
    const next = { ...this.offsetsNs };
    if (clocks !== 'monotonic') next.realtime = offset;
    if (clocks !== 'realtime') next.monotonic = offset;
    return this.write(next);
  }

  /** Back to the machine's time. */
  reset(): Promise<void> {
    return this.write({ realtime: 0n, monotonic: 0n });
  }

  /** Removes the control file. Processes still running with the shim keep the last offsets they mapped. */
  async dispose(): Promise<void> {
    await this.writes.catch(() => undefined);
    await fs.rm(path.dirname(this.controlFile), { recursive: true, force: true });
  }

  private write(next: { realtime: bigint; monotonic: bigint }): Promise<void> {
    this.offsetsNs = next;
    const bytes = encode(next.realtime, next.monotonic);
    // Serialised, and one positional write of the whole record: a reader that catches a torn record sees a
    // bad check word and retries (clock-shim.c).
    this.writes = this.writes
      .catch(() => undefined)
      .then(async () => {
        const file = await fs.open(this.controlFile, 'r+');
        try {
          await file.write(bytes, 0, bytes.length, 0);
        } finally {
          await file.close();
        }
      });
    return this.writes;
  }
}

function msToNs(ms: number): bigint {
  if (!Number.isFinite(ms)) throw new RangeError(`clock offset must be finite, got ${ms}`);
  return BigInt(Math.round(ms * 1e6));
}

function encode(realtimeNs: bigint, monotonicNs: bigint): Buffer {
  // The shim reads native int64s.
  const bytes = Buffer.alloc(CONTROL_BYTES);
  const put = (value: bigint, at: number): number =>
    os.endianness() === 'LE' ? bytes.writeBigInt64LE(value, at) : bytes.writeBigInt64BE(value, at);
  put(realtimeNs, 0);
  put(monotonicNs, 8);
  put(BigInt.asIntN(64, realtimeNs ^ monotonicNs ^ MAGIC), 16);
  return bytes;
}
