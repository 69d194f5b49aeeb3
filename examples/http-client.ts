/**
 * A worker that takes its lease from the coordinator service and sends the token with its write.
 * Run: FENCED_COORDINATOR_URL=http://127.0.0.1:8080 FENCED_EXAMPLE_URL=http://127.0.0.1:8081 \
 *      node --conditions=@fenced/source --import tsx examples/http-client.ts
 */
import { CoordinatorClient } from '@fenced/coordinator/client';
import { FENCING_LEASE_ID_HEADER, FENCING_TOKEN_HEADER } from '@fenced/shared';

const coordinatorUrl = process.env.FENCED_COORDINATOR_URL ?? 'http://127.0.0.1:8080';
const serviceUrl = process.env.FENCED_EXAMPLE_URL ?? 'http://127.0.0.1:8081';
const client = new CoordinatorClient({ baseUrl: coordinatorUrl, apiKey: process.env.FENCED_API_KEY });

await client.using('document:readme', { ttlMs: 10_000, waitMs: 2_000 }, async (lease, signal) => {
  const response = await fetch(`${serviceUrl}/documents/readme`, {
    method: 'PUT',
    headers: {
      'content-type': 'application/json',
      [FENCING_TOKEN_HEADER]: lease.token.toString(),
      [FENCING_LEASE_ID_HEADER]: lease.id,
    },
    body: JSON.stringify({ content: `written under token ${lease.token}` }),
    signal,
  });
  // 409 STALE_TOKEN means a newer holder has written: this worker's lease was superseded.
  console.log(response.status, await response.text());
});
