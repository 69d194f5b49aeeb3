// Every code block the README and the packages' READMEs mark as runnable (```js runnable, ```ts runnable; see
// CONTRIBUTING.md) runs here as a user would run it: written to a file inside the repository (so `@fenced/*`,
// kysely and pg resolve as from an installed project, to the built `dist/` through the packages' exports), a
// `js` block as an `.mjs` file on plain Node (no TypeScript, no loader: `await using` is a SyntaxError on Node 20)
// and a `ts` block through tsx. Each gets FENCED_REDIS_URLS (three real redis-server processes started by this
// file) and FENCED_DATABASE_URL (a fresh database on a real Postgres, so `schema: 'public'` is its own), and must
// exit with code 0 on its own: a block that leaves a connection open (no coordinator.close(), no db.destroy())
// never exits and fails when its generous process timeout ends it.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOrStartPostgres, type PostgresServer } from '@fenced/test-utils/postgres';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { documentedRunnableBlocks, type RunnableBlock } from '../../fixtures/runnable-blocks.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const WORK_DIR = path.join(ROOT, '.tmp', `docs-examples-${randomBytes(4).toString('hex')}`);
/** Far above what any example needs: a block still running then is one that does not exit on its own. */
const PROCESS_TIMEOUT_MS = 90_000;

const blocks = documentedRunnableBlocks(ROOT);
let redis: RedisNodes;
let postgres: PostgresServer;
const databases: string[] = [];

async function adminQuery(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: postgres.url });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

/** A fresh database on the test server, and its URL. */
async function freshDatabase(): Promise<string> {
  const name = `fenced_docs_${randomBytes(6).toString('hex')}`;
  await adminQuery(`create database "${name}"`);
  databases.push(name);
  const url = new URL(postgres.url);
  url.pathname = `/${name}`;
  return url.toString();
}

interface Outcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  output: string;
}

/** Runs `file` with `args` and the given environment; kills it (by its pid) after `timeoutMs`. */
function runScript(args: readonly string[], env: NodeJS.ProcessEnv, timeoutMs: number): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, timedOut, output });
    });
  });
}

/** The command line a user runs for this block's language. */
function commandFor(block: RunnableBlock, file: string): string[] {
  return block.language === 'js' ? [file] : ['--import', 'tsx', file];
}

function describeFailure(block: RunnableBlock, outcome: Outcome, timeoutMs: number): string {
  const where = `${block.file}:${block.line} (${block.language})`;
  if (outcome.timedOut) {
    return `${where} did not exit on its own within ${timeoutMs} ms: something stays open (a coordinator without close(), a database without destroy()?)\n${outcome.output}`;
  }
  return `${where} exited with code ${outcome.code} (signal ${outcome.signal})\n${outcome.output}`;
}

beforeAll(async () => {
  // The examples import the packages as users do, through their exports' `default` condition: the build.
  execFileSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-b'], { cwd: ROOT });
  mkdirSync(WORK_DIR, { recursive: true });
  [redis, postgres] = await Promise.all([startRedisNodes(3, { useExisting: false }), findOrStartPostgres()]);
}, 240_000);

afterAll(async () => {
  for (const name of databases) await adminQuery(`drop database if exists "${name}"`);
  await redis?.stop();
  await postgres?.stop();
  rmSync(WORK_DIR, { recursive: true, force: true });
});

describe('the runnable blocks of the documentation', () => {
  it('finds the runnable blocks of the README and the packages’ READMEs', () => {
    const files = new Set(blocks.map((block) => block.file));
    expect(files).toContain('README.md');
    expect(files).toContain('packages/coordinator/README.md');
    expect(files).toContain('packages/guarded-store/README.md');
    expect(blocks.some((block) => block.language === 'js')).toBe(true);
    expect(blocks.some((block) => block.language === 'ts')).toBe(true);
  });

  it.each(blocks.map((block) => [`${block.file}:${block.line} (${block.language})`, block] as const))(
    '%s runs as printed and exits on its own',
    async (_name, block) => {
      const file = path.join(
        WORK_DIR,
        `${block.file.replace(/\W+/g, '-')}-${block.line}.${block.language === 'js' ? 'mjs' : 'ts'}`,
      );
      writeFileSync(file, block.code);
      const env = {
        ...process.env,
        FENCED_REDIS_URLS: redis.urls.join(','),
        FENCED_DATABASE_URL: await freshDatabase(),
        // The examples run as a user's program: no vitest worker state, no source condition.
        NODE_OPTIONS: '',
        VITEST: undefined,
        VITEST_WORKER_ID: undefined,
        VITEST_POOL_ID: undefined,
      };
      const outcome = await runScript(commandFor(block, file), env, PROCESS_TIMEOUT_MS);
      expect(outcome.code, describeFailure(block, outcome, PROCESS_TIMEOUT_MS)).toBe(0);
    },
    PROCESS_TIMEOUT_MS + 30_000,
  );

  // The runner's negative control: a program that never exits must fail it, whatever the timeout. (A short one
  // here: this program never ends, so the length only decides how long the control takes.)
  it('fails a program that does not exit on its own', async () => {
    const block: RunnableBlock = {
      file: 'negative-control.md',
      line: 1,
      language: 'js',
      code: 'setInterval(() => {}, 1 << 30);\nconsole.log("work done, but a timer stays armed");\n',
    };
    const file = path.join(WORK_DIR, 'negative-control.mjs');
    writeFileSync(file, block.code);
    const outcome = await runScript(commandFor(block, file), process.env, 3_000);
    expect(outcome.timedOut).toBe(true);
    expect(describeFailure(block, outcome, 3_000)).toContain('did not exit on its own');
  });
});
