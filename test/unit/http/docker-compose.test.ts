import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { ENV_SCHEMA, loadConfig } from '../../../packages/service/src/config.js';

// There is no Docker engine where the tests run, so the stack is checked statically: the compose file parses,
// the Redis nodes have the persistence DESIGN §3 requires and staggered AOF rewrites (README), authentication
// is on without a secret in the file, every service has a health check that its dependants wait for, the
// coordinator's variables are ones its configuration reads, and the commands point at files the build makes.
const root = fileURLToPath(new URL('../../../', import.meta.url));

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test?: string[] };
  profiles?: string[];
}

const compose = parse(readFileSync(`${root}docker-compose.yml`, 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
const dockerfile = readFileSync(`${root}Dockerfile`, 'utf8');

/** The value that follows `flag` in a command, or undefined. */
function argAfter(command: readonly string[], flag: string): string | undefined {
  const at = command.indexOf(flag);
  return at === -1 ? undefined : command[at + 1];
}

/**
 * A variable reference that compose must resolve from the environment or `.env` and refuses to start without:
 * `${NAME:?message}` (or `${NAME?message}`), nothing else in the value. Returns NAME, or undefined.
 */
function requiredVariable(value: string | undefined): string | undefined {
  return /^\$\{([A-Z_][A-Z0-9_]*):?\?[^}]+\}$/.exec(value ?? '')?.[1];
}

/** Compose's `${NAME}`, `${NAME:-default}` and `${NAME:?message}` substitution, for the checks below. */
function interpolate(value: string, env: Readonly<Record<string, string>>): string {
  return value.replace(/\$\{([A-Z_][A-Z0-9_]*)(?:(:?[-?])([^}]*))?\}/g, (_match, name: string, op, arg) => {
    const set = env[name];
    if (op === ':-' || op === '-')
      return set === undefined || (op === ':-' && set === '') ? String(arg) : set;
    if ((op === ':?' || op === '?') && (set === undefined || (op === ':?' && set === ''))) {
      throw new Error(`${name}: ${String(arg)}`);
    }
    return set ?? '';
  });
}

/** `dist/x.js` of a package is built from `src/x.ts`. */
function sourceOf(distPath: string): string {
  return distPath.replace('/dist/', '/src/').replace(/\.js$/, '.ts');
}

