import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Coordinator, type CoordinatorOptions } from '@fenced/coordinator';
import { createApp } from '../../packages/coordinator/src/http/app.js';
import type { GrantedLease, LeaseService } from '../../packages/coordinator/src/http/lease-service.js';
import type { BenchPlan } from '../bench-plan.js';
import { interleave, runWorkers, type RunState } from '../runner.js';
import { median, range, summarizeLatencies } from '../statistics.js';

export interface HttpCell {
  /** Median over the runs of granted-and-released leases per second (POST …/leases then DELETE). */
  medianPerSecond: number;
  min: number;
  max: number;
  runs: number[];
  /** Median over the runs of the POST (grant) p50 and p99, in ms. */
  grantP50Ms: number;
  grantP99Ms: number;
  errors: number;
}

export interface HttpResult {
  unit: 'lease grants per second (each lease also released)';
  client: string;
  /** concurrency → the real service, and the same app over a stub coordinator that answers at once */
  byConcurrency: Record<string, { fenced: HttpCell; stub: HttpCell }>;
}

/**
 * Grants and releases at once, without Redis: the same app over it measures what the HTTP stack (node:http,
 * express, validation, logging, metrics, and the client in the same process) costs by itself.
 */
class StubLeaseService extends EventEmitter implements LeaseService {
  readonly quorum = 3;
  readonly nodeCount = 5;
  private next = 0n;

  acquire(resource: string, options: { ttlMs: number }): Promise<GrantedLease>;
  acquire(resources: readonly string[], options: { ttlMs: number }): Promise<never>;
  acquire(resource: string | readonly string[], options: { ttlMs: number }): Promise<GrantedLease> {
    if (typeof resource !== 'string') return Promise.reject(new Error('the stub grants one resource'));
    this.next++;
    return Promise.resolve({
      resource,
      id: randomBytes(16).toString('base64url'),
      token: this.next,
      ttlMs: options.ttlMs,
      validityMs: options.ttlMs,
      expiresAt: new Date(Date.now() + options.ttlMs),
    });
  }

  extend(): Promise<never> {
    return Promise.reject(new Error('the stub does not extend'));
  }

  release(): Promise<void> {
    return Promise.resolve();
  }

  inspect(): Promise<{ held: boolean }> {
    return Promise.resolve({ held: false });
  }

  nodeStatus(): Promise<[]> {
    return Promise.resolve([]);
  }
}

interface Reply {
  status: number;
  body: string;
}

/**
 * Scenario 6: lease grants per second through the HTTP service. `createApp` with a real Coordinator listens on
 * an ephemeral loopback port in this process; a keep-alive `http.Agent` (one socket per worker) sends
 * `POST /v1/locks/{resource}/leases` and then `DELETE /v1/locks/{resource}/leases/{leaseId}`. The same app over
 * a stub coordinator, interleaved with it, shows the ceiling of the HTTP stack alone.
 */
export async function runHttp(
  coordinatorOptions: CoordinatorOptions,
  plan: BenchPlan['http'],
  state: RunState,
): Promise<HttpResult> {
  const coordinator = new Coordinator(coordinatorOptions);
  coordinator.on('nodeError', () => undefined);
  await coordinator.ready();
  const shutdown = new AbortController();
  const subjects = [
    { name: 'fenced', service: coordinator as LeaseService },
    { name: 'stub', service: new StubLeaseService() as LeaseService },
  ].map((subject) => {
    const app = createApp({ coordinator: subject.service, shutdownSignal: shutdown.signal });
    const server = app.server;
    server.keepAliveTimeout = 60_000;
    return { ...subject, app, server, port: 0 };
  });
  for (const subject of subjects) {
    await subject.app.ready();
    await new Promise<void>((resolve) => subject.server.listen(0, '127.0.0.1', resolve));
    subject.port = (subject.server.address() as AddressInfo).port;
  }
  const agent = new http.Agent({ keepAlive: true, maxSockets: Math.max(...plan.concurrencies) });
  try {
    const byConcurrency: HttpResult['byConcurrency'] = {};
    for (const concurrency of plan.concurrencies) {
      const measure = async (subject: (typeof subjects)[number], tag: string, durationMs: number) => {
        state.progress.update(`http c=${concurrency} ${subject.name} ${tag}`);
        const grants: number[] = [];
        const port = subject.port;
        const run = await runWorkers({
          concurrency,
          durationMs,
          onError: (error) => state.failures.record('http', subject.name, error),
          op: async (worker, i) => {
            const resource = encodeURIComponent(`http:${tag}:${worker}:${i % 100}`);
            const t0 = performance.now();
            const granted = await send(agent, port, 'POST', `/v1/locks/${resource}/leases`, {
              ttlMs: plan.ttlMs,
            });
            grants.push(performance.now() - t0);
            if (granted.status !== 201) throw new Error(`POST answered ${granted.status}: ${granted.body}`);
            const { leaseId } = JSON.parse(granted.body) as { leaseId: string };
            const released = await send(agent, port, 'DELETE', `/v1/locks/${resource}/leases/${leaseId}`);
            if (released.status !== 204)
              throw new Error(`DELETE answered ${released.status}: ${released.body}`);
          },
        });
        const summary = summarizeLatencies(grants);
        return {
          perSecond: run.ops / (run.elapsedMs / 1_000),
          errors: run.errors,
          p50: summary.p50,
          p99: summary.p99,
        };
      };
      for (const subject of subjects) await measure(subject, `c${concurrency}-warmup`, plan.warmupMs);
      const results = await interleave(subjects, state.runs, (subject, run) =>
        measure(subject, `c${concurrency}-r${run}`, plan.durationMs),
      );
      const cell = (name: string): HttpCell => {
        const runs = results.get(name)!;
        const perSecond = runs.map((r) => r.perSecond);
        return {
          medianPerSecond: median(perSecond),
          ...range(perSecond),
          runs: perSecond,
          grantP50Ms: median(runs.map((r) => r.p50)),
          grantP99Ms: median(runs.map((r) => r.p99)),
          errors: runs.reduce((a, r) => a + r.errors, 0),
        };
      };
      byConcurrency[String(concurrency)] = { fenced: cell('fenced'), stub: cell('stub') };
      state.progress.log(
        `http c=${concurrency}: ${Math.round(byConcurrency[String(concurrency)]!.fenced.medianPerSecond)} grants/s (stub coordinator: ${Math.round(byConcurrency[String(concurrency)]!.stub.medianPerSecond)}/s)`,
      );
    }
    return {
      unit: 'lease grants per second (each lease also released)',
      client: 'node:http Agent { keepAlive: true }, in the same process as the service',
      byConcurrency,
    };
  } finally {
    agent.destroy();
    shutdown.abort();
    for (const { server } of subjects) {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
    await coordinator.close();
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
