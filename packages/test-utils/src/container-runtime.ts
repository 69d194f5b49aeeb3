import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

/**
 * Where the test environment runs its servers:
 * - `process`: local `redis-server` processes and a local or throw-away Postgres (full fault controls);
 * - `container`: testcontainers (`redis:7`, `postgres:15`), for machines without the binaries;
 * - `auto`: containers when a Docker engine answers and the caller needs no fault control a container
 *   lacks, else processes (DESIGN §6).
 *
 * The environment variable `FENCED_TEST_BACKEND` sets the default.
 */
export type Backend = 'auto' | 'process' | 'container';

/** Reads `FENCED_TEST_BACKEND`, naming it when its value is invalid. */
export function defaultBackend(env: NodeJS.ProcessEnv = process.env): Backend {
  const value = env.FENCED_TEST_BACKEND?.trim();
  if (!value) return 'auto';
  if (value === 'auto' || value === 'process' || value === 'container') return value;
  throw new Error(`FENCED_TEST_BACKEND must be auto, process or container, got ${JSON.stringify(value)}`);
}

export interface DockerProbe {
  readonly reachable: boolean;
  /** The endpoint that answered, e.g. `unix:///var/run/docker.sock`. */
  readonly endpoint?: string;
  /** Why not, or what answered: for skip messages and logs. */
  readonly reason: string;
}

type Endpoint = { socketPath: string } | { host: string; port: number };

/**
 * The places a Docker engine usually listens, in the order testcontainers tries them: `DOCKER_HOST`, the
 * system socket, then the rootless and Docker Desktop sockets.
 */
export function dockerEndpoints(env: NodeJS.ProcessEnv = process.env): string[] {
  if (env.DOCKER_HOST) return [env.DOCKER_HOST];
  const home = os.homedir();
  const uid = process.getuid?.();
  return [
    'unix:///var/run/docker.sock',
    ...(env.XDG_RUNTIME_DIR ? [`unix://${path.join(env.XDG_RUNTIME_DIR, 'docker.sock')}`] : []),
    `unix://${path.join(home, '.docker', 'run', 'docker.sock')}`,
    `unix://${path.join(home, '.docker', 'desktop', 'docker.sock')}`,
    ...(uid !== undefined ? [`unix:///run/user/${uid}/docker.sock`] : []),
  ];
}

function parseEndpoint(endpoint: string): Endpoint | null {
  if (endpoint.startsWith('unix://')) return { socketPath: endpoint.slice('unix://'.length) };
  if (endpoint.startsWith('tcp://')) {
    const url = new URL(endpoint.replace(/^tcp:/, 'http:'));
    return { host: url.hostname, port: Number(url.port || 2375) };
  }
  return null;
}

/**
 * Asks each candidate endpoint `GET /_ping` with a short timeout; a missing socket file costs one `stat`.
 * Cheap enough to call at the start of every test file (and the result is cached per process by
 * `dockerReachable`). TLS endpoints (`DOCKER_TLS_VERIFY`) count as reachable when they accept a
 * connection, and testcontainers does the rest.
 */
export async function probeDocker(
  options: { endpoints?: readonly string[]; timeoutMs?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<DockerProbe> {
  const env = options.env ?? process.env;
  const endpoints = options.endpoints ?? dockerEndpoints(env);
  const timeoutMs = options.timeoutMs ?? 500;
  const reasons: string[] = [];
  for (const endpoint of endpoints) {
    const target = parseEndpoint(endpoint);
    if (!target) {
      reasons.push(`${endpoint}: unsupported scheme`);
      continue;
    }
    if ('socketPath' in target) {
      try {
        await fs.stat(target.socketPath);
      } catch {
        reasons.push(`${endpoint}: no socket`);
        continue;
      }
    }
    const answer = await ping(target, timeoutMs, Boolean(env.DOCKER_TLS_VERIFY));
    if (answer === 'ok') return { reachable: true, endpoint, reason: `Docker engine at ${endpoint}` };
    reasons.push(`${endpoint}: ${answer}`);
  }
  return { reachable: false, reason: `no Docker engine (${reasons.join('; ') || 'no endpoints'})` };
}

function ping(target: Endpoint, timeoutMs: number, tls: boolean): Promise<string> {
  return new Promise((resolve) => {
    // agent: false — no keep-alive socket outlives the probe.
    const request = http.get({ ...target, path: '/_ping', timeout: timeoutMs, agent: false }, (response) => {
      response.resume();
      resolve(response.statusCode === 200 ? 'ok' : `HTTP ${response.statusCode}`);
    });
    request.on('socket', (socket) => {
      // A TLS endpoint does not speak plain HTTP: accepting the connection is all we can check cheaply.
      if (tls)
        socket.once('connect', () => {
          request.destroy();
          resolve('ok');
        });
    });
    request.on('timeout', () => {
      request.destroy();
      resolve(`no answer within ${timeoutMs} ms`);
    });
    request.on('error', (error) => resolve(error.message));
  });
}

let cached: Promise<DockerProbe> | undefined;

/** `probeDocker()` once per process. */
export function dockerReachable(): Promise<DockerProbe> {
  cached ??= probeDocker();
  return cached;
}

/** Whether `command` is an executable on `PATH` (no process is started). */
export async function onPath(command: string, env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  for (const dir of (env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    try {
      await fs.access(path.join(dir, command), fs.constants.X_OK);
      return true;
    } catch {
      // not here
    }
  }
  return false;
}
