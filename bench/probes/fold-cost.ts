// What one fold pass (nodes/fold.ts) costs a Redis node that holds many leases, and how much of the node's time it
// takes, back to back and paced (issue 21, item 5: what grows with the resource count).
//   node --conditions=@fenced/source --import tsx bench/probes/fold-cost.ts [--resources 100000,1000000] [--retention-ms 40000]
// Starts one redis-server of its own (DESIGN §3 persistence: appendonly, fsync always; a free port, a temporary
// directory), records the node state an initialization leaves (incarnation key), and writes N held resources the
// way acquires leave them in the 'fenced' key layout: a lease key `<leaseId>|<token>` with a ttl, and a token
// register. Then, per N, two whole passes over that node with fold.lua, called as NodeConnection.fold calls it:
//   - back to back: each SCAN step as soon as the last one answered (how passes ran before they were paced);
//   - paced: `foldIdleRegisters` itself, with its pauses.
// For each: the steps, the pass's wall time, the node's CPU during it (INFO cpu, user + system), and that CPU as a
// share of the wall time (less what the idle node spends over as long, watched for 3 s before), beside the share a pass of each kind takes of a node when it starts every fold interval
// (half the retention). Nothing is idle (every resource is held), so nothing is folded: this is the scan itself,
// what every pass pays however much it finds. The server is stopped by its process id. Measures; never fails on a
// figure.
import { parseArgs } from 'node:util';
import { RedisNode } from '@fenced/test-utils/redis-node';
import { Redis } from 'ioredis';
import {
  FOLD_BATCH,
  FOLD_TIME_SHARE,
  foldIdleRegisters,
  foldIntervalMs,
  type FoldNode,
} from '../../packages/coordinator/src/nodes/fold.js';
import {
  nodeStateKeys,
  resourceKeys,
  tokenKeyPattern,
} from '../../packages/coordinator/src/keys/key-layout.js';
import { loadScriptSource } from '../../packages/coordinator/src/scripts/scripts.js';
import { positiveInteger } from '../suite/options.js';
import { redisCpuSeconds } from '../suite/environment.js';
import { scriptKeys } from '../../packages/coordinator/src/scripts/script-keys.js';

const PREFIX = 'fenced';
/** Long enough that no lease expires during a run. */
const TTL_MS = 3_600_000;
/** How long the idle node is watched before each level's passes, for the CPU it spends on its own. */
const IDLE_SAMPLE_MS = 3_000;
/** Keys written per pipeline while loading. */
const LOAD_CHUNK = 5_000;

const { values } = parseArgs({
  options: {
    resources: { type: 'string', default: '100000,1000000' },
    'retention-ms': { type: 'string', default: '40000' },
  },
});
const levels = values.resources
  .split(',')
  .map((n) => positiveInteger('--resources', n.trim(), 1, 10_000_000))
  .sort((a, b) => a - b);
const retentionMs = positiveInteger('--retention-ms', values['retention-ms'], 1_000, 2_147_483_647);
const intervalMs = foldIntervalMs(retentionMs);
const minIdleSeconds = Math.ceil(retentionMs / 1_000) + 1;

interface PassFigures {
  steps: number;
  wallMs: number;
  nodeCpuMs: number;
}
interface Row {
  resources: number;
  keys: number;
  backToBack: PassFigures;
  paced: PassFigures;
}