describe('docker-compose.yml and Dockerfile', () => {
  const redis = Object.entries(compose.services).filter(([name]) => name.startsWith('redis-'));

  /** The services `docker compose up` starts: all but those behind a profile (the one-shot client). */
  const longRunning = Object.entries(compose.services).filter(
    ([, service]) => service.profiles === undefined,
  );

  it('runs five Redis masters with fsync-always AOF, noeviction, no RDB, each on its own volume', () => {
    expect(redis.map(([name]) => name)).toEqual(['redis-1', 'redis-2', 'redis-3', 'redis-4', 'redis-5']);
    for (const [name, service] of redis) {
      expect(service.image).toBe('redis:7');
      const args = service.command!.join(' ');
      expect(args).toContain('--appendonly yes');
      expect(args).toContain('--appendfsync always');
      expect(args).toContain('--maxmemory-policy noeviction');
      expect(service.command).toEqual(expect.arrayContaining(['--save', '']));
      expect(args).not.toContain('replicaof');
      expect(service.volumes).toEqual([`${name}:/data`]);
      expect(compose.volumes).toHaveProperty(name);
    }
  });

  it('runs Postgres 15 and points the example service at it', () => {
    expect(compose.services.postgres?.image).toBe('postgres:15');
    const example = compose.services.example!;
    expect(example.environment?.FENCED_DATABASE_URL).toMatch(/^postgres:\/\/[^@]+@postgres:5432\//);
    expect(example.environment?.PORT).toBe('3000');
    expect(example.depends_on?.postgres?.condition).toBe('service_healthy');
  });

  it('points the coordinator at all five nodes and waits for them', () => {
    const coordinator = compose.services.coordinator!;
    expect(coordinator.environment?.FENCED_REDIS_URLS?.split(',')).toEqual(
      redis.map(([name]) => `redis://${name}:6379`),
    );
    expect(coordinator.environment?.FENCED_HOST).toBe('0.0.0.0');
    for (const [name] of redis) expect(coordinator.depends_on?.[name]?.condition).toBe('service_healthy');
  });

  it('runs entry points that the build produces', () => {
    for (const service of [compose.services.coordinator!, compose.services.example!]) {
      const script = service.command!.find((part) => part.endsWith('.js'))!;
      expect(existsSync(`${root}${sourceOf(script)}`), script).toBe(true);
    }
    const cmd = /^CMD \["node", "([^"]+)"\]$/m.exec(dockerfile)?.[1];
    expect(cmd).toBe('packages/coordinator/dist/bin/fenced-coordinator.js');
    expect(existsSync(`${root}${sourceOf(cmd!)}`)).toBe(true);
  });

  it('builds with npm ci and tsc -b, and ships the Lua scripts and the migrations', () => {
    expect(dockerfile).toMatch(/RUN npm ci/);
    expect(dockerfile).toMatch(/npx tsc -b/);
    expect(dockerfile).toMatch(/^FROM .+ AS build$/m);
    expect(dockerfile).toMatch(/^FROM .+ AS runtime$/m);
    for (const folder of ['packages/coordinator/lua/', 'packages/guarded-store/migrations/']) {
      expect(dockerfile).toContain(`COPY --from=build /app/${folder} ${folder}`);
      expect(existsSync(`${root}${folder}`), folder).toBe(true);
    }
    // The command's `serve` loads @fenced/service: the image ships its build and manifest with the others.
    for (const pkg of ['shared', 'coordinator', 'service', 'guarded-store']) {
      expect(dockerfile).toContain(`COPY packages/${pkg}/package.json packages/${pkg}/`);
      expect(dockerfile).toContain(`COPY --from=build /app/packages/${pkg}/dist/ packages/${pkg}/dist/`);
    }
  });
  it('gives each Redis node its own auto-aof-rewrite-min-size, so they do not rewrite together', () => {
    const sizes = redis.map(([, service]) => argAfter(service.command!, '--auto-aof-rewrite-min-size'));
    for (const size of sizes) expect(size).toMatch(/^[1-9][0-9]*mb$/);
    expect(new Set(sizes).size).toBe(redis.length);
  });

  it('turns authentication on with a key compose must be given, and hands the client the same key', () => {
    const coordinator = compose.services.coordinator!;
    const variable = requiredVariable(coordinator.environment?.FENCED_API_KEYS);
    expect(variable, 'FENCED_API_KEYS is a required ${VAR:?…} reference, not a literal key').toBeDefined();
    const client = compose.services.client!;
    expect(requiredVariable(client.environment?.FENCED_API_KEY)).toBe(variable);
    expect(client.environment?.FENCED_COORDINATOR_URL).toBe('http://coordinator:8080');
    // No key, token or password-like literal anywhere but Postgres's throw-away local credentials.
    for (const [name, service] of Object.entries(compose.services)) {
      for (const [key, value] of Object.entries(service.environment ?? {})) {
        if (/KEY|SECRET|TOKEN/.test(key)) expect(requiredVariable(value), `${name}.${key}`).toBeDefined();
      }
    }
    // Without the variable compose refuses to start; with it the coordinator's configuration loads, auth on.
    const environment = coordinator.environment!;
    expect(() => interpolate(environment.FENCED_API_KEYS!, {})).toThrow(variable);
    const key = randomBytes(32).toString('base64'); // what `openssl rand -base64 32` prints
    const config = loadConfig(
      Object.fromEntries(
        Object.entries(environment).map(([k, v]) => [k, interpolate(v, { [variable!]: key })]),
      ),
    );
    expect(config.apiKeys).toEqual([key]);
    expect(config.redisUrls).toHaveLength(redis.length);
  });

  it('uses only variables the coordinator reads, in the compose file and the Dockerfile', () => {
    const known = Object.keys(ENV_SCHEMA.shape);
    expect(known).toContain('FENCED_REDIS_URLS');
    expect(Object.keys(compose.services.coordinator!.environment!).filter((n) => !known.includes(n))).toEqual(
      [],
    );
    const dockerfileEnv = [...dockerfile.matchAll(/^\s*(?:ENV\s+)?(FENCED_[A-Z_]+)=/gm)].map((m) => m[1]!);
    expect(dockerfileEnv).toContain('FENCED_PORT');
    expect(dockerfileEnv.filter((n) => !known.includes(n))).toEqual([]);
  });

  it('has a health check on every service that `up` starts', () => {
    expect(longRunning.map(([name]) => name).sort()).toEqual(
      ['coordinator', 'example', 'postgres', ...redis.map(([name]) => name)].sort(),
    );
    for (const [name, service] of longRunning) {
      expect(service.healthcheck?.test?.length, name).toBeGreaterThan(0);
    }
    for (const [name, service] of redis) {
      expect(service.healthcheck?.test, name).toEqual(['CMD-SHELL', 'redis-cli ping | grep -q PONG']);
    }
    expect(compose.services.postgres?.healthcheck?.test).toEqual(
      expect.arrayContaining(['CMD', 'pg_isready']),
    );
  });

  it('checks the coordinator on /readyz, sending the key when health routes need one', () => {
    const coordinator = compose.services.coordinator!;
    const probe = coordinator.healthcheck!.test!.join(' ');
    expect(probe).toContain(`http://127.0.0.1:${coordinator.environment?.FENCED_PORT}/readyz`);
    if (coordinator.environment?.FENCED_HEALTH_AUTH === 'required') {
      expect(probe).toContain("authorization:'Bearer '+process.env.FENCED_API_KEYS.split(',')[0]");
    }
    const example = compose.services.example!;
    expect(example.healthcheck!.test!.join(' ')).toContain(
      `http://127.0.0.1:${example.environment?.PORT}/healthz`,
    );
  });

  it('starts every service only after its dependencies are healthy', () => {
    const dependants = Object.entries(compose.services).filter(([, s]) => s.depends_on !== undefined);
    expect(dependants.map(([name]) => name).sort()).toEqual(['client', 'coordinator', 'example']);
    for (const [name, service] of dependants) {
      for (const [dependency, { condition }] of Object.entries(service.depends_on!)) {
        expect(condition, `${name} → ${dependency}`).toBe('service_healthy');
        expect(compose.services[dependency]?.healthcheck?.test, dependency).toBeDefined();
      }
    }
  });
});
