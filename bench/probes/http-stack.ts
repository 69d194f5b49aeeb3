// The HTTP stack's share of the service's cost (issue 21, item 6):
//   node --conditions=@fenced/source --import tsx bench/probes/http-stack.ts [--concurrency 64] [--runs 4] [--duration-ms 3000] [--cpu-prof-dir DIR]
// Two servers, each its own process, under scenario 6's load generator (bench/suite/http-load.ts, its own process: one
// keep-alive connection and one request in flight per worker, POST a lease then DELETE it): the canned node:http
// server of scenario 6 (bench/suite/canned-lease-server.ts) and the service's own HTTP app over a coordinator that
// answers at once (bench/probes/stub-lease-app.ts: fastify, routes, hooks, validation, metrics, logging; no Redis). A
// warm-up of each, then runs interleaved (canned, app, app, canned …). Per server: cycles per second, and CPU per
// cycle of the server process (/proc/<pid>/stat) and of the load generator. The app's CPU per cycle over the
// canned server's is what fastify and the service's HTTP layer add; the real service's figure from scenario 6
// (`npm run bench -- --scenario http`) over the app's is what the coordinator adds (ioredis, batching, the lease
// protocol), beside the Redis nodes' own CPU per cycle that scenario 6 reports. With --cpu-prof-dir the app runs
// under `node --cpu-prof`. Measures; never fails on a figure.
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { HttpLoadRequest, HttpLoadResult } from '../suite/http-load.js';
import { median } from '../suite/statistics.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const NODE_FLAGS = ['--conditions=@fenced/source', '--import', 'tsx'];
const { values } = parseArgs({
  options: {
    concurrency: { type: 'string', default: '64' },
    runs: { type: 'string', default: '4' },
    'duration-ms': { type: 'string', default: '3000' },
    'cpu-prof-dir': { type: 'string' },
  },
});
const concurrency = Number(values.concurrency);
const runs = Number(values.runs);
const durationMs = Number(values['duration-ms']);
if (![concurrency, runs, durationMs].every((n) => Number.isInteger(n) && n >= 1)) {
  throw new Error(
    `--concurrency, --runs and --duration-ms must be positive integers, got ${values.concurrency}, ${values.runs} and ${values['duration-ms']}`,
  );
}

const children: ChildProcess[] = [];
/** Forks a script of the bench and waits for its first IPC message (bounded). */
async function start(
  script: string,
  extraFlags: string[] = [],
): Promise<{ child: ChildProcess; message: unknown }> {
  const child = fork(path.join(ROOT, script), [], {
    execArgv: [...NODE_FLAGS, ...extraFlags],
    stdio: 'inherit',
  });
  children.push(child);
  const message = await new Promise<unknown>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${script} did not start within 60 s`)), 60_000);
    child.once('message', (m) => {
      clearTimeout(timer);
      resolve(m);
    });
    child.once('exit', (code) => reject(new Error(`${script} exited (code ${code}) before it started`)));
  });
  return { child, message };
}

function cpuUs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

try {
  const canned = await start('bench/suite/canned-lease-server.ts');
  const profile =
    values['cpu-prof-dir'] === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${values['cpu-prof-dir']}`];
  const app = await start('bench/probes/stub-lease-app.ts', profile);
  const load = await start('bench/suite/http-load.ts');
  let next = 0;
  const run = (port: number, ms: number, tag: string): Promise<HttpLoadResult> =>
    new Promise((resolve) => {
      const id = ++next;
      const onMessage = (message: HttpLoadResult) => {
        if (message.id !== id) return;
        load.child.off('message', onMessage);
        resolve(message);
      };
      load.child.on('message', onMessage);
      load.child.send({
        id,
        port,
        concurrency,
        durationMs: ms,
        ttlMs: 10_000,
        tag,
      } satisfies HttpLoadRequest);
    });
  const servers = [
    { name: 'canned node:http', child: canned.child, port: (canned.message as { port: number }).port },
    { name: 'service app, stub coordinator', child: app.child, port: (app.message as { port: number }).port },
  ];
  for (const server of servers) await run(server.port, 1_000, `warmup-${server.name.length}`);
  const results = new Map<
    string,
    { perSecond: number[]; serverUs: number[]; loadUs: number[]; errors: number }
  >();
  for (let i = 0; i < runs; i++) {
    const order = i % 2 === 0 ? servers : [...servers].reverse();
    for (const server of order) {
      const before = cpuUs(server.child.pid!);
      const result = await run(server.port, durationMs, `r${i}-${server.name.length}`);
      const serverUs = cpuUs(server.child.pid!) - before;
      const entry = results.get(server.name) ?? { perSecond: [], serverUs: [], loadUs: [], errors: 0 };
      entry.perSecond.push(result.cycles / (result.elapsedMs / 1_000));
      entry.serverUs.push(serverUs / result.cycles);
      entry.loadUs.push(result.cpuUs / result.cycles);
      entry.errors += result.errors;
      results.set(server.name, entry);
    }
  }
  const load1 = readFileSync('/proc/loadavg', 'utf8').split(' ')[0];
  let output =
    `concurrency ${concurrency}, ${runs} interleaved runs of ${durationMs} ms, medians; load average ${load1} at the end\n\n` +
    '| server | cycles/s [min–max] | server CPU µs per cycle | load generator CPU µs per cycle | errors |\n| --- | --- | --- | --- | --- |\n';
  for (const [name, r] of results) {
    output += `| ${name} | ${Math.round(median(r.perSecond))} [${Math.round(Math.min(...r.perSecond))}–${Math.round(Math.max(...r.perSecond))}] | ${median(r.serverUs).toFixed(0)} | ${median(r.loadUs).toFixed(0)} | ${r.errors} |\n`;
  }
  const [a, b] = [...results.values()];
  output += `\napp ÷ canned: ${(median(b!.perSecond) / median(a!.perSecond)).toFixed(2)}× the cycles per second, ${(median(b!.serverUs) / median(a!.serverUs)).toFixed(2)}× the server CPU per cycle\n`;
  process.stdout.write(output);
} finally {
  // Our own children: a disconnect ends each one normally (the app then writes its profile).
  for (const child of children) if (child.connected) child.disconnect();
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) resolve();
          else {
            const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
            child.once('exit', () => {
              clearTimeout(timer);
              resolve();
            });
          }
        }),
    ),
  );
}
