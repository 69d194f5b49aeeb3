// `npm run bench:repair`: how long the restart repair of one node takes (DESIGN §3; packages/coordinator/src/
// nodes/repair.ts) when the other nodes hold the token registers of N resources, default a million.
//
// For each case it starts three redis-server nodes the way the bench does (appendonly yes, appendfsync always,
// noeviction), lets a Coordinator initialize the namespace (the sealed repair has no wait: maxTtlMs plays no part), writes N token
// registers straight to nodes 0 and 1 (pipelined MSETs), kills node 2 and restarts it empty, and times
// `coordinator.repairNode(2)` until it resolves and the node votes again. Two cases:
//   registers  the N registers are live (retention 1 h: nothing is folded), so the repair reads 2 × N registers
//              from the two sources and writes N to the repaired node;
//   folded     the coordinator runs with tokenRetentionMs = maxTtlMs and the run waits until its fold passes
//              have folded every register into the sources' floors; the repair then copies the floor alone.
// Benchmarks measure and never fail on time; the run fails only if the repair fails or leaves a register lower
// than its source's. See docs/benchmarks.md ("Restart repair"), where a standard run writes its table.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Coordinator } from '@fenced/coordinator';
import { Redis } from 'ioredis';
import * as prettier from 'prettier';
import { startRedisNodes, type RedisNodes } from '@fenced/test-utils/redis-cluster';
import {
  keyCounts,
  machineInfo,
  probeFsync,
  redisCpuSeconds,
  sourceRevision,
  usedMemory,
} from '../suite/environment.js';
import { docHolding, docMarkers, writeDocTables } from '../suite/report.js';
import { sleep } from '../suite/runner.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const DEFAULT_RESOURCES = 1_000_000;
const DEFAULT_MAX_TTL_MS = 2_000;
const PREFIX = 'fenced';
/** Registers per MSET, and MSETs in flight per node, when writing the history. */
const WRITE_BATCH = 1_000;
const WRITE_WINDOW = 16;
/** Registers compared between the repaired node and its sources afterwards, spread over all of them. */
const CHECKED_REGISTERS = 10_000;

const USAGE = `Usage: npm run bench:repair -- [options]

  --repair-resources N  token registers written to the source nodes (default ${DEFAULT_RESOURCES.toLocaleString('en-US')})
  --max-ttl-ms N        maxTtlMs of the coordinator, recorded as the cluster's (default ${DEFAULT_MAX_TTL_MS}; the repair waits on nothing)
  --case NAME[,NAME]    only these cases: registers, folded (default both)
  --out FILE            write the JSON results here instead
  --help                this text

With the default resources and both cases it writes bench/results/repair.json and the "repair" section of
docs/benchmarks.md; any other run writes bench/results/repair.tmp.json (ignored by git) and leaves the docs alone.`;

type CaseName = 'registers' | 'folded';
const CASES: readonly CaseName[] = ['registers', 'folded'];

interface RepairCase {
  case: CaseName;
  resources: number;
  /** Writing the registers to the two sources (both in parallel). */
  writeMs: number;
  /** folded: from the end of the writes until no register was left on either source. */
  foldMs?: number;
  /** Keys and used_memory on each source node when the target was restarted. */
  sourceKeys: number[];
  sourceUsedMemory: number[];
  /** The sources' floors when the target was restarted ('0' when absent). */
  sourceFloors: string[];
  repair: {
    /** From the call to `repairNode(2)` until it resolved. */
    totalMs: number;
    /**
     * The steps, from the repair's status as `nodeStatus()` reports it (read every 2 ms): claiming the marker,
     * sealing and reading the sources, raising the node and restoring live leases (and the finish). There is no
     * wait between them. Undefined when the status was not seen (a step shorter than the polling).
     */
    claimMs?: number;
    readMs?: number;
    raiseMs?: number;
    /** "copying the floor and N active token registers": N. */
    registersCopied?: number;
    /** Repair attempts (more than one if it started over). */
    attempts: number;
    /**
     * CPU the repair used, from the call until it resolved: this process (user + sys, which includes the
     * coordinator's other timers, idle here) and the three redis-servers together (INFO cpu). Less sensitive to
     * the machine's load than the wall times.
     */
    clientCpuMs?: number;
    serverCpuMs?: number;
  };
  after: {
    voting: boolean;
    targetKeys: number;
    targetUsedMemory: number;
    targetFloor: string;
    /** Registers compared (target ≥ the highest source value, or the target's floor when absent there). */
    checked: number;
    lower: number;
    /** A lease taken after the repair got a token above every register written. */
    nextTokenAboveHistory: boolean;
  };
  nodeErrors: number;
}

