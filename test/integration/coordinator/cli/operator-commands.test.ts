// The operator commands as an operator runs them: the real `fenced-coordinator` command in a child process, its
// configuration in the environment, real Redis nodes (and a real Postgres for the fence) started by this file.
import { execFile } from 'node:child_process';
import { createPublicKey, createPrivateKey, randomUUID, sign, verify } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Coordinator } from '@fenced/coordinator';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import { createStoreFixture, type StoreFixture } from '../../../fixtures/guarded-store-fixture.js';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const BIN = path.join(ROOT, 'packages/coordinator/src/bin/fenced-coordinator.ts');
const MAX_TTL_MS = 2_000;

let env: RedisNodes;
let coordinator: Coordinator;
const prefix = `cli-${randomUUID().slice(0, 8)}`;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `fenced-coordinator <args>` with the cluster of this file in its environment. */
function run(args: string[], extraEnv: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--conditions=@fenced/source', '--import', 'tsx', BIN, ...args],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          FENCED_REDIS_URLS: env.urls.join(','),
          FENCED_KEY_PREFIX: prefix,
          FENCED_MAX_TTL_MS: String(MAX_TTL_MS),
          ...extraEnv,
        },
        timeout: 120_000,
      },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

function json<T>(result: Run): T {
  return JSON.parse(result.stdout) as T;
}

interface StatusJson {
  quorum: number;
  votingNodes: number;
  quorumAvailable: boolean;
  nodes: { node: number; reachable: boolean; voting: boolean; configOk: boolean; initialized?: boolean }[];
}

beforeAll(async () => {
  env = await startRedisNodes(3);
  coordinator = new Coordinator({ nodes: env.urls, keyPrefix: prefix, maxTtlMs: MAX_TTL_MS });
  await coordinator.ready();
});

afterAll(async () => {
  await coordinator?.close();
  await env?.stop();
});

describe('fenced-coordinator status', () => {
  it('reports every node of a healthy cluster reachable, safe, initialized and voting (exit 0)', async () => {
    const result = await run(['status', '--json']);
    expect(result.code, result.stderr).toBe(0);
    const status = json<StatusJson>(result);
    expect(status).toMatchObject({ quorum: 2, votingNodes: 3, quorumAvailable: true });
    for (const node of status.nodes) {
      expect(node).toMatchObject({ reachable: true, voting: true, configOk: true, initialized: true });
    }
    const human = await run(['status']);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain('3 of 3 nodes vote; a quorum needs 2: quorum available');
  });

  it('shows a killed node unreachable and not voting, and exits 1 once no quorum is left', async (ctx) => {
    const why = env.missing('kill', 'restart');
    if (why) ctx.skip(why);
    await env.nodes[2]!.kill();
    try {
      const one = await run(['status', '--json']);
      expect(one.code, one.stderr).toBe(0);
      expect(json<StatusJson>(one).nodes[2]).toMatchObject({ reachable: false, voting: false });
      expect(json<StatusJson>(one).votingNodes).toBe(2);

      await env.nodes[1]!.kill();
      try {
        const none = await run(['status']);
        expect(none.code).toBe(1);
        expect(none.stdout).toContain('NO QUORUM');
        expect(none.stdout).toMatch(/node 1 .*UNREACHABLE/);
      } finally {
        await env.nodes[1]!.restart({ keepData: true });
      }
    } finally {
      await env.nodes[2]!.restart({ keepData: true });
    }
  });

  it('refuses bad arguments with exit code 2, saying what was wrong and what is allowed', async () => {
    const unknown = await run(['status', '--frob']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/Unknown option '--frob'.*allowed: .*--json/);
    const badTimeout = await run(['status'], { FENCED_NODE_TIMEOUT_MS: 'soon' });
    expect(badTimeout.code).toBe(2);
    expect(badTimeout.stderr).toContain(
      'FENCED_NODE_TIMEOUT_MS must be an integer from 1 to 60000, got "soon"',
    );
    const noCommand = await run(['frobnicate']);
    expect(noCommand.code).toBe(2);
    expect(noCommand.stderr).toContain(
      'unknown command "frobnicate" (allowed: serve, status, inspect, repair, settings, keygen)',
    );
  });
});

