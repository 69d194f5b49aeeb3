// Summarises a V8 .cpuprofile (what `node --cpu-prof` writes) as self time per area of the service: node
// internals, the HTTP framework, zod, pino, prom-client, ioredis, fenced's coordinator and its HTTP layer, GC.
// Areas are found from script URLs (node_modules/<package>/, packages/service/src/, node:…), never
// from function names of one framework, so the summary reads the same whichever HTTP stack the service runs on.

/** The parts of a `.cpuprofile` the summary reads (Chrome DevTools protocol `Profiler.Profile`). */
export interface CpuProfile {
  nodes: readonly {
    id: number;
    callFrame: { functionName: string; url: string };
    children?: readonly number[];
  }[];
  /** Microseconds, on the monotonic clock (the one `process.hrtime` reads). */
  startTime: number;
  endTime: number;
  /** The node id of each sample, in time order. */
  samples?: readonly number[];
  /** µs from the previous sample (the first: from `startTime`). */
  timeDeltas?: readonly number[];
}

/** The areas, in the order they are reported. */
export const PROFILE_AREAS = [
  'node internals',
  'http framework',
  'zod',
  'pino',
  'prom-client',
  'ioredis',
  'fenced http layer',
  'fenced coordinator',
  'fenced shared',
  'tsx loader',
  'other packages',
  'other code',
  'GC',
  'program (V8, not JS)',
  'idle',
] as const;
export type ProfileArea = (typeof PROFILE_AREAS)[number];

/** Packages of the HTTP stacks the service has run on (express today, fastify on the way), and their parts. */
const HTTP_FRAMEWORK_PACKAGES = new Set([
  'express',
  'router',
  'body-parser',
  'raw-body',
  'finalhandler',
  'send',
  'serve-static',
  'path-to-regexp',
  'type-is',
  'accepts',
  'content-type',
  'content-disposition',
  'cookie',
  'on-finished',
  'parseurl',
  'qs',
  'iconv-lite',
  'negotiator',
  'mime-types',
  'mime-db',
  'statuses',
  'http-errors',
  'depd',
  'vary',
  'etag',
  'fresh',
  'range-parser',
  'proxy-addr',
  'forwarded',
  'encodeurl',
  'escape-html',
  'debug',
  'ms',
  'media-typer',
  'setprototypeof',
  'fastify',
  'find-my-way',
  'light-my-request',
  'avvio',
  'fast-json-stringify',
  'fast-querystring',
  'fast-uri',
  'ajv',
  'secure-json-parse',
  'toad-cache',
  'rfdc',
  'safe-regex2',
  'ret',
  'abstract-logging',
  'process-warning',
]);
const PINO_PACKAGES = new Set([
  'pino',
  'pino-std-serializers',
  'sonic-boom',
  'thread-stream',
  'on-exit-leak-free',
  'fast-redact',
  'quick-format-unescaped',
  'atomic-sleep',
  'safe-stable-stringify',
  'real-require',
  'pino-http',
]);
const PROM_PACKAGES = new Set(['prom-client', 'tdigest', 'bintrees']);
const IOREDIS_PACKAGES = new Set([
  'ioredis',
  '@ioredis/commands',
  'redis-parser',
  'redis-errors',
  'denque',
  'cluster-key-slot',
  'standard-as-callback',
  'lodash.defaults',
  'lodash.isarguments',
]);

/** The package a script belongs to: the last `node_modules/<name>` (or `<@scope/name>`) of its URL. */
export function packageOf(url: string): string | undefined {
  const at = url.lastIndexOf('node_modules/');
  if (at < 0) return undefined;
  const parts = url.slice(at + 'node_modules/'.length).split('/');
  const first = parts[0] ?? '';
  if (first === '') return undefined;
  return first.startsWith('@') && parts[1] !== undefined ? `${first}/${parts[1]}` : first;
}

/** The area of one profile node, from its function name (V8's pseudo-frames) and its script's URL. */
export function areaOf(callFrame: { functionName: string; url: string }): ProfileArea {
  const { functionName, url } = callFrame;
  if (functionName === '(garbage collector)') return 'GC';
  if (functionName === '(idle)') return 'idle';
  if (functionName === '(program)' || functionName === '(root)') return 'program (V8, not JS)';
  // Native frames (no script) are node's and V8's built-ins: writev, JSON.parse, Promise machinery.
  if (url === '' || url.startsWith('node:') || /^(internal|_http_|_stream_|events|net|stream)\b/.test(url)) {
    return 'node internals';
  }
  const pkg = packageOf(url);
  if (pkg !== undefined) {
    if (HTTP_FRAMEWORK_PACKAGES.has(pkg) || pkg.startsWith('@fastify/')) return 'http framework';
    if (pkg === 'zod') return 'zod';
    if (PINO_PACKAGES.has(pkg)) return 'pino';
    if (PROM_PACKAGES.has(pkg)) return 'prom-client';
    if (IOREDIS_PACKAGES.has(pkg)) return 'ioredis';
    if (pkg === 'tsx' || pkg === 'esbuild' || pkg === 'get-tsconfig') return 'tsx loader';
    if (pkg === '@fenced/coordinator') return areaOfFenced(url) ?? 'fenced coordinator';
    if (pkg === '@fenced/service') return 'fenced http layer';
    if (pkg === '@fenced/shared') return 'fenced shared';
    return 'other packages';
  }
  return areaOfFenced(url) ?? 'other code';
}

