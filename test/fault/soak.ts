// The soak: seeded random fault schedules, one after another, for as long as asked.
//
//   npm run soak -- --minutes 30              seeds from a random start, runs of 60 s, for 30 minutes
//   npm run soak -- --duration 90m            the same, for 90 minutes (--duration takes 45s, 90m, 2h)
//   npm run soak -- --seed 42 --minutes 10    seeds 42, 43, ... for 10 minutes
//   npm run soak -- --seed 42                 replays the schedule of seed 42 once
//   options: --run-seconds N (length of one schedule, default 60), --clients N (default 4)
//   npm run soak -- --simulation --minutes 10 the protocol simulation (no servers) instead, for 10 minutes
//
// The nemesis (test/fixtures/fault/random-schedule.ts, extended): node pauses, kills, empty restarts and FLUSHALLs
// (repaired by the sealed repair, no wait), node clock jumps (each node runs under its own clock shim), client
// partitions, delays, holds and database resets; half the clients wait up to 2 s for a node and the others 400 ms;
// idle registers are folded into the floor every few seconds. After every run the soak prints its own RSS and
// heap and each node's INFO memory (used_memory), so a leak shows as a trend.
//
// Each run's token registers start far above every client's time floor (runRandomSchedule seeds them), so the
// token checker sees what the quorum registers alone guarantee. Every run is judged by every checker; a failing run prints its seed (to replay it), its violations and its
// schedule, writes its history to .tmp/fault-histories/, and the soak exits 1.
//
// The soak searches for new failures; `npm run mutants` (scripts/mutants.ts) is its companion that proves the
// known ones stay caught: each protocol bug of the mutation table (test/mutants/) applied in turn, only its
// killing tests run, killed/survived reported (docs/mutation-testing.md).
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { ClockShim } from '@fenced/test-utils/clock-shim';
import { FaultWorld } from '../fixtures/fault/fault-world.js';
import {
  describeStep,
  runRandomSchedule,
  type RandomRunProgress,
} from '../fixtures/fault/random-schedule.js';
import { dumpHistory } from '../fixtures/fault/verdict.js';

const { values } = parseArgs({
  options: {
    seed: { type: 'string' },
    minutes: { type: 'string' },
    duration: { type: 'string' },
    'run-seconds': { type: 'string', default: '60' },
    clients: { type: 'string', default: '4' },
    simulation: { type: 'boolean', default: false },
  },
});

function positive(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) {
    console.error(`--${name} must be a positive number, got ${text}`);
    process.exit(2);
  }
  return value;
}

/** `--duration`: `45s`, `90m`, `2h` (or a bare number of minutes), in minutes. */
function durationMinutes(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const match = /^([0-9]+(?:\.[0-9]+)?)(s|m|h)?$/.exec(text.trim());
  if (match === null || Number(match[1]) <= 0) {
    console.error(`--duration must be a positive number with s, m or h (e.g. 90m, 1h), got ${text}`);
    process.exit(2);
  }
  const value = Number(match[1]);
  return match[2] === 's' ? value / 60 : match[2] === 'h' ? value * 60 : value;
}

const minutes = durationMinutes(values.duration) ?? positive('minutes', values.minutes);
const runMs = positive('run-seconds', values['run-seconds'])! * 1_000;
const clients = Math.round(positive('clients', values.clients)!);
const firstSeed = values.seed !== undefined ? Number(values.seed) : Math.floor(Math.random() * 2 ** 31);
if (!Number.isInteger(firstSeed)) {
  console.error(`--seed must be an integer, got ${values.seed}`);
  process.exit(2);
}
// With a seed and no duration: replay that one schedule.
const deadline = minutes === undefined ? undefined : performance.now() + minutes * 60_000;

if (values.simulation) {
  const { soakSimulation } = await import('./simulation-soak.js');
  process.exit(await soakSimulation({ firstSeed, minutes }));
}

const tty = process.stdout.isTTY;
function progressLine(seed: number, p: RandomRunProgress): void {
  const line =
    `seed ${seed}  ${(p.elapsedMs / 1000).toFixed(0).padStart(3)}s/${runMs / 1000}s  ` +
    `increments ok ${p.ok}  refused ${p.failed}  unknown ${p.unknown}  ` +
    `faults ${p.faultsApplied} (${p.activeFaults} active)`;
  if (tty) process.stdout.write(`\r${line}\u001b[K`);
  else if (Math.round(p.elapsedMs / 1000) % 10 === 0) console.log(line);
}