describe('fenced-coordinator inspect', () => {
  let fixture: StoreFixture<Record<string, never>> | undefined;

  afterAll(async () => {
    await fixture?.close();
  });

  it("shows a held resource with the lease's token, from a quorum, and never the lease id", async () => {
    const resource = `cli/inspect/${randomUUID()}`;
    const lease = await coordinator.acquire(resource, { ttlMs: MAX_TTL_MS, autoExtend: true });
    try {
      const result = await run(['inspect', resource, '--json']);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).not.toContain(lease.id);
      const report = json<{
        held: boolean;
        token: string;
        nodes: { state: string; token?: string }[];
        fence: { checked: boolean };
      }>(result);
      expect(report).toMatchObject({ held: true, token: lease.token.toString(), fence: { checked: false } });
      expect(
        report.nodes.filter((n) => n.state === 'held' && n.token === lease.token.toString()).length,
      ).toBeGreaterThanOrEqual(2);
    } finally {
      await lease.release();
    }
    const free = await run(['inspect', resource]);
    expect(free.code, free.stderr).toBe(0);
    expect(free.stdout).toMatch(/held\s+no/);
    expect(free.stdout).toContain('fence     not checked: no database given');
  });

  it("shows the guard's fence after a guarded write when given the database", async () => {
    fixture = await createStoreFixture();
    const resource = `cli/fence/${randomUUID()}`;
    const lease = await coordinator.acquire(resource, { ttlMs: MAX_TTL_MS, autoExtend: true });
    try {
      await fixture.store.run(lease, () => Promise.resolve());
      const result = await run(['inspect', resource, '--json', '--schema', fixture.schema.schema], {
        FENCED_DATABASE_URL: fixture.server.url,
      });
      expect(result.code, result.stderr).toBe(0);
      const report = json<{
        token: string;
        fence: { checked: boolean; fence: { token: string; updatedAt: string } };
      }>(result);
      expect(report.token).toBe(lease.token.toString());
      expect(report.fence).toMatchObject({ checked: true, fence: { token: lease.token.toString() } });
      expect(Number.isNaN(Date.parse(report.fence.fence.updatedAt))).toBe(false);
      const human = await run([
        'inspect',
        resource,
        '--schema',
        fixture.schema.schema,
        '--database-url',
        fixture.server.url,
      ]);
      expect(human.stdout).toContain(`fence     token ${lease.token}, updated `);
      // Without --schema, public is read and has no fence of this resource: the schema that has one is named.
      const unnamed = await run(['inspect', resource, '--database-url', fixture.server.url]);
      expect(unnamed.code, unnamed.stderr).toBe(0);
      expect(unnamed.stdout).toMatch(/fence {5}none in schema public/);
      expect(unnamed.stdout).toContain(
        `but schema ${fixture.schema.schema} has one: token ${lease.token}, updated `,
      );
      expect(unnamed.stdout).toContain(`(pass --schema ${fixture.schema.schema})`);
      // Named, the schema is the answer: no search elsewhere.
      expect(human.stdout).not.toContain('but schema');
    } finally {
      await lease.release();
    }
  });
});

describe('fenced-coordinator keygen', () => {
  it('writes a usable Ed25519 pair, the private key with mode 0600, and prints no private key', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'fenced-keygen-'));
    try {
      const result = await run(['keygen', '--out', dir, '--id', 'kcli', '--json']);
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout + result.stderr).not.toContain('PRIVATE KEY');
      const files = json<{ keyId: string; privateKeyFile: string; publicKeyFile: string }>(result);
      expect(files.keyId).toBe('kcli');
      expect((await stat(files.privateKeyFile)).mode & 0o777).toBe(0o600);
      const privateKey = createPrivateKey(await readFile(files.privateKeyFile, 'utf8'));
      const publicKey = createPublicKey(await readFile(files.publicKeyFile, 'utf8'));
      const message = Buffer.from('resource|token|lease');
      expect(verify(null, message, publicKey, sign(null, message, privateKey))).toBe(true);

      const again = await run(['keygen', '--out', dir, '--id', 'kcli']);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain('already exists');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('asks where the private key goes instead of printing it unasked (exit 2)', async () => {
    const result = await run(['keygen']);
    expect(result.code).toBe(2);
    expect(result.stdout + result.stderr).not.toContain('PRIVATE KEY');
    expect(result.stderr).toContain('--out <dir> (a 0600 file) or --stdout (printed), got neither');
  });
});

