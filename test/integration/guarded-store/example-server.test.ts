import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '@fenced/test-utils/free-port';
import { own, waitForExit } from '@fenced/test-utils/owned-processes';
import {
  createTestSchema,
  findOrStartPostgres,
  type PostgresServer,
  type TestSchema,
} from '@fenced/test-utils/postgres';

const SERVER = fileURLToPath(
  new URL('../../../packages/guarded-store/src/example/server.ts', import.meta.url),
);
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The entry script as docker-compose runs it, but from sources (tsx + the source condition). */
function startServer(env: Record<string, string>): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, ['--conditions=@fenced/source', '--import', 'tsx', SERVER], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  own(child);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return { child, output: () => output };
}

let server: PostgresServer;
let schema: TestSchema;

beforeAll(async () => {
  server = await findOrStartPostgres();
  schema = await createTestSchema(server, 'fenced_gs_server');
});
afterAll(async () => {
  await schema?.drop();
  await server?.stop();
});

describe('example server entry script', () => {
  // The other variables' validation is unit-tested (loadExampleConfig); this pins the exit path once.
  it('refuses to start without FENCED_DATABASE_URL, naming the variable', async () => {
    const { child, output } = startServer({ PORT: '3000' });
    await waitForExit(child);
    expect(child.exitCode).toBe(2);
    expect(output()).toContain('FENCED_DATABASE_URL');
  });

  it('migrates, serves guarded writes and stops on SIGTERM', async () => {
    const port = await freePort();
    const { child, output } = startServer({
      FENCED_DATABASE_URL: server.url,
      PORT: String(port),
      FENCED_SCHEMA: schema.schema,
    });
    const base = `http://127.0.0.1:${port}`;
    while (!output().includes('listening')) {
      if (child.exitCode !== null) throw new Error(`server exited: ${output()}`);
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const put = await fetch(`${base}/documents/d1`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', 'Fencing-Token': '3' },
      body: JSON.stringify({ content: 'hello' }),
    });
    expect(put.status).toBe(200);
    const stale = await fetch(`${base}/documents/d1`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', 'Fencing-Token': '2' },
      body: JSON.stringify({ content: 'late' }),
    });
    expect(stale.status).toBe(409);
    expect(await stale.json()).toMatchObject({ error: { code: 'STALE_TOKEN' } });
    if (child.pid !== undefined) process.kill(child.pid, 'SIGTERM');
    await waitForExit(child);
    expect(child.exitCode).toBe(0);
  });
});
