// The service's HTTP app over a coordinator that answers at once: `createApp` with every route, hook, body
// parser, validation, metric and log line of the real service (log level warn, as the bench runs the service),
// and no Redis. bench/probes/http-stack.ts sets it beside the canned node:http server and the real service to split the
// service's cost into the HTTP stack's and the coordinator's. Run as its own process: it listens on an ephemeral
// loopback port and sends `{ port }` over IPC; the parent going away ends it (a normal exit, so `--cpu-prof`
// writes its profile).
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { createApp, createServiceLogger, type LeaseService } from '@fenced/service';

/** A coordinator that grants every acquire at once (a fresh lease id, rising tokens) and releases anything. */
export function instantCoordinator(): LeaseService {
  let token = 0n;
  const service = {
    quorum: 3,
    nodeCount: 5,
    acquire: (resource: string, options: { ttlMs: number }) =>
      Promise.resolve({
        resource,
        id: randomBytes(16).toString('base64url'),
        token: ++token,
        ttlMs: options.ttlMs,
        validityMs: options.ttlMs - 2,
        expiresAt: new Date(Date.now() + options.ttlMs),
      }),
    extend: () => Promise.reject(new Error('not served by the stub')),
    release: () => Promise.resolve(),
    inspect: () => Promise.resolve({ held: false }),
    nodeStatus: () => Promise.resolve([]),
  };
  return Object.assign(new EventEmitter(), service) as unknown as LeaseService;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const app = createApp({
    coordinator: instantCoordinator(),
    logger: createServiceLogger({ level: 'warn' }),
    maxTtlMs: 40_000,
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  process.send?.({ port: (app.server.address() as AddressInfo).port });
  process.on('disconnect', () => process.exit(0));
}