interface RepairResults {
  schemaVersion: 1;
  kind: 'repair';
  command: string;
  revision: { commit: string; modifiedPackageFiles: string[] };
  startedAt: string;
  finishedAt: string;
  durationSeconds: number;
  machine: ReturnType<typeof machineInfo> & {
    loadAverageAtEnd: number;
    fsync: { samples: number; p50Ms: number; p99Ms: number };
  };
  node: string;
  redisServer: string;
  nodes: 3;
  maxTtlMs: number;
  cases: RepairCase[];
}

function parseOptions(argv: readonly string[]) {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      'repair-resources': { type: 'string' },
      'max-ttl-ms': { type: 'string' },
      case: { type: 'string', multiple: true },
      out: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return 'help' as const;
  const integer = (name: string, text: string | undefined, fallback: number, min: number, max: number) => {
    if (text === undefined) return fallback;
    const value = Number(text);
    if (!Number.isInteger(value) || value < min || value > max) {
      throw new Error(`${name} must be an integer from ${min} to ${max}, got '${text}'`);
    }
    return value;
  };
  const resources = integer(
    '--repair-resources',
    values['repair-resources'],
    DEFAULT_RESOURCES,
    1,
    20_000_000,
  );
  const maxTtlMs = integer('--max-ttl-ms', values['max-ttl-ms'], DEFAULT_MAX_TTL_MS, 100, 600_000);
  const requested = (values.case ?? []).flatMap((c) => c.split(',')).map((c) => c.trim());
  for (const name of requested) {
    if (!(CASES as readonly string[]).includes(name)) {
      throw new Error(`unknown case '${name}': choose from ${CASES.join(', ')}`);
    }
  }
  const cases = requested.length === 0 ? [...CASES] : CASES.filter((c) => requested.includes(c));
  const standard =
    resources === DEFAULT_RESOURCES && maxTtlMs === DEFAULT_MAX_TTL_MS && cases.length === CASES.length;
  return {
    resources,
    maxTtlMs,
    cases,
    out: values.out ?? (standard ? 'bench/results/repair.json' : 'bench/results/repair.tmp.json'),
    writeDocs: standard && values.out === undefined,
    command: ['npm run bench:repair', ...(argv.length > 0 ? ['--', ...argv] : [])].join(' '),
  };
}

function log(text: string): void {
  process.stderr.write(`${text}\n`);
}

const tokenKey = (i: number): string => `${PREFIX}:{r:${i}}:token`;

/** MSETs of `WRITE_BATCH` registers, `WRITE_WINDOW` in flight, value of register i = base + i. */
async function writeRegisters(client: Redis, count: number, base: bigint): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: WRITE_WINDOW }, async () => {
      while (next < count) {
        const from = next;
        next = Math.min(count, next + WRITE_BATCH);
        const args: string[] = [];
        for (let i = from; i < next; i++) args.push(tokenKey(i), (base + BigInt(i)).toString());
        await client.mset(...args);
      }
    }),
  );
}

/**
 * The repair's status text of node `index`, the same text `nodeStatus()` lists among the node's problems. Read
 * from the coordinator's node state directly, so it can be polled every few milliseconds without a round trip;
 * undefined (and no step times) if that state is not where this expects it.
 */
function repairStatusReader(coordinator: Coordinator, index: number): (() => string | undefined) | undefined {
  const set = (coordinator as unknown as { nodes?: { nodes?: readonly unknown[] } }).nodes;
  const node = set?.nodes?.[index] as { repairStatus?: unknown } | undefined;
  if (node === undefined || typeof node !== 'object') return undefined;
  return () => (typeof node.repairStatus === 'string' ? node.repairStatus : undefined);
}

