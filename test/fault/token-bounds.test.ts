// F16: tokens near 2^53 (where doubles stop holding every integer) and near 2^63 − 1 (the end of 64 bits).
// Tokens are decimal strings on the wire and in Lua, bigint in TypeScript and Postgres: nothing may round them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenExhaustedError } from '@fenced/coordinator';
import { MAX_TOKEN } from '@fenced/shared';
import { ClockShim } from '@fenced/test-utils/clock-shim';
import { History } from '@fenced/test-utils/history';
import { holderIncrement, recordedIncrement } from '../fixtures/fault/counter-ops.js';
import { FaultWorld, leaseRef, tokenKey, unique } from '../fixtures/fault/fault-world.js';
import { throughDoubles } from '../fixtures/fault/naive-token-source.js';
import { judge, recordedRelease, type Verdict } from '../fixtures/fault/verdict.js';
import { WorkerProcess } from '../fixtures/fault/worker-process.js';

const TWO_53 = 2n ** 53n;

let world: FaultWorld;
let clock: ClockShim;

beforeAll(async () => {
  world = await FaultWorld.start();
  clock = await ClockShim.create();
});

afterAll(async () => {
  await world?.close();
  await clock?.dispose();
});

type Reading = 'bigint' | 'json-number';

/**
 * Near 2^53 the coordinator's own time floor (`Date.now() << 20`, about 2^60.7 today) would jump over the
 * interesting range, so the client is a worker process whose wall clock the clock shim sets back to April 1970,
 * ten minutes before `Date.now() << 20` reaches 2^53 (ten seconds ran out on a busy machine before the fifth grant,
 * and the time floor then overtook the registers). With the registers at 2^53 − 3, its five grants are
 * 2^53 − 2 ... 2^53 + 2, each followed by a guarded increment.
 */
async function acrossTwoTo53(reading: Reading): Promise<{ verdict: Verdict; tokens: bigint[] }> {
  const resource = unique('f16-53');
  await world.ensureCounter(resource);
  const raw = await world.connectedClients(world.urls);
  await Promise.all(raw.map((r) => r.set(tokenKey(resource), (TWO_53 - 3n).toString())));
  const history = new History();
  await clock.set(Number(2n ** 33n) - 600_000 - Date.now(), { clocks: 'realtime' });
  const worker = await WorkerProcess.start(
    'A',
    history,
    {
      redisUrls: world.urls,
      // Generous: a call timed out on a busy machine sends the next proposal higher, and tokens that skip values
      // would hide the collision the negative control must show.
      nodeTimeoutMs: 30_000,
      maxTtlMs: 3_000,
      databaseUrl: world.postgres.url,
      schema: world.schema.schema,
    },
    clock.env,
  );
  const tokens: bigint[] = [];
  try {
    for (let i = 0; i < 5; i++) {
      const lease = await worker.acquire(resource, {
        ttlMs: 2_000,
        waitMs: 5_000,
        ...(reading === 'json-number' ? { asRead: throughDoubles } : {}),
      });
      if (!lease) throw new Error('A did not get the lease');
      tokens.push(lease.token);
      await worker.increment(resource, { mode: 'guarded', opId: `A${i}-${resource}` });
      await worker.release();
    }
  } finally {
    await worker.stop();
    await clock.reset();
  }
  return { verdict: await judge(world, history, [resource]), tokens };
}

/** Registers at 2^63 − 4: three more grants fit, the fourth finds the tokens exhausted. */
async function upToTwoTo63(
  reading: Reading,
): Promise<{ verdict: Verdict; tokens: bigint[]; refused: number }> {
  const resource = unique('f16-63');
  await world.ensureCounter(resource);
  const raw = await world.connectedClients(world.urls);
  await Promise.all(raw.map((r) => r.set(tokenKey(resource), (MAX_TOKEN - 3n).toString())));
  const history = new History();
  const coordinator = world.coordinator();
  const tokens: bigint[] = [];
  let refused = 0;
  for (let i = 0; i < 4; i++) {
    const pending = history.invoke('A', 'acquire', resource);
    let lease;
    try {
      lease = await coordinator.acquire(resource, { ttlMs: 2_000 });
    } catch (error) {
      if (!(error instanceof TokenExhaustedError)) throw error;
      pending.fail({ error: error.message });
      refused++;
      continue;
    }
    const token = reading === 'json-number' ? throughDoubles(lease.token) : lease.token;
    pending.ok({ token, leaseId: leaseRef(lease.id) });
    tokens.push(token);
    await recordedIncrement(
      history,
      world.store,
      holderIncrement('A', lease, 'guarded', { opId: `A${i}-${resource}` }),
    );
    await recordedRelease(history, 'A', lease);
  }
  await world.closeCoordinator(coordinator);
  return { verdict: await judge(world, history, [resource]), tokens, refused };
}

describe('tokens near 2^53 (F16)', () => {
  it('count through 2^53 one by one, each grant larger than the last and every commit in order', async () => {
    const { verdict, tokens } = await acrossTwoTo53('bigint');
    expect(verdict.violations).toEqual([]);
    expect(tokens).toEqual([TWO_53 - 2n, TWO_53 - 1n, TWO_53, TWO_53 + 1n, TWO_53 + 2n]);
    expect(verdict.info.join('\n')).toMatch(/final 5, 5 increments ok/);
  });

  it('negative control: a client reading tokens as JSON numbers sees two grants with one token', async () => {
    const { verdict } = await acrossTwoTo53('json-number');
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/granted 2 times/);
  });
});

describe('tokens near 2^63 − 1 (F16)', () => {
  it('reach 2^63 − 1 exactly, then refuse to grant rather than wrap or repeat', async () => {
    const { verdict, tokens, refused } = await upToTwoTo63('bigint');
    expect(verdict.violations).toEqual([]);
    expect(tokens).toEqual([MAX_TOKEN - 2n, MAX_TOKEN - 1n, MAX_TOKEN]);
    expect(refused).toBe(1);
  });

  it('negative control: the same tokens as JSON numbers all collapse into one', async () => {
    const { verdict } = await upToTwoTo63('json-number');
    expect(verdict.ok).toBe(false);
    expect(verdict.violations.join('\n')).toMatch(/granted 3 times/);
  });
});
