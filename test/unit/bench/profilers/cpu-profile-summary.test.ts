import { describe, expect, it } from 'vitest';
import {
  areaOf,
  packageOf,
  summarizeCpuProfile,
  type CpuProfile,
} from '../../../../bench/profilers/cpu-profile-summary.js';

const ROOT = 'file:///work/fenced';

/**
 * A tiny profile: root → express handle → ioredis write → native writeUtf8String, plus zod, the fenced HTTP
 * layer, GC and idle. Ten samples, 100 µs apart, starting at 1 000 µs.
 */
function tinyProfile(): CpuProfile {
  const frame = (functionName: string, url: string) => ({ functionName, url });
  return {
    nodes: [
      { id: 1, callFrame: frame('(root)', ''), children: [2, 7, 8, 9] },
      { id: 2, callFrame: frame('handle', `${ROOT}/node_modules/router/index.js`), children: [3, 5, 6] },
      {
        id: 3,
        callFrame: frame('sendCommand', `${ROOT}/node_modules/ioredis/built/Redis.js`),
        children: [4],
      },
      { id: 4, callFrame: frame('writeUtf8String', ''), children: [] },
      { id: 5, callFrame: frame('parse', `${ROOT}/node_modules/zod/v4/core/parse.js`), children: [] },
      {
        id: 6,
        callFrame: frame('sendLease', `${ROOT}/packages/service/src/http/lock-routes.ts`),
      },
      { id: 7, callFrame: frame('(garbage collector)', '') },
      { id: 8, callFrame: frame('(idle)', '') },
      { id: 9, callFrame: frame('processTicksAndRejections', 'node:internal/process/task_queues') },
    ],
    startTime: 1_000,
    endTime: 2_000,
    //         t = 1000 1100 1200 1300 1400 1500 1600 1700 1800 1900
    samples: [2, 4, 4, 5, 6, 7, 8, 8, 9, 3],
    timeDeltas: [0, 100, 100, 100, 100, 100, 100, 100, 100, 100],
  };
}

describe('areaOf', () => {
  it('groups by package and path, whatever the framework', () => {
    expect(areaOf({ functionName: 'x', url: `${ROOT}/node_modules/express/lib/response.js` })).toBe(
      'http framework',
    );
    expect(areaOf({ functionName: 'x', url: `${ROOT}/node_modules/fastify/lib/route.js` })).toBe(
      'http framework',
    );
    expect(areaOf({ functionName: 'x', url: `${ROOT}/node_modules/@fastify/ajv-compiler/index.js` })).toBe(
      'http framework',
    );
    expect(areaOf({ functionName: 'x', url: `${ROOT}/node_modules/pino/lib/proto.js` })).toBe('pino');
    expect(areaOf({ functionName: 'x', url: `${ROOT}/node_modules/prom-client/lib/counter.js` })).toBe(
      'prom-client',
    );
    expect(areaOf({ functionName: 'x', url: `${ROOT}/node_modules/redis-parser/lib/parser.js` })).toBe(
      'ioredis',
    );
    expect(areaOf({ functionName: 'x', url: `${ROOT}/packages/service/src/server.ts` })).toBe(
      'fenced http layer',
    );
    expect(areaOf({ functionName: 'x', url: `${ROOT}/packages/coordinator/src/quorum/quorum.ts` })).toBe(
      'fenced coordinator',
    );
    expect(areaOf({ functionName: 'x', url: `${ROOT}/packages/shared/src/token.ts` })).toBe('fenced shared');
    expect(areaOf({ functionName: 'emit', url: 'node:events' })).toBe('node internals');
    expect(areaOf({ functionName: 'x', url: `${ROOT}/node_modules/left-pad/index.js` })).toBe(
      'other packages',
    );
    expect(areaOf({ functionName: '(program)', url: '' })).toBe('program (V8, not JS)');
  });

  it('reads scoped and nested package names', () => {
    expect(packageOf(`${ROOT}/node_modules/@ioredis/commands/built/index.js`)).toBe('@ioredis/commands');
    expect(packageOf(`${ROOT}/node_modules/express/node_modules/qs/lib/parse.js`)).toBe('qs');
    expect(packageOf(`${ROOT}/packages/shared/src/token.ts`)).toBeUndefined();
  });
});

describe('summarizeCpuProfile', () => {
  it('counts each sample as the time to the next one, per area', () => {
    const summary = summarizeCpuProfile(tinyProfile());
    expect(summary.samples).toBe(10);
    expect(summary.selfUs['http framework']).toBe(100);
    expect(summary.selfUs['node internals']).toBe(300); // two writes and the task queue
    expect(summary.selfUs.zod).toBe(100);
    expect(summary.selfUs['fenced http layer']).toBe(100);
    expect(summary.selfUs.GC).toBe(100);
    expect(summary.selfUs.idle).toBe(200);
    expect(summary.selfUs.ioredis).toBe(100); // the last sample runs to endTime
    expect(summary.busyUs).toBe(800);
    expect(summary.windowUs).toBe(1_000);
  });

  it("credits node's own time to the nearest caller outside node", () => {
    const summary = summarizeCpuProfile(tinyProfile());
    // The two native writes under ioredis count as ioredis; the task queue, called by nobody, stays node's.
    expect(summary.onBehalfUs.ioredis).toBe(300);
    expect(summary.onBehalfUs['node internals']).toBe(100);
    expect(summary.onBehalfUs['http framework']).toBe(100);
  });

  it('counts only the samples inside the windows', () => {
    const summary = summarizeCpuProfile(tinyProfile(), [
      { startUs: 1_100, endUs: 1_300 },
      { startUs: 1_900, endUs: 5_000 },
    ]);
    expect(summary.samples).toBe(3);
    expect(summary.selfUs['node internals']).toBe(200);
    expect(summary.selfUs.ioredis).toBe(100);
    expect(summary.busyUs).toBe(300);
    // Only the part of the second window inside the profile counts.
    expect(summary.windowUs).toBe(300);
  });

  it('lists the most expensive functions without idle and GC', () => {
    const [first, ...rest] = summarizeCpuProfile(tinyProfile()).topFunctions;
    expect(first).toEqual({ area: 'node internals', name: 'writeUtf8String', selfUs: 200 });
    expect(rest.map((f) => f.area)).not.toContain('idle');
    expect(rest.map((f) => f.area)).not.toContain('GC');
  });

  it('summarises an empty profile as zeros', () => {
    const summary = summarizeCpuProfile({ nodes: [], startTime: 0, endTime: 0 });
    expect(summary.samples).toBe(0);
    expect(summary.busyUs).toBe(0);
  });
});