async function runCase(name: CaseName, resources: number, maxTtlMs: number): Promise<RepairCase> {
  const redis: RedisNodes = await startRedisNodes(3, { useExisting: false, backend: 'process' });
  const admin = redis.urls.map((url) => new Redis(url, { enableAutoPipelining: false }));
  for (const client of admin) client.on('error', () => undefined); // node 2 is down for a moment
  let nodeErrors = 0;
  const coordinator = new Coordinator({
    nodes: redis.urls,
    keyPrefix: PREFIX,
    maxTtlMs,
    // registers: a retention far beyond the run, so nothing is folded; folded: the shortest allowed.
    tokenRetentionMs: name === 'folded' ? maxTtlMs : Math.max(maxTtlMs, 3_600_000),
  });
  coordinator.on('nodeError', () => void nodeErrors++);
  try {
    const why = redis.missing('restartWithoutData');
    if (why !== null) throw new Error(why);
    await coordinator.ready(); // initializes the fresh namespace
    const [source0, source1, target] = admin as [Redis, Redis, Redis];

    // Far above any time-derived first guess, so the token after the repair shows the history was kept.
    const base = (BigInt(Date.now()) << 21n) + 1_000_000n;
    log(`${name}: writing ${resources.toLocaleString('en-US')} token registers to nodes 0 and 1`);
    const writeStart = performance.now();
    await Promise.all([writeRegisters(source0, resources, base), writeRegisters(source1, resources, base)]);
    const writeEnd = performance.now();
    const writeMs = writeEnd - writeStart;
    log(`${name}: written in ${(writeMs / 1_000).toFixed(1)} s`);

    let foldMs: number | undefined;
    if (name === 'folded') {
      // The coordinator's own fold passes (every second here) fold registers idle for the retention + 1 s.
      const bound = writeEnd + maxTtlMs + 60_000 + resources / 10; // 60 s + 0.1 ms per register
      for (;;) {
        const [a, b] = await keyCounts([source0, source1]);
        if (a! <= 3 && b! <= 3) break; // incarnation, floor, fold lock
        if (performance.now() > bound) throw new Error(`the registers were not folded within ${bound} ms`);
        process.stderr.write(`\r${name}: waiting for the fold passes: ${a} and ${b} keys on the sources   `);
        await sleep(250);
      }
      foldMs = performance.now() - writeEnd;
      log(
        `\r${name}: every register folded into the floors ${(foldMs / 1_000).toFixed(1)} s after the writes`,
      );
    }
    const sourceKeys = await keyCounts([source0, source1]);
    const sourceUsedMemory = await usedMemory([source0, source1]);
    const sourceFloors = await Promise.all(
      [source0, source1].map(async (c) => (await c.get(`${PREFIX}:node:floor`)) ?? '0'),
    );

    log(`${name}: killing node 2 and restarting it empty`);
    await redis.nodes[2]!.restart({ keepData: false });
    const readStatus = repairStatusReader(coordinator, 2);
    const seen: { at: number; text: string }[] = [];
    let polling = true;
    const poller = (async () => {
      let last: string | undefined;
      while (polling) {
        const text = readStatus?.();
        if (text !== undefined && text !== last) seen.push({ at: performance.now(), text });
        last = text;
        await sleep(2);
      }
    })();
    // In service a repair starts from a vote or probe that reached the node; here the call may come before the
    // coordinator's client has reconnected, and then fails at once (before claiming anything): try again until the
    // connection is back, and time the attempt that ran.
    const serverCpuBefore = await redisCpuSeconds(admin); // waits for the admin link to node 2 to reconnect
    const clientCpuBefore = process.cpuUsage();
    let start = performance.now();
    for (let tries = 1; ; tries++) {
      start = performance.now();
      try {
        await coordinator.repairNode(2);
        break;
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        if (tries >= 200 || !/writeable|connect|ECONNREFUSED|closed/i.test(message)) throw error;
        await sleep(50);
      }
    }
    const end = performance.now();
    const clientCpu = process.cpuUsage(clientCpuBefore);
    const serverCpuMs = ((await redisCpuSeconds(admin)) - serverCpuBefore) * 1_000;
    polling = false;
    await poller;
    log(`${name}: repaired in ${((end - start) / 1_000).toFixed(2)} s`);

    const firstAt = (pattern: RegExp, from = 0): number | undefined =>
      seen.slice(from).find((s) => pattern.test(s.text))?.at;
    // The last attempt's steps (an attempt that started over shows "starts over" in its texts).
    const lastRead = seen.map((s) => /sealing and reading/.test(s.text)).lastIndexOf(true);
    const from = Math.max(0, lastRead);
    const readAt = lastRead >= 0 ? seen[lastRead]!.at : undefined;
    const raiseAt = firstAt(/copying the floor/, from);
    const copied = /copying the floor, (\d+) active/.exec(
      seen.find((s) => /copying the floor/.test(s.text))?.text ?? '',
    );
    const attempts = Math.max(1, ...seen.map((s) => Number(/repair attempt (\d+)/.exec(s.text)?.[1] ?? 1)));

    const voting = (await coordinator.nodeStatus())[2]?.voting ?? false;
    // Compare registers spread over all of them: the target's value (or its floor) ≥ the sources' (or floor).
    const targetFloor = (await target.get(`${PREFIX}:node:floor`)) ?? '0';
    const step = Math.max(1, Math.floor(resources / CHECKED_REGISTERS));
    const indexes = Array.from({ length: Math.min(resources, CHECKED_REGISTERS) }, (_, k) => k * step);
    const keys = indexes.map(tokenKey);
    const [t, a, b] = await Promise.all([target.mget(keys), source0.mget(keys), source1.mget(keys)]);
    let lower = 0;
    for (let k = 0; k < keys.length; k++) {
      const value = BigInt(t[k] ?? targetFloor);
      const expected = [a[k] ?? sourceFloors[0]!, b[k] ?? sourceFloors[1]!].map(BigInt);
      if (expected.some((e) => value < e)) lower++;
    }
    // A grant with node 0 paused: its majority is nodes 1 and 2, so the token shows what the repaired node knows
    // together with one source (the protocol's promise: every majority meets every earlier grant's).
    redis.nodes[0]!.pause();
    let nextTokenAboveHistory: boolean;
    try {
      const lease = await coordinator.acquire(`r:${resources - 1}`, { ttlMs: maxTtlMs });
      nextTokenAboveHistory = lease.token > base + BigInt(resources - 1);
      await lease.release().catch(() => undefined); // node 0 confirms it later, or the lease expires
    } finally {
      redis.nodes[0]!.resume();
    }
    const [targetKeys] = await keyCounts([target]);
    const [targetUsedMemory] = await usedMemory([target]);
    return {
      case: name,
      resources,
      writeMs,
      ...(foldMs === undefined ? {} : { foldMs }),
      sourceKeys,
      sourceUsedMemory,
      sourceFloors,
      repair: {
        totalMs: end - start,
        ...(readAt === undefined ? {} : { claimMs: readAt - start }),
        ...(readAt === undefined || raiseAt === undefined ? {} : { readMs: raiseAt - readAt }),
        ...(raiseAt === undefined ? {} : { raiseMs: end - raiseAt }),
        ...(copied === null ? {} : { registersCopied: Number(copied[1]) }),
        attempts,
        clientCpuMs: (clientCpu.user + clientCpu.system) / 1_000,
        serverCpuMs,
      },
      after: {
        voting,
        targetKeys: targetKeys!,
        targetUsedMemory: targetUsedMemory!,
        targetFloor,
        checked: keys.length,
        lower,
        nextTokenAboveHistory,
      },
      nodeErrors,
    };
  } finally {
    await coordinator.close().catch(() => undefined);
    for (const client of admin) client.disconnect();
    await redis.stop();
  }
}

