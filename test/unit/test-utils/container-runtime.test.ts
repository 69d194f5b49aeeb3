import fs from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultBackend, dockerEndpoints, onPath, probeDocker } from '@fenced/test-utils/container-runtime';
import { chooseRedisBackend } from '@fenced/test-utils/redis-cluster';

describe('probeDocker', () => {
  let dir: string;
  const servers: net.Server[] = [];
  const accepted = new Set<net.Socket>();

  async function listen(server: net.Server, where: string | number): Promise<void> {
    servers.push(server);
    server.on('connection', (s: net.Socket) => {
      accepted.add(s);
      s.once('close', () => accepted.delete(s));
    });
    await new Promise<void>((resolve) =>
      typeof where === 'string' ? server.listen(where, resolve) : server.listen(where, '127.0.0.1', resolve),
    );
  }

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'fenced-docker-probe-'));
  });

  afterAll(async () => {
    for (const socket of accepted) socket.destroy(); // so close() need not wait for them
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
    await fs.rm(dir, { recursive: true, force: true });
  });

  it('finds an engine that answers /_ping on a unix socket', async () => {
    const socket = path.join(dir, 'docker.sock');
    await listen(
      http.createServer((req, res) => res.writeHead(req.url === '/_ping' ? 200 : 404).end('OK')),
      socket,
    );
    const probe = await probeDocker({
      endpoints: [`unix://${path.join(dir, 'missing.sock')}`, `unix://${socket}`],
    });
    expect(probe).toEqual({
      reachable: true,
      endpoint: `unix://${socket}`,
      reason: `Docker engine at unix://${socket}`,
    });
  });

  it('finds an engine on a tcp DOCKER_HOST', async () => {
    const server = http.createServer((_req, res) => res.writeHead(200).end('OK'));
    await listen(server, 0);
    const port = (server.address() as net.AddressInfo).port;
    const probe = await probeDocker({ env: { DOCKER_HOST: `tcp://127.0.0.1:${port}` } });
    expect(probe.reachable).toBe(true);
  });

  it('gives up quickly on missing sockets and on a socket that never answers', async () => {
    const silent = path.join(dir, 'silent.sock');
    await listen(
      net.createServer(() => undefined),
      silent,
    );
    const started = performance.now();
    const probe = await probeDocker({
      endpoints: [`unix://${path.join(dir, 'nothing.sock')}`, `unix://${silent}`],
      timeoutMs: 100,
    });
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(probe.reachable).toBe(false);
    expect(probe.reason).toMatch(/nothing\.sock: no socket; .*silent\.sock: no answer within 100 ms/);
  });

  it('lists DOCKER_HOST alone when set, else the system, rootless and Desktop sockets', () => {
    expect(dockerEndpoints({ DOCKER_HOST: 'tcp://127.0.0.1:2375' })).toEqual(['tcp://127.0.0.1:2375']);
    const endpoints = dockerEndpoints({ XDG_RUNTIME_DIR: '/run/user/1000' });
    expect(endpoints[0]).toBe('unix:///var/run/docker.sock');
    expect(endpoints).toContain('unix:///run/user/1000/docker.sock');
  });
});

describe('backend choice', () => {
  const docker = (reachable: boolean) => () =>
    Promise.resolve({ reachable, reason: reachable ? 'engine' : 'no engine' });
  const installed = (yes: boolean) => () => Promise.resolve(yes);

  it('reads FENCED_TEST_BACKEND and names it when invalid', () => {
    expect(defaultBackend({})).toBe('auto');
    expect(defaultBackend({ FENCED_TEST_BACKEND: 'process' })).toBe('process');
    expect(() => defaultBackend({ FENCED_TEST_BACKEND: 'vm' })).toThrow(/FENCED_TEST_BACKEND/);
  });

  it('prefers FENCED_REDIS_URLS, then local processes, then containers', async () => {
    const base = {
      backend: 'auto' as const,
      redisServerInstalled: installed(true),
      dockerReachable: docker(true),
    };
    expect((await chooseRedisBackend({ ...base, existingUrls: true })).kind).toBe('external');
    expect((await chooseRedisBackend({ ...base, existingUrls: false })).kind).toBe('process');
    expect(
      (await chooseRedisBackend({ ...base, existingUrls: false, redisServerInstalled: installed(false) }))
        .kind,
    ).toBe('container');
  });

  it('does not probe Docker when processes will do', async () => {
    let probed = false;
    await chooseRedisBackend({
      backend: 'auto',
      existingUrls: false,
      redisServerInstalled: installed(true),
      dockerReachable: () => {
        probed = true;
        return Promise.resolve({ reachable: true, reason: '' });
      },
    });
    expect(probed).toBe(false);
  });

  it('honours an explicit backend and explains when containers are impossible', async () => {
    const base = { existingUrls: true, redisServerInstalled: installed(false) };
    expect(
      (await chooseRedisBackend({ ...base, backend: 'process', dockerReachable: docker(true) })).kind,
    ).toBe('process');
    await expect(
      chooseRedisBackend({ ...base, backend: 'container', dockerReachable: docker(false) }),
    ).rejects.toThrow(/backend: container, but no engine/);
    await expect(
      chooseRedisBackend({ ...base, existingUrls: false, backend: 'auto', dockerReachable: docker(false) }),
    ).rejects.toThrow(/no redis-server on PATH, no engine/);
  });

  it('finds executables on PATH without running them', async () => {
    expect(await onPath('sh')).toBe(true);
    expect(await onPath('surely-not-a-command-fenced')).toBe(false);
  });
});
