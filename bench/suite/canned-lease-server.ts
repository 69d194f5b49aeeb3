// The yardstick of scenario 6: a raw `node:http` server that answers the two lease routes the load generator
// calls with canned replies of the real service's shape, and nothing else (no Redis, no framework, no
// validation beyond parsing the JSON body, no logging, no metrics). Run as its own process by the scenario
// (bench/suite/scenarios/http.ts): it listens on an ephemeral loopback port and sends `{ port }` over IPC.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';

const LEASES = /^\/v1\/locks\/([^/]+)\/leases$/;
const LEASE = /^\/v1\/locks\/([^/]+)\/leases\/([^/]+)$/;

/** A server answering `POST /v1/locks/:resource/leases` (201 + lease JSON) and `DELETE …/leases/:id` (204). */
export function createCannedLeaseServer(): http.Server {
  let token = 0n;
  const server = http.createServer((req, res) => {
    // The body is read in full before answering, as the real service does.
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = req.url ?? '';
      let match: RegExpExecArray | null;
      if (req.method === 'POST' && (match = LEASES.exec(path)) !== null) {
        let ttlMs = 10_000;
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { ttlMs?: unknown };
          if (typeof body.ttlMs === 'number') ttlMs = body.ttlMs;
        } catch {
          res.writeHead(400).end();
          return;
        }
        token++;
        const reply = JSON.stringify({
          resource: decodeURIComponent(match[1]!),
          leaseId: randomBytes(16).toString('base64url'),
          token: token.toString(10),
          ttlMs,
          validityMs: ttlMs - 2,
          expiresAt: new Date(Date.now() + ttlMs).toISOString(),
        });
        res.writeHead(201, {
          'content-type': 'application/json; charset=utf-8',
          'content-length': Buffer.byteLength(reply),
        });
        res.end(reply);
      } else if (req.method === 'DELETE' && LEASE.test(path)) {
        res.writeHead(204).end();
      } else {
        res.writeHead(404).end();
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  return server;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const server = createCannedLeaseServer();
  server.listen(0, '127.0.0.1', () => {
    process.send?.({ port: (server.address() as AddressInfo).port });
  });
  // The parent going away (IPC closed) ends this process too: nothing is left listening.
  process.on('disconnect', () => process.exit(0));
}