function seconds(ms: number | undefined): string {
  return ms === undefined ? '–' : `${(ms / 1_000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

export function renderRepair(results: RepairResults): string {
  const m = results.machine;
  const rows = results.cases.map((c) => [
    c.case === 'registers' ? 'live registers' : 'folded into the floor',
    c.resources.toLocaleString('en-US'),
    c.sourceKeys.map((k) => k.toLocaleString('en-US')).join(' / '),
    c.repair.registersCopied === undefined ? '–' : c.repair.registersCopied.toLocaleString('en-US'),
    seconds(c.repair.claimMs),
    seconds(c.repair.readMs),
    seconds(c.repair.raiseMs),
    `**${seconds(c.repair.totalMs)}**`,
    `${seconds(c.repair.clientCpuMs)} / ${seconds(c.repair.serverCpuMs)}`,
    c.after.targetKeys.toLocaleString('en-US'),
    `${c.after.voting ? 'votes' : '**not voting**'}; ${c.after.lower === 0 ? `${c.after.checked.toLocaleString('en-US')} checked, none lower` : `**${c.after.lower} lower**`}; next token ${c.after.nextTokenAboveHistory ? 'above' : '**not above**'} the history`,
  ]);
  const header = [
    'history',
    'resources',
    'keys on the 2 sources',
    'registers copied',
    'claim',
    'seal + read',
    'raise + finish',
    'total',
    'CPU: coordinator / servers',
    'keys on the repaired node',
    'after',
  ];
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  return [
    `Measured ${results.startedAt.slice(0, 16).replace('T', ' ')} UTC in ${results.durationSeconds.toFixed(0)} s with \`${results.command}\`: 3 redis-server ${results.redisServer} nodes (appendonly yes, appendfsync always, noeviction), maxTtlMs ${results.maxTtlMs} ms, commit ${results.revision.commit.slice(0, 7)}${results.revision.modifiedPackageFiles.length > 0 ? ' plus uncommitted changes under packages/' : ''}; ${m.cores} cores (${m.cpuModel}), load average ${m.loadAverageAtStart.toFixed(2)} at start and ${m.loadAverageAtEnd.toFixed(2)} at the end, fdatasync p50 ${m.fsync.p50Ms.toFixed(2)} ms.`,
    '',
    line(header),
    line(header.map(() => '---')),
    ...rows.map(line),
    '',
    `The history was written in ${results.cases.map((c) => `${seconds(c.writeMs)} (${c.case})`).join(', ')}${results.cases.some((c) => c.foldMs !== undefined) ? `; the fold passes took ${seconds(results.cases.find((c) => c.foldMs !== undefined)!.foldMs)} from the writes to no register left` : ''}.`,
  ].join('\n');
}