function areaOfFenced(url: string): ProfileArea | undefined {
  if (/packages\/service\/(src|dist)\//.test(url)) return 'fenced http layer';
  if (/packages\/coordinator\/(src|dist)\//.test(url)) return 'fenced coordinator';
  if (/packages\/shared\/(src|dist)\//.test(url)) return 'fenced shared';
  return undefined;
}

/** A stretch of the profile to count, in the profile's clock (µs). */
export interface ProfileWindow {
  startUs: number;
  endUs: number;
}

export interface CpuProfileSummary {
  /** Sampled time inside the windows, µs, per area (idle included). */
  selfUs: Record<ProfileArea, number>;
  /**
   * The same time with node's own (node internals) attributed to the nearest caller outside node: the socket
   * writes ioredis asks for count as ioredis, the response writes of the framework as the framework. What node
   * does on no one's behalf (the event loop, the HTTP parser calling in) stays node internals.
   */
  onBehalfUs: Record<ProfileArea, number>;
  /** Sampled time inside the windows that was not idle, µs. */
  busyUs: number;
  /** Length of the windows that lie inside the profile, µs. */
  windowUs: number;
  samples: number;
  /** The most expensive functions (self time, idle and GC excluded), for the "where" in the report. */
  topFunctions: { area: ProfileArea; name: string; selfUs: number }[];
}

/**
 * Self time per area over the samples inside `windows` (the whole profile when none are given). A sample
 * stands for the time until the next one (the last: the profile's end), as DevTools counts it.
 */
export function summarizeCpuProfile(
  profile: CpuProfile,
  windows?: readonly ProfileWindow[],
  topCount = 12,
): CpuProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const areaById = new Map(profile.nodes.map((node) => [node.id, areaOf(node.callFrame)]));
  const parentById = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentById.set(child, node.id);
  const behalfById = new Map<number, ProfileArea>();
  const onBehalfOf = (id: number): ProfileArea => {
    const own = areaById.get(id) ?? 'other code';
    if (own !== 'node internals') return own;
    const known = behalfById.get(id);
    if (known !== undefined) return known;
    // The nearest ancestor in JavaScript outside node; bounded by the depth of the tree.
    let area: ProfileArea = 'node internals';
    for (let at = parentById.get(id), steps = 0; at !== undefined && steps < 10_000; steps++) {
      const candidate = areaById.get(at) ?? 'other code';
      if (candidate !== 'node internals' && candidate !== 'program (V8, not JS)') {
        area = candidate;
        break;
      }
      at = parentById.get(at);
    }
    behalfById.set(id, area);
    return area;
  };
  const zero = () =>
    Object.fromEntries(PROFILE_AREAS.map((area) => [area, 0])) as Record<ProfileArea, number>;
  const selfUs = zero();
  const onBehalfUs = zero();
  const byFunction = new Map<string, { area: ProfileArea; name: string; selfUs: number }>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  const inside = (t: number): boolean =>
    windows === undefined || windows.some((w) => t >= w.startUs && t < w.endUs);
  let time = profile.startTime;
  let counted = 0;
  for (let i = 0; i < samples.length; i++) {
    time += deltas[i] ?? 0;
    const next = i + 1 < samples.length ? time + (deltas[i + 1] ?? 0) : profile.endTime;
    const duration = Math.max(0, next - time);
    if (!inside(time)) continue;
    const id = samples[i]!;
    const area = areaById.get(id) ?? 'other code';
    selfUs[area] += duration;
    onBehalfUs[onBehalfOf(id)] += duration;
    counted++;
    if (area === 'idle' || area === 'GC' || area === 'program (V8, not JS)') continue;
    const frame = byId.get(id)?.callFrame;
    const name = `${frame?.functionName || '(anonymous)'} ${shortUrl(frame?.url ?? '')}`.trim();
    const entry = byFunction.get(name) ?? { area, name, selfUs: 0 };
    entry.selfUs += duration;
    byFunction.set(name, entry);
  }
  const windowUs =
    windows === undefined
      ? profile.endTime - profile.startTime
      : windows.reduce(
          (a, w) =>
            a + Math.max(0, Math.min(w.endUs, profile.endTime) - Math.max(w.startUs, profile.startTime)),
          0,
        );
  const total = PROFILE_AREAS.reduce((a, area) => a + selfUs[area], 0);
  return {
    selfUs,
    onBehalfUs,
    busyUs: total - selfUs.idle,
    windowUs,
    samples: counted,
    topFunctions: [...byFunction.values()].sort((a, b) => b.selfUs - a.selfUs).slice(0, topCount),
  };
}

/** The tail of a script URL that says where it is: after node_modules/, or from packages/. */
function shortUrl(url: string): string {
  const modules = url.lastIndexOf('node_modules/');
  if (modules >= 0) return url.slice(modules + 'node_modules/'.length);
  const packages = url.indexOf('packages/');
  if (packages >= 0) return url.slice(packages);
  return url.replace(/^file:\/\//, '');
}
