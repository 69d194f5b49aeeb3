// What the acquire and release scripts cost a Redis node, counted in instructions (issue 21): a figure that other
// work on the machine does not move, unlike time and CPU, for before/after comparisons of a script change.
//   node --conditions=@fenced/source --import tsx bench/probes/script-instructions.ts [--batch 1,64] [--items 4096] [--baseline-ref REF]
// Starts one redis-server of its own under `valgrind --tool=callgrind` (DESIGN §3 persistence: appendonly, fsync
// always; a free port, a temporary directory), records a cluster's node state on it the way an initialization does
// (incarnation key, settings with maxTtlMs) and sends acquire.lua and release.lua exactly as a standalone node
// connection does (nodes/node-connection.ts): EVALSHA with the node-state keys first, then per call the lease key,
// the record key and the token register ('fenced' key layout), the lease id, the ttl, a rising token and the seal
// epoch; batches of B calls. Each resource is acquired and released once before counting, so its token register
// exists, as for a resource in use. Then, per variant and batch size, interleaved: callgrind's counters zeroed,
// `--items` acquires in batches of B, a dump; zeroed again, the same leases released, a dump. Instructions per call
// = the dump's total ÷ items. User space only (the kernel's share of a write and an fsync is not counted), and the
// server's timer work during a phase is counted with it (a small share: `hz` 10). With `--baseline-ref`, the same
// scripts as of that revision (its lua/ files read with `git show`) are a second variant on the same server.
// Two more rows put the figures in proportion, on the same server: `redlock` (node-redlock 5's own acquire and
// release scripts, read from its installed package, one EVALSHA per lock as it sends them, B of them pipelined in one
// write as its auto-pipelined clients do) and `floor` (bench/suite/scenarios/floor.ts's plain commands: SET NX PX of the
// lease and SET of the register, then DEL; B calls pipelined). The server is stopped by its process id. Measures;
// never fails on a figure.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort } from '@fenced/test-utils/free-port';
import { redisServerArgs } from '@fenced/test-utils/redis-node';
import { Redis } from 'ioredis';
import { nodeStateKeys, resourceKeys } from '../../packages/coordinator/src/keys/key-layout.js';
import { MAX_BATCH_SIZE } from '../../packages/coordinator/src/scripts/script-batcher.js';
import { loadScriptSource } from '../../packages/coordinator/src/scripts/scripts.js';
import { positiveInteger } from '../suite/options.js';
import { redlockSources } from './redlock-scripts.js';
import { scriptKeys } from '../../packages/coordinator/src/scripts/script-keys.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const PREFIX = 'fenced';
/** As long as a real lease id (lease/lease-ids.ts: 16 random bytes, base64url). */
const LEASE_ID_LENGTH = 22;
// Long enough that no lease expires between its acquire and its release while valgrind runs the server on a loaded
// machine (at 30 s, 1 024 acquires one at a time outlasted it, and the releases found nothing to delete).
const TTL_MS = 600_000;

const { values } = parseArgs({
  options: {
    batch: { type: 'string', default: '1,64' },
    items: { type: 'string', default: '4096' },
    rounds: { type: 'string', default: '2' },
    'baseline-ref': { type: 'string' },
  },
});
const batchSizes = values.batch
  .split(',')
  .map((b) => positiveInteger('--batch', b.trim(), 1, MAX_BATCH_SIZE));
const items = positiveInteger('--items', values.items, 1, 1_000_000);
const rounds = positiveInteger('--rounds', values.rounds, 1, 100);

type Script = 'acquire' | 'release';
/** How one acquire and one release reach the node: fenced's batch scripts, redlock's scripts, or plain commands. */
type Kind = 'fenced' | 'redlock' | 'floor';
interface Variant {
  readonly name: string;
  readonly kind: Kind;
  readonly sources?: Record<Script, string>;
}