async function main(): Promise<number> {
  let options: ReturnType<typeof parseOptions>;
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}\n`);
    return 2;
  }
  if (options === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const startedAt = new Date();
  const machine = machineInfo();
  const fsync = await probeFsync(100);
  log(
    `repair timing: ${options.resources.toLocaleString('en-US')} resources, cases ${options.cases.join(', ')}, maxTtlMs ${options.maxTtlMs}; load ${machine.loadAverageAtStart.toFixed(2)}`,
  );
  const cases: RepairCase[] = [];
  for (const name of options.cases) cases.push(await runCase(name, options.resources, options.maxTtlMs));
  const finishedAt = new Date();
  const results: RepairResults = {
    schemaVersion: 1,
    kind: 'repair',
    command: options.command,
    revision: sourceRevision(ROOT),
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    durationSeconds: (finishedAt.getTime() - startedAt.getTime()) / 1_000,
    machine: { ...machine, loadAverageAtEnd: os.loadavg()[0]!, fsync },
    node: process.version,
    redisServer:
      /v=(\S+)/.exec(spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout ?? '')?.[1] ??
      'unknown',
    nodes: 3,
    maxTtlMs: options.maxTtlMs,
    cases,
  };
  const outFile = path.resolve(ROOT, options.out);
  await fs.mkdir(path.dirname(outFile), { recursive: true });
  const config = (await prettier.resolveConfig(outFile)) ?? {};
  await fs.writeFile(
    outFile,
    await prettier.format(JSON.stringify(results, null, 2), { ...config, filepath: outFile }),
  );
  const markdown = renderRepair(results);
  process.stdout.write(`${markdown}\n`);
  if (options.writeDocs) {
    const doc = await docHolding(ROOT, 'repair');
    if ((await fs.readFile(doc, 'utf8')).includes(docMarkers('repair').start)) {
      await writeDocTables(doc, markdown, 'repair');
      const docConfig = (await prettier.resolveConfig(doc)) ?? {};
      await fs.writeFile(
        doc,
        await prettier.format(await fs.readFile(doc, 'utf8'), { ...docConfig, filepath: doc }),
      );
    }
  }
  log(
    `wrote ${path.relative(ROOT, outFile)}${options.writeDocs ? ` and the "repair" section of the docs` : ''}`,
  );
  const broken = cases.filter((c) => !c.after.voting || c.after.lower > 0 || !c.after.nextTokenAboveHistory);
  if (broken.length > 0) {
    log(`FAILED: the repair left ${broken.map((c) => c.case).join(', ')} wrong (see "after" in the results)`);
    return 1;
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `\nrepair timing failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  },
);
