import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';

// There is no Docker engine where the tests run, so the stack is checked statically: the compose file parses,
// the Redis nodes have the persistence DESIGN §3 requires, and the commands point at files the build makes.
const root = fileURLToPath(new URL('../../../', import.meta.url));

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
}

const compose = parse(readFileSync(`${root}docker-compose.yml`, 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
const dockerfile = readFileSync(`${root}Dockerfile`, 'utf8');

/** `dist/x.js` of a package is built from `src/x.ts`. */
function sourceOf(distPath: string): string {
  return distPath.replace('/dist/', '/src/').replace(/\.js$/, '.ts');
}

describe('docker-compose.yml and Dockerfile', () => {
  const redis = Object.entries(compose.services).filter(([name]) => name.startsWith('redis-'));

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
  });
});
