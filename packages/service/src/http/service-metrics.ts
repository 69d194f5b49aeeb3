import { Counter, Gauge, Histogram, Registry } from 'prom-client';

const LATENCY_BUCKETS_S = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Why an acquire request ended without a lease. */
export type DenialReason =
  'locked' | 'quorum_unavailable' | 'client_disconnected' | 'shutting_down' | 'invalid_request' | 'internal';

/**
 * The service's Prometheus metrics, in a registry of their own (never prom-client's global one), so two
 * apps in one process never share or collide on counters.
 */
export class ServiceMetrics {
  readonly registry: Registry;
  readonly grants: Counter<never>;
  readonly denials: Counter<'reason'>;
  readonly grantsReleasedAfterDisconnect: Counter<never>;
  readonly acquiresInFlight: Gauge<never>;
  readonly quorumFailures: Counter<'operation'>;
  readonly extends: Counter<'outcome'>;
  readonly releases: Counter<'outcome'>;
  readonly nodeErrors: Counter<'node' | 'operation'>;
  readonly operationSeconds: Histogram<'operation' | 'outcome'>;
  readonly requestSeconds: Histogram<'method' | 'route' | 'status'>;

  constructor(registry = new Registry()) {
    this.registry = registry;
    const registers = [registry];
    this.grants = new Counter({
      name: 'fenced_lease_grants_total',
      help: 'Leases granted through the HTTP API.',
      registers,
    });
    this.denials = new Counter({
      name: 'fenced_lease_denials_total',
      help: 'Acquire requests that ended without a lease, by reason.',
      labelNames: ['reason'],
      registers,
    });
    this.grantsReleasedAfterDisconnect = new Counter({
      name: 'fenced_lease_grants_released_after_disconnect_total',
      help: 'Leases granted after the waiting client went away, and released at once.',
      registers,
    });
    this.acquiresInFlight = new Gauge({
      name: 'fenced_acquires_in_flight',
      help: 'Acquire requests being served right now, waiting ones included.',
      registers,
    });
    this.quorumFailures = new Counter({
      name: 'fenced_quorum_failures_total',
      help: 'Operations that failed because no majority of Redis nodes could decide.',
      labelNames: ['operation'],
      registers,
    });
    this.extends = new Counter({
      name: 'fenced_lease_extends_total',
      help: 'Extend requests by outcome (extended, lost, quorum_unavailable, invalid_request, internal).',
      labelNames: ['outcome'],
      registers,
    });
    this.releases = new Counter({
      name: 'fenced_lease_releases_total',
      help: 'Release requests by outcome (released, quorum_unavailable, invalid_request, internal).',
      labelNames: ['outcome'],
      registers,
    });
    this.nodeErrors = new Counter({
      name: 'fenced_node_errors_total',
      help: "Errors of single Redis nodes, from the coordinator's nodeError events.",
      labelNames: ['node', 'operation'],
      registers,
    });
    this.operationSeconds = new Histogram({
      name: 'fenced_operation_duration_seconds',
      help: 'Coordinator operations as served over HTTP (acquire includes its wait), by outcome.',
      labelNames: ['operation', 'outcome'],
      buckets: LATENCY_BUCKETS_S,
      registers,
    });
    this.requestSeconds = new Histogram({
      name: 'fenced_http_request_duration_seconds',
      help: 'HTTP requests by method, route pattern and status.',
      labelNames: ['method', 'route', 'status'],
      buckets: LATENCY_BUCKETS_S,
      registers,
    });
  }
}
