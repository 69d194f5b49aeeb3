import { describe, expect, it } from 'vitest';
import { FaultProxy, proxyEach } from '@fenced/test-utils/fault-proxy';

// Nothing listens behind these proxies: the tests only look at addresses and options.
describe('FaultProxy options', () => {
  it('keeps credentials, database and query of the target URL and swaps host and port', async () => {
    const proxy = await FaultProxy.start({
      target: 'postgres://app:secret@127.0.0.1:5432/fenced?sslmode=disable',
    });
    try {
      expect(proxy.target).toEqual({ host: '127.0.0.1', port: 5432 });
      expect(proxy.url).toBe(`postgres://app:secret@127.0.0.1:${proxy.port}/fenced?sslmode=disable`);
    } finally {
      await proxy.stop();
    }
  });

  it('gives a redis URL for a host-and-port target and uses the default port of a scheme', async () => {
    const a = await FaultProxy.start({ target: { host: '127.0.0.1', port: 7000 } });
    const b = await FaultProxy.start({ target: 'redis://127.0.0.1' });
    try {
      expect(a.url).toBe(`redis://127.0.0.1:${a.port}`);
      expect(b.target.port).toBe(6379);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('rejects negative or infinite delays and unknown directions', async () => {
    const proxy = await FaultProxy.start({ target: 'redis://127.0.0.1:7000' });
    try {
      expect(() => proxy.setMode('delay', { delayMs: -1 })).toThrow(RangeError);
      expect(() => proxy.setMode('delay', { jitterMs: Infinity })).toThrow(RangeError);
      expect(() => proxy.setMode('hold', { direction: 'sideways' as never })).toThrow(RangeError);
      expect(proxy.mode).toBe('pass');
      proxy.setMode('delay', { delayMs: 5 });
      expect(proxy.modeOptions).toEqual({ direction: 'both', delayMs: 5, jitterMs: 0 });
    } finally {
      await proxy.stop();
    }
  });

  it('starts one proxy per URL in order', async () => {
    const set = await proxyEach(['redis://127.0.0.1:7001', 'redis://127.0.0.1:7002']);
    try {
      expect(set.proxies.map((p) => p.target.port)).toEqual([7001, 7002]);
      expect(set.urls).toEqual(set.proxies.map((p) => p.url));
    } finally {
      await set.stop();
    }
  });

  it('stops the proxies it started when one target is invalid', async () => {
    await expect(proxyEach(['redis://127.0.0.1:7001', 'ftp://127.0.0.1'])).rejects.toThrow(/no port/);
  });
});
