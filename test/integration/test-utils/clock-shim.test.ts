import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClockShim } from '@fenced/test-utils/clock-shim';
import { RedisNode } from '@fenced/test-utils/redis-node';
import { RespConnection } from '@fenced/test-utils/resp-connection';

/** Seconds of the node's own clock, from the TIME command. */
async function serverTimeMs(conn: RespConnection): Promise<number> {
  const reply = await conn.send('TIME');
  if (!Array.isArray(reply)) throw new Error(`TIME answered ${JSON.stringify(reply)}`);
  return Number(reply[0]) * 1000 + Number(reply[1]) / 1000;
}

describe('clock shim', () => {
  let clock: ClockShim;
  let node: RedisNode;
  let plain: RedisNode;
  let conn: RespConnection;
  let plainConn: RespConnection;

  beforeAll(async () => {
    clock = await ClockShim.create();
    [node, plain] = await Promise.all([RedisNode.start({ env: clock.env }), RedisNode.start()]);
    [conn, plainConn] = await Promise.all([
      RespConnection.connect(node.port),
      RespConnection.connect(plain.port),
    ]);
  });

  afterAll(async () => {
    conn?.close();
    plainConn?.close();
    await Promise.all([node?.stop(), plain?.stop()]);
    await clock?.dispose();
  });

  it('expires a key early when the node clock jumps forward, leaving the machine clock alone', async () => {
    await clock.reset();
    expect(await conn.send('SET', 'fwd', 'v', 'PX', 60_000)).toBe('OK');
    expect(await plainConn.send('SET', 'fwd', 'v', 'PX', 60_000)).toBe('OK');
    const before = Date.now();

    await clock.jump(61_000);

    expect(await conn.send('GET', 'fwd')).toBeNull();
    expect(await conn.send('PTTL', 'fwd')).toBe(-2);
    // The unshimmed node and this process still live in real time.
    expect(await plainConn.send('GET', 'fwd')).toBe('v');
    expect(Date.now() - before).toBeLessThan(5_000);
    const skew = (await serverTimeMs(conn)) - Date.now();
    expect(skew).toBeGreaterThan(60_000);
    expect(skew).toBeLessThan(62_000);
  });

  it('keeps a key alive longer when the node clock jumps backward', async () => {
    await clock.reset();
    expect(await conn.send('SET', 'back', 'v', 'PX', 1_000)).toBe('OK');
    await clock.jump(-30_000);
    const pttl = await conn.send('PTTL', 'back');
    expect(pttl).toBeGreaterThan(30_000);
    expect(pttl).toBeLessThanOrEqual(31_000);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect(await conn.send('GET', 'back')).toBe('v'); // its real deadline has passed

    await clock.reset();
    expect(await conn.send('GET', 'back')).toBeNull();
  });

  it('shifts only the wall clock when asked, and jumps accumulate', async () => {
    await clock.reset();
    await clock.jump(10_000, { clocks: 'realtime' });
    await clock.jump(5_000, { clocks: 'realtime' });
    expect(clock.offsets).toEqual({ realtimeMs: 15_000, monotonicMs: 0 });
    const skew = (await serverTimeMs(conn)) - Date.now();
    expect(skew).toBeGreaterThan(14_000);
    expect(skew).toBeLessThan(16_000);
    await clock.reset();
  });

  it('shifts the monotonic clock of any dynamically linked process', async () => {
    // Node reads CLOCK_MONOTONIC through libc for process.hrtime, so a child node shows the shift.
    await clock.set(3_600_000, { clocks: 'monotonic' });
    const childNs = await new Promise<bigint>((resolve, reject) => {
      const child = spawn(process.execPath, ['-e', 'process.stdout.write(String(process.hrtime.bigint()))'], {
        env: { ...process.env, ...clock.env },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
      child.once('error', reject);
      child.once('exit', () => resolve(BigInt(out.trim() || '0')));
    });
    const skewMs = Number(childNs - process.hrtime.bigint()) / 1e6;
    expect(skewMs).toBeGreaterThan(3_590_000);
    expect(skewMs).toBeLessThan(3_610_000);
    await clock.reset();
  });
});
