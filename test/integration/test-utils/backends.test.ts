import { afterEach, describe, expect, it } from 'vitest';
import { findOrStartPostgres } from '@fenced/test-utils/postgres';
import { startRedisNodes } from '@fenced/test-utils/redis-cluster';
import { RespConnection } from '@fenced/test-utils/resp-connection';

describe('test environment backends', () => {
  const saved = process.env.FENCED_REDIS_URLS;
  afterEach(() => {
    if (saved === undefined) delete process.env.FENCED_REDIS_URLS;
    else process.env.FENCED_REDIS_URLS = saved;
  });

  it('starts local processes with every fault control when asked for processes', async () => {
    const started = performance.now();
    const env = await startRedisNodes(2, { backend: 'process', persistence: 'none' });
    try {
      expect(env).toMatchObject({ backend: 'process', owned: true });
      expect(env.nodes).toHaveLength(2);
      expect(env.missing('pause', 'kill', 'restartWithoutData', 'clockShift', 'proxy')).toBeNull();
      const conn = await RespConnection.connect(env.nodes[0]!.port);
      expect(await conn.send('PING')).toBe('PONG');
      conn.close();
    } finally {
      await env.stop();
    }
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('uses FENCED_REDIS_URLS without fault controls, and says why a fault test must skip', async () => {
    process.env.FENCED_REDIS_URLS = 'redis://127.0.0.1:1, redis://127.0.0.1:2';
    const env = await startRedisNodes(3);
    expect(env).toMatchObject({ backend: 'external', owned: false, nodes: [] });
    expect(env.urls).toEqual(['redis://127.0.0.1:1', 'redis://127.0.0.1:2']);
    expect(env.missing('proxy')).toBeNull();
    expect(env.missing('pause', 'proxy', 'kill')).toBe(
      'needs pause, kill, which Redis nodes on servers from FENCED_REDIS_URLS do not offer',
    );
    await env.stop();
  });

  it('picks local processes on a machine without a Docker engine, quickly', async () => {
    delete process.env.FENCED_REDIS_URLS;
    const started = performance.now();
    const env = await startRedisNodes(1, { persistence: 'none' });
    try {
      expect(env.backend).toBe('process');
    } finally {
      await env.stop();
    }
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('refuses the container backend at once when no engine answers', async ({ skip }) => {
    const { dockerReachable } = await import('@fenced/test-utils/container-runtime');
    if ((await dockerReachable()).reachable) skip('a Docker engine is reachable here');
    const started = performance.now();
    await expect(startRedisNodes(1, { backend: 'container' })).rejects.toThrow(
      /backend: container, but no Docker engine/,
    );
    await expect(findOrStartPostgres({ backend: 'container' })).rejects.toThrow(
      /backend: container, but no Docker engine/,
    );
    expect(performance.now() - started).toBeLessThan(3_000);
  });

  it('reports where Postgres came from', async () => {
    const server = await findOrStartPostgres({ backend: 'process' });
    try {
      expect(['external', 'process']).toContain(server.backend);
      expect(server.owned).toBe(server.backend === 'process');
    } finally {
      await server.stop();
    }
  });
});
