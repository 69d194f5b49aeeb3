// The coordinator service as a process: `startServer` listens, `main` reads the environment and handles
// signals. The only module that touches ports, signals and `process.env`; it runs nothing on import (the
// `fenced-coordinator` command, `bin/fenced-coordinator.ts`, calls `main`).
import net, { type AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { checkExposure, loadConfig, type ServiceConfig } from './config.js';
import { ClusterSettingsError, Coordinator, parseNodeEntry, UnsafeNodeError } from '@fenced/coordinator';
import { createApp } from './http/app.js';
import { safeError } from './http/request-log.js';
import { createServiceLogger } from './http/service-logger.js';
import { logNodeStates } from './http/node-state-log.js';

/**
 * How long a connection idle when the drain begins may still send one last request (answered with
 * `Connection: close`) before it is closed.
 */
const DRAIN_IDLE_MS = 1_000;

/** A service started by {@link startServer}. */
export interface RunningServer {
  /** `http://host:port` the server listens on. */
  readonly url: string;
  /** The port it listens on (the one the system picked when the configuration asked for 0). */
  readonly port: number;
  /** The service's coordinator: closed by `close()`. */
  readonly coordinator: Coordinator;
  /**
   * Graceful shutdown: stop accepting connections, answer every request from now on with `Connection: close`,
   * end waiting acquires (503 with `Retry-After`), close connections that stay idle, let in-flight requests
   * finish within `shutdownGraceMs`, then drop what is left and close the coordinator's Redis connections.
   * Leases held by clients are not released: they belong to the clients, live in Redis, and stay valid until
   * their TTL (clients extend or release them through another instance).
   */
  close(): Promise<void>;
}

/** Options of {@link startServer}. */
export interface StartServerOptions {
  /** @defaultValue a {@link createServiceLogger} logger at `config.logLevel` */
  logger?: Logger;
  /**
   * Whether `/metrics` includes prom-client's process metrics (CPU, memory, event loop lag). Turn it off when
   * several services share a process.
   * @defaultValue true
   */
  collectProcessMetrics?: boolean;
}

/**
 * Starts the service described by `config`; resolves once it listens and a quorum of the Redis nodes passed
 * their checks (waiting up to `config.startupTimeoutMs`).
 * @throws the coordinator's error (naming every node's problem) when no quorum became ready in time.
 */
export async function startServer(
  config: ServiceConfig,
  options: StartServerOptions = {},
): Promise<RunningServer> {
  // A configuration built by hand gets the check loadConfig makes: no keys, no loopback, no FENCED_AUTH=off.
  checkExposure(config);
  const logger = options.logger ?? createServiceLogger({ level: config.logLevel });
  const coordinator = new Coordinator({
    nodes: config.redisUrls.map((entry, index) => parseNodeEntry(entry, index)),
    ...(config.maxTtlMs !== undefined ? { maxTtlMs: config.maxTtlMs } : {}),
    unsafeAllowUnsafeNodes: config.unsafeAllowUnsafeNodes,
    ...(config.keyPrefix !== undefined ? { keyPrefix: config.keyPrefix } : {}),
    ...(config.nodeTimeoutMs !== undefined ? { nodeTimeoutMs: config.nodeTimeoutMs } : {}),
    ...(config.clusterSettings !== undefined ? { clusterSettings: config.clusterSettings } : {}),
    ...(config.tokenRetentionMs !== undefined ? { tokenRetentionMs: config.tokenRetentionMs } : {}),
    ...(config.signingKey !== undefined ? { signingKey: config.signingKey } : {}),
  });
  // From the first probe on: the start-up view of the nodes is logged too, each change once.
  const stopNodeStateLog = logNodeStates(coordinator, logger);
  try {
    await untilReady(coordinator, config.startupTimeoutMs, logger);
  } catch (error) {
    await coordinator.close();
    throw error;
  }

  const registry = new Registry();
  if (options.collectProcessMetrics ?? true) collectDefaultMetrics({ register: registry });
  const shutdown = new AbortController();
  const app = createApp({
    coordinator,
    logger,
    registry,
    shutdownSignal: shutdown.signal,
    minTtlMs: config.minTtlMs,
    // Unset: the cluster's recorded maxTtlMs, which the coordinator adopted at start-up.
    maxTtlMs: config.maxTtlMs ?? coordinator.settings.maxTtlMs,
    maxWaitMs: config.maxWaitMs,
    bodyLimitBytes: config.bodyLimitBytes,
    apiKeys: config.apiKeys,
    healthAuth: config.healthAuth,
    accessLogLevel: config.accessLogLevel,
  });

  const server = app.server;
  // Slow clients: headers and the whole request (receiving it, not serving it: a waiting acquire is received at
  // once and then waits its waitMs, which maxWaitMs bounds) have their own bounds, checked every second or
  // sooner (Node checks every 30 s by default, which would let a 10 s bound hold a connection for 40 s).
  server.headersTimeout = config.headersTimeoutMs;
  server.requestTimeout = config.requestTimeoutMs;
  (server as typeof server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = Math.min(
    1_000,
    config.headersTimeoutMs,
  );
  server.keepAliveTimeout = config.keepAliveTimeoutMs;
  // Past the cap Node closes a new connection as soon as it is accepted.
  server.maxConnections = config.maxConnections;
  let lastDropWarning = -Infinity;
  server.on('drop', () => {
    if (performance.now() - lastDropWarning < 10_000) return;
    lastDropWarning = performance.now();
    logger.warn({ maxConnections: config.maxConnections }, 'connection cap reached: closing new connections');
  });
  try {
    await app.listen({ port: config.port, host: config.host });
  } catch (error) {
    await coordinator.close();
    throw error;
  }
  const { port } = server.address() as AddressInfo;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `http://${host}:${port}`;
  logger.info(
    {
      host: config.host,
      port,
      nodes: config.redisUrls.length,
      quorum: coordinator.quorum,
      auth:
        config.apiKeys.length > 0 ? 'api-keys' : config.authOff ? 'off (FENCED_AUTH=off)' : 'off (loopback)',
      healthAuth: config.healthAuth,
      // The key id only: the key itself is never logged.
      signing: config.signingKey !== undefined ? `key ${config.signingKey.id}` : 'off',
    },
    'fenced coordinator listening',
  );

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      logger.info({ graceMs: config.shutdownGraceMs }, 'shutting down');
      // From here on every response says `Connection: close` (the app's onSend hook reads this signal), so no
      // client sends another request on a connection that is about to close; waiting acquires end with 503.
      shutdown.abort(new Error('shutting down'));
      // Stop accepting connections, through net.Server's close: http.Server's (Node >= 19) would also close
      // every idle keep-alive connection at once, and a client may already have sent its next request on one
      // of them; that request would be answered with a reset. Busy connections close after their response.
      const drained = new Promise<void>((resolve) =>
        net.Server.prototype.close.call(server, () => resolve()),
      );
      // A connection still idle after DRAIN_IDLE_MS carried no request since the drain began: close it. This is
      // HTTP/1.1's unavoidable race (a client that picks exactly that moment sees a reset), kept to connections
      // idle for that long, as when a keep-alive timeout expires.
      const idle = setTimeout(
        () => server.closeIdleConnections(),
        Math.min(DRAIN_IDLE_MS, config.shutdownGraceMs),
      );
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), config.shutdownGraceMs);
      });
      if ((await Promise.race([drained, grace])) === 'timeout') {
        logger.warn('grace period over: closing the remaining connections');
        server.closeAllConnections();
        await drained;
      }
      clearTimeout(timer);
      clearTimeout(idle);
      // fastify's own close (its onClose hooks; the server is closed already).
      await app.close();
      stopNodeStateLog();
      await coordinator.close();
      logger.info('stopped');
    })();
    return closing;
  };

  return { url, port, coordinator, close };
}