const node = await RedisNode.start({ persistence: 'fsync-always' });
const client = new Redis({ port: node.port, maxRetriesPerRequest: 0 });
const rows: Row[] = [];
try {
  const state = nodeStateKeys(PREFIX);
  await client.set(state.incarnation, 'fold-cost');
  const sha = (await client.script('LOAD', loadScriptSource('fold'))) as string;
  /** One SCAN step of a pass, with NodeConnection.fold's keys and arguments. */
  const foldNode: FoldNode = {
    index: 0,
    fold: async (_timeoutMs, cursor, count, minIdle, passIntervalMs) => {
      const reply = (await client.evalsha(
        sha,
        3,
        ...scriptKeys.fold(state),
        cursor,
        count,
        tokenKeyPattern(PREFIX),
        minIdle,
        passIntervalMs,
      )) as [number, string?, number?];
      if (reply[0] !== 1) throw new Error(`fold.lua answered ${JSON.stringify(reply)}`);
      return { kind: 'folded', cursor: reply[1]!, folded: reply[2]! };
    },
  };
  /** The node's CPU per millisecond with nothing sent to it (its timers, active expiry), over `ms`. */
  const idleCpuPerMs = async (ms: number): Promise<number> => {
    const before = await redisCpuSeconds([client]);
    await new Promise((resolve) => setTimeout(resolve, ms));
    return ((await redisCpuSeconds([client])) - before) / ms;
  };
  /** A pass's steps, wall time, and node CPU less what the idle node spends over as long. */
  const measure = async (pass: () => Promise<number>, idlePerMs: number): Promise<PassFigures> => {
    await client.del(state.fold); // each pass starts as the first of its interval
    const cpuBefore = await redisCpuSeconds([client]);
    const started = performance.now();
    const steps = await pass();
    const wallMs = performance.now() - started;
    const cpuMs = ((await redisCpuSeconds([client])) - cpuBefore - idlePerMs * wallMs) * 1_000;
    return { steps, wallMs, nodeCpuMs: Math.max(0, cpuMs) };
  };
  let written = 0;
  for (const resources of levels) {
    process.stderr.write(
      `fold-cost: writing ${(resources - written).toLocaleString('en-US')} held resources\n`,
    );
    for (; written < resources; written += LOAD_CHUNK) {
      const pipeline = client.pipeline();
      for (let i = written; i < Math.min(resources, written + LOAD_CHUNK); i++) {
        const keys = resourceKeys(PREFIX, `order:${i}`);
        const token = String(1_000_000 + i);
        pipeline.set(keys.record, `lease-id-of-22-chars-x|${token}`, 'PX', TTL_MS);
        pipeline.set(keys.token, token);
      }
      for (const [error] of (await pipeline.exec()) ?? []) if (error !== null) throw error;
    }
    written = resources;
    const keys = await client.dbsize();
    const idlePerMs = await idleCpuPerMs(IDLE_SAMPLE_MS);
    process.stderr.write(`fold-cost: ${resources.toLocaleString('en-US')} resources: a pass back to back\n`);
    const backToBack = await measure(async () => {
      let cursor = '0';
      let steps = 0;
      do {
        const reply = await foldNode.fold(1_000, cursor, FOLD_BATCH, minIdleSeconds, intervalMs);
        if (reply.kind !== 'folded') throw new Error(`fold step answered ${reply.kind}`);
        cursor = reply.cursor;
        steps++;
      } while (cursor !== '0');
      return steps;
    }, idlePerMs);
    process.stderr.write(`fold-cost: ${resources.toLocaleString('en-US')} resources: a paced pass\n`);
    const paced = await measure(async () => {
      let steps = 0;
      const closing = new AbortController();
      await foldIdleRegisters({
        nodes: [{ index: 0, fold: (...args) => (steps++, foldNode.fold(...args)) }],
        isVoting: () => true,
        tokenRetentionMs: retentionMs,
        callTimeoutMs: 1_000,
        signal: closing.signal,
        now: () => performance.now(),
        pause: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      });
      return steps;
    }, idlePerMs);
    rows.push({ resources, keys, backToBack, paced });
  }
} finally {
  client.disconnect();
  await node.stop();
}

const count = (n: number): string => Math.round(n).toLocaleString('en-US');
const seconds = (ms: number): string => (ms / 1_000).toFixed(2);
const percent = (share: number): string => `${(100 * share).toFixed(1)} %`;
/** The node's share when a pass of this kind starts every interval (the next one waits for the last to end). */
const shareEveryInterval = (pass: PassFigures): number => pass.nodeCpuMs / Math.max(intervalMs, pass.wallMs);
const lines = [
  `One fold pass over one fsync-always node holding N leases (2 keys each), SCAN steps of ${FOLD_BATCH} keys; ` +
    `retention ${retentionMs / 1_000} s, so a pass starts every ${intervalMs / 1_000} s. Node CPU is INFO cpu ` +
    `(user + system) over the pass, less the idle node's own over as long; "of the node" is that CPU over the pass's wall time, and "every interval" ` +
    `over the interval (or the pass, when it lasts longer). Paced: at most ${percent(FOLD_TIME_SHARE)} of the ` +
    'time in steps, as the pass sees them.',
  '',
  '| resources | keys | pass | steps | wall s | node CPU s | node CPU per key, µs | of the node during the pass | of the node, a pass every interval |',
  '| --- | --- | --- | --- | --- | --- | --- | --- | --- |',
];
for (const row of rows) {
  for (const [name, pass] of [
    ['back to back', row.backToBack],
    ['paced', row.paced],
  ] as const) {
    lines.push(
      `| ${count(row.resources)} | ${count(row.keys)} | ${name} | ${count(pass.steps)} | ${seconds(pass.wallMs)} | ` +
        `${seconds(pass.nodeCpuMs)} | ${((1_000 * pass.nodeCpuMs) / row.keys).toFixed(2)} | ` +
        `${percent(pass.nodeCpuMs / pass.wallMs)} | ${percent(shareEveryInterval(pass))} |`,
    );
  }
}
process.stdout.write(lines.join('\n') + '\n');