/** A script of an earlier revision with its `-- @include` lines expanded from that revision's files. */
function baselineSource(ref: string, script: Script): string {
  const show = (file: string): string => {
    const result = spawnSync('git', ['show', `${ref}:packages/coordinator/lua/${file}`], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    if (result.status !== 0) throw new Error(`git show ${ref}:…/${file} failed: ${result.stderr.trim()}`);
    return result.stdout;
  };
  return show(`${script}.lua`).replace(/^-- @include ([a-z][a-z0-9-]*)$/gm, (_line, name: string) =>
    show(`include/${name}.lua`).trimEnd(),
  );
}

const variants: Variant[] = [
  {
    name: 'fenced',
    kind: 'fenced',
    sources: { acquire: loadScriptSource('acquire'), release: loadScriptSource('release') },
  },
];
if (values['baseline-ref'] !== undefined) {
  const ref = values['baseline-ref'];
  const commit = spawnSync('git', ['rev-parse', '--short', `${ref}^{commit}`], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  if (commit.status !== 0) throw new Error(`--baseline-ref ${ref}: ${commit.stderr.trim()}`);
  variants.push({
    name: `fenced@${commit.stdout.trim()}`,
    kind: 'fenced',
    sources: { acquire: baselineSource(ref, 'acquire'), release: baselineSource(ref, 'release') },
  });
}
variants.push(
  { name: 'redlock', kind: 'redlock', sources: redlockSources() },
  { name: 'floor', kind: 'floor' },
);

if (spawnSync('valgrind', ['--version']).status !== 0) throw new Error('valgrind is not installed');
const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'fenced-script-instructions-'));
const port = await freePort();
const server = spawn(
  'valgrind',
  [
    '--tool=callgrind',
    `--callgrind-out-file=${dir}/callgrind.out`,
    'redis-server',
    '--port',
    String(port),
    '--dir',
    dir,
    ...redisServerArgs('fsync-always'),
  ],
  { stdio: 'ignore' },
);
const pid = server.pid!;
const client = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });

async function connect(): Promise<void> {
  const deadline = performance.now() + 60_000;
  for (;;) {
    try {
      await client.connect();
      await client.ping();
      return;
    } catch (error) {
      client.disconnect();
      if (performance.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/** Zeroes callgrind's counters (`zero`) or writes them to a new dump file and returns its instruction total (`dump`). */
let dumps = 0;
async function callgrind(action: 'zero' | 'dump'): Promise<number> {
  const result = spawnSync('callgrind_control', [action === 'zero' ? '-z' : '-d', String(pid)], {
    encoding: 'utf8',
  });
  if (result.status !== 0)
    throw new Error(`callgrind_control ${action} failed: ${result.stderr || result.stdout}`);
  if (action === 'zero') return 0;
  dumps++;
  const file = `${dir}/callgrind.out.${dumps}`;
  const deadline = performance.now() + 30_000;
  for (;;) {
    const text = await fs.readFile(file, 'utf8').catch(() => '');
    const total = /^(?:summary|totals): (\d+)/m.exec(text);
    if (total !== null) return Number(total[1]);
    if (performance.now() > deadline) throw new Error(`no instruction total in ${file}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const state = nodeStateKeys(PREFIX);
let token = BigInt(Date.now()) << 20n;
const leaseIds = new Map<string, string>();

function leaseId(resource: string): string {
  let id = leaseIds.get(resource);
  if (id === undefined) {
    id = createHash('sha256').update(resource).digest('base64url').slice(0, LEASE_ID_LENGTH);
    leaseIds.set(resource, id);
  }
  return id;
}

/** Fails the run when a call did not do what is being counted (granted, or released). */
function expectDone(variant: Variant, script: Script, reply: unknown): void {
  const done =
    variant.kind === 'fenced'
      ? Array.isArray(reply) && reply[0] === 1 && (script === 'release' || reply[1] === 1)
      : variant.kind === 'redlock'
        ? reply === 1
        : reply === 'OK' || reply === 1;
  if (!done) throw new Error(`${variant.name} ${script}: unexpected reply ${JSON.stringify(reply)}`);
}

/**
 * Sends `script` for every resource, B at a time: fenced as one EVALSHA per batch (NodeConnection's batchers),
 * redlock as B pipelined EVALSHAs of one lock each, the floor as B pipelined plain commands per step.
 */
async function run(
  variant: Variant,
  sha: Record<Script, string> | undefined,
  script: Script,
  resources: readonly string[],
  batch: number,
): Promise<void> {
  for (let at = 0; at < resources.length; at += batch) {
    const group = resources.slice(at, at + batch);
    if (variant.kind === 'fenced') {
      const keys: string[] = script === 'acquire' ? scriptKeys.acquire(state) : [];
      const args: string[] = [];
      for (const resource of group) {
        const k = resourceKeys(PREFIX, resource);
        if (script === 'acquire') {
          keys.push(...scriptKeys.acquireItem(k));
          token++;
          args.push(leaseId(resource), String(TTL_MS), token.toString(), '');
        } else {
          keys.push(...scriptKeys.releaseItem(k));
          args.push(leaseId(resource), k.channel);
        }
      }
      // Since the nodes check the settings on every call, acquire.lua ends its arguments with the caller's node count
      // (an earlier revision's script, for --baseline-ref, may not).
      if (
        script === 'acquire' &&
        variant.sources !== undefined &&
        /4 \* n \+ 1/.test(variant.sources.acquire)
      ) {
        args.push('1');
      }
      const replies = (await client.evalsha(sha![script], keys.length, ...keys, ...args)) as unknown[];
      for (const reply of replies) expectDone(variant, script, reply);
      continue;
    }
    const pipeline = client.pipeline();
    for (const resource of group) {
      if (variant.kind === 'redlock') {
        const key = `redlock:${resource}`;
        if (script === 'acquire') pipeline.evalsha(sha!.acquire, 1, key, leaseId(resource), String(TTL_MS));
        else pipeline.evalsha(sha!.release, 1, key, leaseId(resource));
      } else {
        const k = resourceKeys(PREFIX, resource);
        if (script === 'acquire') {
          token++;
          pipeline.set(k.lease, `${leaseId(resource)}|${token}`, 'PX', TTL_MS, 'NX');
          pipeline.set(k.token, token.toString());
        } else {
          pipeline.del(k.lease);
        }
      }
    }
    for (const [error, reply] of (await pipeline.exec()) ?? []) {
      if (error !== null) throw error;
      expectDone(variant, script, reply);
    }
  }
}

interface Row {
  variant: string;
  batch: number;
  acquire: number[];
  release: number[];
}
const rows: Row[] = [];
try {
  await connect();
  await client.set(state.incarnation, 'script-instructions');
  await client.hset(state.settings, 'maxTtlMs', String(TTL_MS * 2));
  const shas = new Map<string, Record<Script, string>>();
  for (const variant of variants) {
    if (variant.sources === undefined) continue;
    shas.set(variant.name, {
      acquire: (await client.script('LOAD', variant.sources.acquire)) as string,
      release: (await client.script('LOAD', variant.sources.release)) as string,
    });
  }
  const variantOf = (row: Row): Variant => variants.find((v) => v.name === row.variant)!;
  for (const variant of variants) {
    for (const batch of batchSizes) rows.push({ variant: variant.name, batch, acquire: [], release: [] });
  }
  // Each variant and batch size on resources of its own, each acquired and released once before counting.
  const resourcesOf = (row: Row): string[] =>
    Array.from({ length: items }, (_, i) => `${row.variant}-b${row.batch}-resource-${i}`);
  for (const row of rows) {
    const sha = shas.get(row.variant);
    await run(variantOf(row), sha, 'acquire', resourcesOf(row), row.batch);
    await run(variantOf(row), sha, 'release', resourcesOf(row), row.batch);
  }
  for (let round = 0; round < rounds; round++) {
    for (const row of round % 2 === 0 ? rows : [...rows].reverse()) {
      const sha = shas.get(row.variant);
      process.stderr.write(`round ${round + 1}/${rounds}: ${row.variant}, batches of ${row.batch}\n`);
      await callgrind('zero');
      await run(variantOf(row), sha, 'acquire', resourcesOf(row), row.batch);
      row.acquire.push((await callgrind('dump')) / items);
      await callgrind('zero');
      await run(variantOf(row), sha, 'release', resourcesOf(row), row.batch);
      row.release.push((await callgrind('dump')) / items);
    }
  }
} finally {
  client.disconnect();
  process.kill(pid, 'SIGTERM');
  await new Promise((resolve) => server.once('exit', resolve));
  await fs.rm(dir, { recursive: true, force: true });
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const format = (n: number): string => Math.round(n).toLocaleString('en-US');
const lines = [
  `Redis instructions per call on one node (callgrind, user space; ${items} calls per phase, median of ${rounds} rounds). ` +
    'A batch is B calls arriving in one write: one EVALSHA of B calls for fenced, B pipelined EVALSHAs for redlock, ' +
    'B pipelined commands per step for the floor.',
  '',
  '| batch | variant | acquire per call | release per call | per acquire+release | fenced ÷ variant |',
  '| --- | --- | --- | --- | --- | --- |',
];
for (const batch of batchSizes) {
  const ofBatch = rows.filter((r) => r.batch === batch);
  const cycleOf = (row: Row): number => median(row.acquire) + median(row.release);
  const fenced = cycleOf(ofBatch.find((r) => r.variant === 'fenced')!);
  for (const row of ofBatch) {
    const ratio = row.variant === 'fenced' ? '' : `${(fenced / cycleOf(row)).toFixed(2)}×`;
    lines.push(
      `| ${batch} | ${row.variant} | ${format(median(row.acquire))} | ${format(median(row.release))} | ${format(cycleOf(row))} | ${ratio} |`,
    );
  }
}
process.stdout.write(lines.join('\n') + '\n');