describe('fenced-coordinator settings', () => {
  interface SettingsJson {
    nodes: { node: number; state: string; settings?: Record<string, string> }[];
  }

  it('shows the settings a fresh cluster recorded, changes max-ttl on every node, and coordinators then refuse or adopt', async () => {
    const shown = await run(['settings', '--json']);
    expect(shown.code, shown.stderr).toBe(0);
    for (const node of json<SettingsJson>(shown).nodes) {
      expect(node).toMatchObject({ state: 'ok', settings: { maxTtlMs: String(MAX_TTL_MS), nodeCount: '3' } });
    }

    const changed = await run(['settings', 'set', 'max-ttl', '4000', '--json']);
    expect(changed.code, changed.stderr).toBe(0);
    for (const node of json<SettingsJson>(changed).nodes) expect(node.settings?.maxTtlMs).toBe('4000');

    // A process still configured with the old value refuses to start, naming both values...
    const stale = new Coordinator({ nodes: env.urls, keyPrefix: prefix, maxTtlMs: MAX_TTL_MS });
    const error: unknown = await stale.ready().catch((e: unknown) => e);
    await stale.close();
    expect((error as Error).name).toBe('ClusterSettingsError');
    expect((error as Error).message).toMatch(
      /configured with maxTtlMs 2000, .* recorded on the nodes is 4000/,
    );
    // ... unless told to adopt the recorded one; and the nodes themselves refuse a longer lease.
    const adopting = new Coordinator({
      nodes: env.urls,
      keyPrefix: prefix,
      maxTtlMs: MAX_TTL_MS,
      clusterSettings: 'adopt',
    });
    try {
      await adopting.ready();
      expect(adopting.settings.maxTtlMs).toBe(4000);
      const lease = await adopting.acquire(`settings-${randomUUID()}`, { ttlMs: 3_500 });
      await lease.release();
    } finally {
      await adopting.close();
    }
    // The file's own coordinator (configured with 2000) learns of a longer ttl from the nodes' refusal only when
    // the cluster's is lower: set it back lower than its 2000, and its acquire above the record is refused.
    expect((await run(['settings', 'set', 'max-ttl', '1500'])).code).toBe(0);
    const refused: unknown = await coordinator
      .acquire(`settings-${randomUUID()}`, { ttlMs: 1_800 })
      .catch((e: unknown) => e);
    expect((refused as Error).message).toMatch(/ttlMs must be at most 1500, the cluster's maxTtlMs recorded/);
    expect((await run(['settings', 'set', 'max-ttl', String(MAX_TTL_MS)])).code).toBe(0);
  });

  it('refuses a bad setting with exit code 2, saying what is allowed', async () => {
    const bad = await run(['settings', 'set', 'max-ttl', 'soon']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/max-ttl takes a positive integer number of ms .* got "soon"/);
    const unknown = await run(['settings', 'set', 'drift', '1']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/allowed: max-ttl/);
  });
});

describe('fenced-coordinator repair', () => {
  it('repairs a node restarted empty until it votes again, printing its steps', async (ctx) => {
    const why = env.missing('restartWithoutData');
    if (why) ctx.skip(why);
    // This file's coordinator could notice the empty node and repair it first: the command would then only wait.
    await coordinator.close();
    await env.nodes[1]!.restart({ keepData: false });
    const result = await run(['repair', '1', '--json']);
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const events = result.stdout
      .trim()
      .split('\n')
      .map(
        (line) =>
          JSON.parse(line) as {
            event: string;
            phase?: string;
            elapsedMs?: number;
            status?: { voting: boolean };
          },
      );
    expect(events.at(-1)).toMatchObject({ event: 'done', status: { voting: true } });
    // every step says how long the repair has run so far
    expect(events.filter((e) => e.event === 'progress' && typeof e.elapsedMs !== 'number')).toEqual([]);
    // The phases in order (a long phase also prints periodic progress lines of the same phase).
    const phases = events.filter((e) => e.event === 'progress').map((e) => e.phase);
    expect(phases.filter((phase, i) => phase !== phases[i - 1])).toEqual(['reading', 'copying', 'finishing']);
    const status = await run(['status', '--json']);
    expect(json<StatusJson>(status).nodes[1]).toMatchObject({
      reachable: true,
      voting: true,
      initialized: true,
    });
  });

  it('watches a repair another process runs, starting nothing, until the node votes again', async (ctx) => {
    const why = env.missing('restartWithoutData');
    if (why) ctx.skip(why);
    await env.nodes[0]!.restart({ keepData: false });
    const repairing = run(['repair', '0']);
    const watched = await run(['repair', `${new URL(env.urls[0]!).host}`, '--watch', '--json']);
    const repaired = await repairing;
    expect(repaired.code, repaired.stderr).toBe(0);
    expect(watched.code, watched.stderr).toBe(0);
    const last = JSON.parse(watched.stdout.trim().split('\n').at(-1)!) as {
      event: string;
      status: { voting: boolean };
    };
    expect(last).toMatchObject({ event: 'done', status: { voting: true } });
  });

  it('says nothing needs repairing on a voting node, and refuses an unknown node (exit 2)', async () => {
    const fine = await run(['repair', '0']);
    expect(fine.code, fine.stderr).toBe(0);
    expect(fine.stdout).toContain('votes: nothing to repair');
    const unknown = await run(['repair', '10.0.0.1:6379']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(
      /<node> must be a node index \(0 to 2\) or one of .*, got "10.0.0.1:6379"/,
    );
  });
});
