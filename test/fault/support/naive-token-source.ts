import type { Redis } from 'ioredis';

/**
 * The token scheme DESIGN §3 warns against, for negative controls: INCR a counter on every node, decide at a
 * majority of replies, and take the largest. Independent counters drift apart when nodes miss increments
 * (partitions, kills, restarts without data), and nodes that missed some can form the next majority, so the
 * token goes backwards. The coordinator's quorum max-register must not.
 */
export class NaiveTokenSource {
  constructor(
    private readonly clients: readonly Redis[],
    private readonly timeoutMs = 400,
  ) {}

  key(resource: string): string {
    return `naive:{${resource}}:counter`;
  }

  /** Resolves at a majority of replies with their maximum; rejects once a majority is out of reach. */
  next(resource: string): Promise<bigint> {
    const quorum = Math.floor(this.clients.length / 2) + 1;
    const key = this.key(resource);
    return new Promise((resolve, reject) => {
      const values: bigint[] = [];
      let failed = 0;
      let decided = false;
      for (const client of this.clients) {
        const timer = new Promise<never>((_, timeout) =>
          setTimeout(() => timeout(new Error('naive INCR timed out')), this.timeoutMs).unref(),
        );
        Promise.race([client.incr(key), timer]).then(
          (value) => {
            if (decided) return;
            values.push(BigInt(value));
            if (values.length >= quorum) {
              decided = true;
              resolve(values.reduce((a, b) => (a > b ? a : b)));
            }
          },
          () => {
            if (decided) return;
            failed++;
            if (failed > this.clients.length - quorum) {
              decided = true;
              reject(new Error(`naive token: only ${values.length} of ${quorum} INCR replies`));
            }
          },
        );
      }
    });
  }
}

/**
 * What a client that parses a token as a JSON number does to it: above 2^53 neighbouring tokens become the
 * same double, so two grants end up with one token (F16's negative control).
 */
export function throughDoubles(token: bigint): bigint {
  return BigInt(Number(token));
}

/**
 * A plain Redlock acquire with a naive token, for negative controls: on every node `SET lease NX PX ttl` and
 * `INCR` the naive counter in one MULTI, granted at a majority of OKs, token = the largest INCR among them.
 * No validity check: however long the replies took, the caller is told it holds the lock.
 */
export async function naiveLock(
  clients: readonly Redis[],
  resource: string,
  ttlMs: number,
): Promise<{ token: bigint; value: string } | null> {
  const value = `naive-${Math.random().toString(36).slice(2)}`;
  const quorum = Math.floor(clients.length / 2) + 1;
  const replies = await Promise.allSettled(
    clients.map((c) =>
      c
        .multi()
        .set(`naive:{${resource}}:lock`, value, 'PX', ttlMs, 'NX')
        .incr(`naive:{${resource}}:counter`)
        .exec(),
    ),
  );
  const tokens: bigint[] = [];
  for (const reply of replies) {
    if (reply.status !== 'fulfilled' || reply.value === null) continue;
    const [set, incr] = reply.value;
    if (set?.[1] === 'OK' && incr?.[0] === null) tokens.push(BigInt(incr[1] as number));
  }
  if (tokens.length < quorum) return null;
  return { token: tokens.reduce((a, b) => (a > b ? a : b)), value };
}