const nodeClocks = await Promise.all(Array.from({ length: 5 }, () => ClockShim.create()));
const world = await FaultWorld.start({ nodes: 5, nodeOptions: (i) => ({ env: nodeClocks[i]!.env }) });
let failed = 0;
let runs = 0;
const soakStarted = performance.now();

/** This process's memory and every node's used_memory, in MB: one line per run, to see a trend. */
async function memoryLine(): Promise<string> {
  const mb = (bytes: number): string => (bytes / 1_048_576).toFixed(1);
  // With `--expose-gc` (npm run soak passes it) a full collection runs first, so the samples show what is live
  // rather than where the collector happened to be.
  const collect = (globalThis as { gc?: () => void }).gc;
  collect?.();
  const usage = process.memoryUsage();
  const nodes = await Promise.all(
    world.urls.map(async (url) => {
      const client = new Redis(url, { maxRetriesPerRequest: 1 }).on('error', () => undefined);
      try {
        const info = await client.info('memory');
        const used = /used_memory:(\d+)/.exec(info)?.[1];
        return used === undefined ? '?' : mb(Number(used));
      } catch {
        return 'down';
      } finally {
        client.disconnect();
      }
    }),
  );
  const at = ((performance.now() - soakStarted) / 60_000).toFixed(1);
  return `memory at ${at} min${collect === undefined ? '' : ' (after a full GC)'}: rss ${mb(usage.rss)} MB, heap ${mb(usage.heapUsed)} MB; redis used_memory ${nodes.join(' / ')} MB`;
}

try {
  for (let seed = firstSeed; ; seed++) {
    let run: Awaited<ReturnType<typeof runRandomSchedule>>;
    try {
      run = await runRandomSchedule(world, {
        seed,
        durationMs: runMs,
        protection: 'protected',
        clients,
        onProgress: (p) => progressLine(seed, p),
        extended: { nodeClocks },
      });
    } catch (error) {
      // A run that cannot even start (no quorum could vote) is a failure too, with its seed; the soak goes on.
      failed++;
      runs++;
      console.log(`seed ${seed}: FAILED to run — ${error instanceof Error ? error.message : String(error)}`);
      console.log(`  replay with: npm run soak -- --seed ${seed}`);
      if (deadline === undefined || performance.now() > deadline) break;
      continue;
    }
    const { verdict, schedule, history, skippedLosses } = run;
    runs++;
    if (tty) process.stdout.write('\r\u001b[K');
    const counts = verdict.info
      .filter((i) => /increments ok|\d+ grants|holding intervals/.test(i))
      .join('; ');
    if (verdict.ok) {
      const kinds = new Map<string, number>();
      for (const { step } of schedule) kinds.set(step.kind, (kinds.get(step.kind) ?? 0) + 1);
      const faults = [...kinds].map(([kind, n]) => `${n} ${kind}`).join(', ');
      console.log(
        `seed ${seed}: ok — ${schedule.length} faults (${faults}; ${skippedLosses} state losses skipped while another node was unrepaired); ${counts}`,
      );
    } else {
      failed++;
      const file = await dumpHistory(history, `soak-seed-${seed}`);
      console.log(`seed ${seed}: FAILED — replay with: npm run soak -- --seed ${seed}`);
      for (const v of verdict.violations.slice(0, 20)) console.log(`  ${v}`);
      if (verdict.violations.length > 20) console.log(`  ... ${verdict.violations.length - 20} more`);
      console.log(`  schedule:\n${schedule.map((s) => `    ${describeStep(s)}`).join('\n')}`);
      console.log(`  history: ${file}`);
    }
    console.log(await memoryLine());
    if (deadline === undefined || performance.now() > deadline) break;
  }
} finally {
  await world.close();
  await Promise.allSettled(nodeClocks.map((c) => c.dispose()));
}
console.log(`${runs} runs, ${failed} failed (first seed ${firstSeed})`);
process.exit(failed > 0 ? 1 : 0);
