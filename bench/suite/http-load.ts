// The load generator of scenario 6, run as its own process (bench/suite/scenarios/http.ts forks it), so its CPU is
// not the service's. Each worker, on its own keep-alive connection, POSTs a lease and then DELETEs it, back to
// back, for a bounded time. The parent sends one `HttpLoadRequest` per measured run over IPC and gets an
// `HttpLoadResult` back.
import http from 'node:http';
import { pathToFileURL } from 'node:url';
import { describeError, runWorkers } from './runner.js';
import { summarizeLatencies } from './statistics.js';

export interface HttpLoadRequest {
  id: number;
  port: number;
  concurrency: number;
  durationMs: number;
  ttlMs: number;
  /** Prefix of the resource names, so runs never share resources. */
  tag: string;
}

export interface HttpLoadResult {
  id: number;
  /** POST + DELETE cycles that both answered as expected. */
  cycles: number;
  errors: number;
  /** Up to 5 distinct error messages. */
  errorMessages: string[];
  elapsedMs: number;
  postP50Ms: number;
  postP99Ms: number;
  /** CPU time this (load generator) process used during the run, µs. */
  cpuUs: number;
}

/** Distinct resources each worker cycles through. */
const RESOURCES_PER_WORKER = 100;

interface Reply {
  status: number;
  body: string;
}

/** One measured run against `127.0.0.1:port`; never throws for a failed request (it counts an error). */
export async function runHttpLoad(request: HttpLoadRequest): Promise<HttpLoadResult> {
  // One socket per worker: each worker has one request in flight, and the pool holds `concurrency` sockets.
  const agent = new http.Agent({ keepAlive: true, maxSockets: request.concurrency });
  const posts: number[] = [];
  const messages = new Set<string>();
  const cpuBefore = process.cpuUsage();
  try {
    const run = await runWorkers({
      concurrency: request.concurrency,
      durationMs: request.durationMs,
      onError: (error) => {
        if (messages.size < 5) messages.add(describeError(error));
      },
      op: async (worker, i) => {
        const resource = encodeURIComponent(`http:${request.tag}:${worker}:${i % RESOURCES_PER_WORKER}`);
        const t0 = performance.now();
        const granted = await send(agent, request.port, 'POST', `/v1/locks/${resource}/leases`, {
          ttlMs: request.ttlMs,
        });
        posts.push(performance.now() - t0);
        if (granted.status !== 201) throw new Error(`POST answered ${granted.status}: ${granted.body}`);
        const { leaseId } = JSON.parse(granted.body) as { leaseId: string };
        const released = await send(
          agent,
          request.port,
          'DELETE',
          `/v1/locks/${resource}/leases/${encodeURIComponent(leaseId)}`,
        );
        if (released.status !== 204) throw new Error(`DELETE answered ${released.status}: ${released.body}`);
      },
    });
    const cpu = process.cpuUsage(cpuBefore);
    const summary = summarizeLatencies(posts);
    return {
      id: request.id,
      cycles: run.ops,
      errors: run.errors,
      errorMessages: [...messages],
      elapsedMs: run.elapsedMs,
      postP50Ms: summary.p50,
      postP99Ms: summary.p99,
      cpuUs: cpu.user + cpu.system,
    };
  } finally {
    agent.destroy();
  }
}

function send(agent: http.Agent, port: number, method: string, path: string, json?: unknown): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const body = json === undefined ? undefined : JSON.stringify(json);
    const request = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent,
        headers:
          body === undefined
            ? {}
            : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
        response.on('error', reject);
      },
    );
    request.setTimeout(30_000, () =>
      request.destroy(new Error(`${method} ${path} got no answer within 30 s`)),
    );
    request.on('error', reject);
    request.end(body);
  });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  // One run at a time, as the parent asks; the parent going away (IPC closed) ends this process.
  process.on('message', (message: HttpLoadRequest) => {
    runHttpLoad(message).then(
      (result) => process.send?.(result),
      (error: unknown) =>
        process.send?.({
          id: message.id,
          cycles: 0,
          errors: 1,
          errorMessages: [describeError(error)],
          elapsedMs: 0,
          postP50Ms: Number.NaN,
          postP99Ms: Number.NaN,
          cpuUs: 0,
        } satisfies HttpLoadResult),
    );
  });
  process.on('disconnect', () => process.exit(0));
  process.send?.({ ready: true });
}
