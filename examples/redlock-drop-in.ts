/**
 * A redlock v5 program. The only change for fenced is the import line: the rest is written against redlock's
 * API (constructor, settings, acquire/extend/release, using with an abort signal, its errors and `error` event).
 * Run: FENCED_REDIS_URLS=redis://…,redis://…,redis://… node --conditions=@fenced/source --import tsx \
 *      examples/redlock-drop-in.ts
 * (test/integration/redlock/multi.test.ts runs `runExample` against real nodes.)
 */
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
// was: import Redlock, { ExecutionError, ResourceLockedError } from 'redlock';
import Redlock, { ExecutionError, ResourceLockedError } from '@fenced/redlock';

export async function runExample(clients: Redis[]): Promise<{ balances: Record<string, number> }> {
  const redlock = new Redlock(clients, {
    driftFactor: 0.01,
    retryCount: 10,
    retryDelay: 200,
    retryJitter: 200,
    automaticExtensionThreshold: 500,
  });
  redlock.on('error', (error: Error) => {
    // A node that failed a call: logged, ignored while a majority agrees.
    if (error instanceof ResourceLockedError) return;
    console.error('redlock node error:', error.message);
  });

  const balances: Record<string, number> = { 'account:1': 100, 'account:2': 0 };
  // Stands in for reads and writes of another system.
  const read = (account: string): Promise<number> => Promise.resolve(balances[account]!);
  const write = (account: string, value: number): Promise<void> => {
    balances[account] = value;
    return Promise.resolve();
  };

  // acquire / extend / release
  let lock = await redlock.acquire(['account:1'], 5_000);
  try {
    balances['account:1']! -= 10;
    lock = await lock.extend(5_000);
    balances['account:2']! += 10;
  } finally {
    await lock.release();
  }

  // using: several resources, auto-extended, aborted when the lock is lost
  await redlock.using(['account:1', 'account:2'], 5_000, async (signal) => {
    const from = await read('account:1');
    const to = await read('account:2');
    // The lock could not be extended: exclusivity is gone, stop before writing.
    if (signal.aborted) throw signal.error ?? new Error('lock lost');
    await write('account:1', from - 5);
    await write('account:2', to + 5);
  });

  // a lock that cannot be had within its retry window
  const held = await redlock.acquire(['account:1'], 5_000);
  try {
    await redlock.acquire(['account:1'], 5_000, { retryCount: 1, retryDelay: 50 });
    throw new Error('unreachable: the resource is held');
  } catch (error) {
    if (!(error instanceof ExecutionError)) throw error;
  } finally {
    await redlock.release(held);
  }

  return { balances };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const urls = process.env.FENCED_REDIS_URLS?.split(',') ?? [];
  if (urls.length === 0) throw new Error('set FENCED_REDIS_URLS (comma-separated redis:// URLs)');
  const clients = urls.map((url) => new Redis(url));
  console.log(await runExample(clients));
  for (const client of clients) client.disconnect();
}
