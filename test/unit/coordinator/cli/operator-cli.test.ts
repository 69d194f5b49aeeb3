// The operator commands' argument handling, configuration and module boundary, without any server: bad arguments
// are exit code 2 with a message naming what was wrong, what was given and what is allowed.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../../packages/service/src/config.js';
import { coordinatorOptionsOf, loadCliConfig } from '../../../../packages/coordinator/src/cli/cli-config.js';
import { importGuardedStore, readFence } from '../../../../packages/coordinator/src/cli/fence-reader.js';
import { nodeIndexOf } from '../../../../packages/coordinator/src/cli/repair-command.js';
import { runCli } from '../../../../packages/coordinator/src/cli/run-cli.js';
import { SERVICE_PACKAGE, serveCommand } from '../../../../packages/coordinator/src/cli/serve-command.js';
import { UsageError } from '../../../../packages/coordinator/src/cli/usage-error.js';

async function cli(argv: string[], env: Record<string, string> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCli(argv, env, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

const URLS = 'redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003';

describe('fenced-coordinator command line', () => {
  it('serves when given no command or `serve`, and refuses arguments to serve', async () => {
    expect(await runCli([])).toBe('serve');
    expect(await runCli(['serve'])).toBe('serve');
    const withArgs = await cli(['serve', '--port', '1']);
    expect(withArgs.code).toBe(2);
    expect(withArgs.err).toContain('serve takes no arguments');
  });

  it('names the unknown command and the allowed ones (exit 2)', async () => {
    const result = await cli(['stauts']);
    expect(result.code).toBe(2);
    expect(result.err).toContain(
      'unknown command "stauts" (allowed: serve, status, inspect, repair, settings, keygen)',
    );
  });

  it("prints each command's help (exit 0)", async () => {
    for (const command of ['status', 'inspect', 'repair', 'keygen']) {
      const result = await cli([command, '--help']);
      expect(result.code).toBe(0);
      expect(result.out).toContain(`usage: fenced-coordinator ${command}`);
    }
    expect((await cli(['--help'])).out).toContain('commands:');
  });

  it('prints its version with --version and -V, and names no repository-only script in any help', async () => {
    const manifest = JSON.parse(
      readFileSync(new URL('../../../../packages/coordinator/package.json', import.meta.url), 'utf8'),
    ) as { version: string };
    for (const flag of ['--version', '-V']) {
      const result = await cli([flag]);
      expect(result.code).toBe(0);
      expect(result.out).toBe(manifest.version);
    }
    const extra = await cli(['--version', 'now']);
    expect(extra.code).toBe(2);
    expect(extra.err).toContain('--version takes no arguments, got "now"');
    for (const command of [[], ['status'], ['inspect'], ['repair'], ['keygen']]) {
      const help = await cli([...command, '--help']);
      expect(help.out).not.toMatch(/npm run/);
    }
  });

  it('refuses missing or extra arguments, saying what it got', async () => {
    const noResource = await cli(['inspect'], { FENCED_REDIS_URLS: URLS });
    expect(noResource.code).toBe(2);
    expect(noResource.err).toContain('inspect needs a <resource>, got none');
    const two = await cli(['inspect', 'a', 'b'], { FENCED_REDIS_URLS: URLS });
    expect(two.code).toBe(2);
    expect(two.err).toContain('inspect takes at most one <resource>, got "a" "b"');
    const noNode = await cli(['repair'], { FENCED_REDIS_URLS: URLS });
    expect(noNode.err).toContain('repair needs a <node>');
    const badTimeout = await cli(['repair', '1', '--timeout-ms', '-5'], { FENCED_REDIS_URLS: URLS });
    expect(badTimeout.code).toBe(2);
    const noUrls = await cli(['status']);
    expect(noUrls.code).toBe(2);
    expect(noUrls.err).toContain('set FENCED_REDIS_URLS or pass --redis-urls');
    const badDb = await cli(['inspect', 'r'], { FENCED_REDIS_URLS: URLS, FENCED_DATABASE_URL: 'mysql://x' });
    expect(badDb.err).toContain('FENCED_DATABASE_URL must be a postgres:// or postgresql:// URL');
    expect(badDb.err).not.toContain('mysql://x');
  });

  it('keygen prints the private key only when asked with --stdout, and checks the key id', async () => {
    const printed = await cli(['keygen', '--stdout', '--id', 'k1']);
    expect(printed.code).toBe(0);
    expect(printed.out).toContain('-----BEGIN PRIVATE KEY-----');
    expect(printed.out).toContain('-----BEGIN PUBLIC KEY-----');
    const badId = await cli(['keygen', '--stdout', '--id', 'no spaces']);
    expect(badId.code).toBe(2);
    expect(badId.err).toContain(`the key id must be 1 to 64 letters, digits, '-' or '_', got "no spaces"`);
    const both = await cli(['keygen', '--stdout', '--out', '/tmp/x']);
    expect(both.code).toBe(2);
    expect(both.err).toContain('not both');
  });
});

describe("the commands' configuration", () => {
  const env = {
    FENCED_REDIS_URLS: ` ${URLS} `,
    FENCED_KEY_PREFIX: 'svc',
    FENCED_NODE_TIMEOUT_MS: '250',
    FENCED_MAX_TTL_MS: '9000',
    FENCED_TOKEN_RETENTION_MS: '20000',
    FENCED_UNSAFE_ALLOW_UNSAFE_NODES: '1',
  };

  it('reads the same values from the same variables as the service', () => {
    const service = loadConfig(env);
    const cli = loadCliConfig('status', {}, env);
    expect(cli).toEqual({
      redisUrls: service.redisUrls,
      keyPrefix: service.keyPrefix,
      nodeTimeoutMs: service.nodeTimeoutMs,
      maxTtlMs: service.maxTtlMs,
      tokenRetentionMs: service.tokenRetentionMs,
      unsafeAllowUnsafeNodes: service.unsafeAllowUnsafeNodes,
    });
    // Without FENCED_MAX_TTL_MS the commands take the library's default (the service's is a service matter).
    const defaults = loadCliConfig('status', {}, { FENCED_REDIS_URLS: URLS });
    expect(defaults.maxTtlMs).toBeUndefined();
    expect(coordinatorOptionsOf(defaults)).not.toHaveProperty('maxTtlMs');
  });

  it('lets flags override the environment', () => {
    const cli = loadCliConfig(
      'status',
      { 'redis-urls': 'redis://h:1', 'key-prefix': 'other', 'node-timeout-ms': '5', 'max-ttl-ms': '15000' },
      env,
    );
    expect(cli).toMatchObject({
      redisUrls: ['redis://h:1'],
      keyPrefix: 'other',
      nodeTimeoutMs: 5,
      maxTtlMs: 15000,
    });
  });

  it('names the flag or variable that is wrong, without echoing URLs', () => {
    expect(() => loadCliConfig('status', { 'max-ttl-ms': 'ten' }, env)).toThrow(
      '--max-ttl-ms must be an integer from 1 to 86400000, got "ten"',
    );
    expect(() => loadCliConfig('status', {}, { FENCED_REDIS_URLS: 'http://user:secret@h' })).toThrow(
      /FENCED_REDIS_URLS entry 0 is not a redis:\/\/ or rediss:\/\/ URL with a host, or cluster:<url>\+<url>\+\.\.\. \(seed URLs of a Redis Cluster member\)$/,
    );
    expect(() =>
      loadCliConfig('status', {}, { FENCED_REDIS_URLS: 'cluster:redis://h:7000+http://user:secret@h' }),
    ).toThrow(
      'FENCED_REDIS_URLS entry 0 is a cluster member whose seed 1 is not a redis:// or rediss:// URL with a host (seeds are joined by +)',
    );
    expect(() =>
      loadCliConfig('status', {}, { FENCED_REDIS_URLS: 'redis://h:1, redis://user:secret@h:26371x' }),
    ).toThrow("FENCED_REDIS_URLS entry 1 has the port '26371x': a port is a whole number from 0 to 65535");
    expect(() =>
      loadCliConfig('status', {}, { FENCED_REDIS_URLS: 'cluster:redis://h:7000+redis://h:7001x' }),
    ).toThrow("FENCED_REDIS_URLS entry 0 is a cluster member whose seed 1 has the port '7001x'");
    expect(() => loadCliConfig('status', {}, { FENCED_REDIS_URLS: 'cluster:' })).toThrow(
      'FENCED_REDIS_URLS entry 0 is cluster: with no seed URL (cluster:redis://host:port+...)',
    );
    expect(() => loadCliConfig('status', {}, { ...env, FENCED_KEY_PREFIX: 'a b' })).toThrow(UsageError);
  });

  it('takes a node as an index or as host:port', () => {
    const config = loadCliConfig('repair', {}, { FENCED_REDIS_URLS: `${URLS},redis://example.net` });
    expect(nodeIndexOf('2', config)).toBe(2);
    expect(nodeIndexOf('127.0.0.1:7002', config)).toBe(1);
    expect(nodeIndexOf('example.net:6379', config)).toBe(3);
    expect(() => nodeIndexOf('4', config)).toThrow('<node> index must be from 0 to 3 (4 nodes), got 4');
  });

  it('reads a Redis Cluster member as cluster:<url>+<url>', () => {
    const config = loadCliConfig(
      'status',
      {},
      {
        FENCED_REDIS_URLS: 'redis://a:1,cluster:redis://c:7000+redis://d:7001,redis://b:2',
      },
    );
    expect(config.redisUrls).toEqual(['redis://a:1', 'cluster:redis://c:7000+redis://d:7001', 'redis://b:2']);
    expect(coordinatorOptionsOf(config).nodes).toEqual([
      'redis://a:1',
      { cluster: ['redis://c:7000', 'redis://d:7001'] },
      'redis://b:2',
    ]);
    expect(nodeIndexOf('cluster(c:7000,d:7001)', config)).toBe(1);
  });
});

describe('the module boundary', () => {
  it('loads nothing of the HTTP service: no express, fastify, prom-client, pino or zod, no http/, server or config', () => {
    const root = fileURLToPath(new URL('../../../../packages/coordinator/src', import.meta.url));
    const forbidden = /^(express|fastify|prom-client|pino|zod|@fenced\/service)(\/|$)/;
    const seen = new Set<string>();
    const problems: string[] = [];
    const visit = (file: string): void => {
      if (seen.has(file)) return;
      seen.add(file);
      const relative = path.relative(root, file);
      if (relative.startsWith('http/') || relative === 'server.ts' || relative === 'config.ts') {
        problems.push(relative);
        return;
      }
      // Static imports and re-exports only: serve-command.ts's dynamic import of @fenced/service is how `serve` starts.
      const text = readFileSync(file, 'utf8');
      for (const match of text.matchAll(/^\s*(?:import|export)\s(?:[^'";]*?\sfrom\s)?'([^']+)'/gm)) {
        const specifier = match[1]!;
        if (forbidden.test(specifier)) problems.push(`${relative} imports ${specifier}`);
        else if (specifier.startsWith('.'))
          visit(path.resolve(path.dirname(file), specifier.replace(/\.js$/, '.ts')));
      }
    };
    visit(path.join(root, 'bin/fenced-coordinator.ts'));
    expect(seen.size).toBeGreaterThan(10);
    expect(seen.has(path.join(root, 'cli/status-command.ts'))).toBe(true);
    expect(problems).toEqual([]);
  });
});

describe('serve', () => {
  it('says how to install @fenced/service when it is missing, and runs its main() when it is there', async () => {
    const err: string[] = [];
    const output = { out: () => undefined, err: (line: string) => err.push(line) };
    // Node's error for a package that is not installed.
    const notFound = (specifier: string): Promise<unknown> =>
      Promise.reject(
        Object.assign(new Error(`Cannot find package '${specifier}' imported from /app/x.js`), {
          code: 'ERR_MODULE_NOT_FOUND',
        }),
      );
    expect(await serveCommand(notFound, output)).toBe(2);
    expect(err.join('\n')).toContain('npm install @fenced/service');
    expect(err.join('\n')).toContain('npm run pack writes the tarball');
    expect(err.join('\n')).toContain('status, inspect, repair, keygen');

    // A dependency of an installed service that is missing is not "the service is missing": it is thrown.
    const brokenDependency = (): Promise<unknown> =>
      Promise.reject(
        Object.assign(new Error("Cannot find package 'fastify-no-such-plugin' imported from /app/x.js"), {
          code: 'ERR_MODULE_NOT_FOUND',
        }),
      );
    await expect(serveCommand(brokenDependency, output)).rejects.toThrow(/fastify-no-such-plugin/);

    let ran = 0;
    const service = (specifier: string): Promise<unknown> =>
      Promise.resolve(specifier === SERVICE_PACKAGE ? { main: () => Promise.resolve(void ran++) } : {});
    expect(await serveCommand(service, output)).toBeUndefined();
    expect(ran).toBe(1);
  });

  it('loads the real @fenced/service of the workspace', async () => {
    const loaded = (await import(SERVICE_PACKAGE)) as { main?: unknown };
    expect(typeof loaded.main).toBe('function');
  });
});

describe('the fence read of inspect', () => {
  it('says the fence was not checked when @fenced/guarded-store is not installed', async () => {
    expect(await importGuardedStore('@fenced/no-such-package')).toBeUndefined();
    const reading = await readFence('postgres://nobody@127.0.0.1:1/none', 'public', 'r', () =>
      importGuardedStore('@fenced/no-such-package'),
    );
    expect(reading).toEqual({
      checked: false,
      reason: expect.stringContaining('is not installed next to @fenced/coordinator') as unknown,
    });
  });

  it('finds the store in this workspace', async () => {
    const store = await importGuardedStore();
    expect(typeof store?.createDatabase).toBe('function');
  });
});