/**
 * Waits for a quorum of voting nodes: nodes may still be starting, or another instance may be initializing
 * a fresh cluster at this moment. The coordinator re-probes non-voting nodes on its own; this asks again
 * until the deadline and then fails with its message, which names every node's problem (a node with unsafe
 * persistence settings never becomes ready, and the service refuses to run).
 */
async function untilReady(coordinator: Coordinator, timeoutMs: number, logger: Logger): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      await coordinator.ready();
      return;
    } catch (error) {
      // An unsafe node, or settings that differ from the cluster's, do not fix themselves: refuse at once.
      if (
        error instanceof UnsafeNodeError ||
        error instanceof ClusterSettingsError ||
        performance.now() + 500 > deadline
      )
        throw error;
      logger.warn({ err: safeError(error) }, 'waiting for a quorum of voting Redis nodes');
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

/**
 * The `fenced-coordinator` command: reads the configuration from `process.env` (exit code 2, naming the
 * variable, when it is invalid), starts the service (exit code 1 when it cannot), and shuts it down gracefully
 * on the first SIGTERM or SIGINT (at once on the second).
 */
export async function main(): Promise<void> {
  let config: ServiceConfig;
  try {
    config = loadConfig(process.env);
  } catch (error) {
    console.error(`fenced-coordinator: ${(error as Error).message}`);
    process.exitCode = 2;
    return;
  }
  const logger = createServiceLogger({ level: config.logLevel });
  let running: RunningServer | undefined;
  // The first SIGTERM/SIGINT drains gracefully; a second one exits at once. The handlers are in place before
  // start-up, so a signal that arrives while connecting to Redis still ends in an orderly close.
  let stopping = false;
  const shutdown = (server: RunningServer): void => {
    server.close().then(
      () => {
        process.exitCode = 0;
        // Everything is closed; should a stray handle keep the loop alive, do not hang the orchestrator.
        setTimeout(() => process.exit(), 5_000).unref();
      },
      (error: unknown) => {
        logger.error({ err: safeError(error) }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting without waiting');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'signal received');
    if (running) shutdown(running);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    running = await startServer(config, { logger });
  } catch (error) {
    logger.fatal({ err: safeError(error) }, 'could not start');
    process.exit(1);
  }
  if (stopping) shutdown(running);
}
