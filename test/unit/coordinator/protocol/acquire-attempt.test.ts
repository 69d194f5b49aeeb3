// One acquire attempt (protocol/acquire-attempt.ts with tokens/promise-rounds.ts), driven on virtual time against
// in-memory nodes with the Lua scripts' semantics. Every message's delay or loss is scripted
// (test/fixtures/protocol-sim/scripted-rig.ts), so "a slow first round" or "a promise round that reaches only a
// minority" is exactly the schedule that builds it, and the assertions hold no timing thresholds.
//
// These tests kill mutants 01–03 of test/mutants/ (docs/mutation-testing.md).
import { describe, expect, it } from 'vitest';
import {
  attemptAcquire,
  type AttemptResult,
} from '../../../../packages/coordinator/src/protocol/acquire-attempt.js';
import { Releaser } from '../../../../packages/coordinator/src/protocol/release.js';
import { resourceKeys } from '../../../../packages/coordinator/src/keys/key-layout.js';
import { TokenProposer } from '../../../../packages/coordinator/src/tokens/proposal.js';
import { SimRedisNode } from '../../../fixtures/protocol-sim/sim-redis-node.js';
import { scriptedRig, type ScriptedRig, type Schedule } from '../../../fixtures/protocol-sim/scripted-rig.js';

const RESOURCE = 'attempt';
const KEYS = resourceKeys('fenced', RESOURCE);
const LEASE_ID = 'lease-under-test';
const TTL_MS = 1_000;
/** driftMs(1 000, 0.01) = round(1 000 × 0.01) + 2: written out, so the test does not trust the code it checks. */
const DRIFT_MS = 12;
/** The default minValidityMs. */
const MIN_VALIDITY_MS = 10;

/** The proposer's wall clock: its first proposal is `EPOCH_MS << 20`. */
const EPOCH_MS = 1_795_000_000_000;
const GUESS = BigInt(EPOCH_MS) << 20n;
/** A register above the first proposal: a node holding it refuses the proposal and reports it. */
const AHEAD = GUESS + 1_000n;

/** A node where a rival's promise of the very value we propose always lands first: it refuses every round. */
class OutbidModel extends SimRedisNode {
  override promise(...call: Parameters<SimRedisNode['promise']>) {
    const [keys, , proposal] = call;
    if (proposal > this.answer(keys.token)) this.setRegister(keys.token, proposal);
    return super.promise(...call);
  }
}

function attempt(rig: ScriptedRig): () => Promise<AttemptResult> {
  const proposer = new TokenProposer(() => EPOCH_MS);
  const releaser = new Releaser(rig.context);
  return () =>
    attemptAcquire(
      rig.context,
      { proposer, releaser, jitter: () => 0 },
      { resource: RESOURCE, keys: KEYS, leaseId: LEASE_ID, ttlMs: TTL_MS },
    );
}

/** Which nodes still hold a lease key with our id right now. */
function holders(rig: ScriptedRig): number[] {
  return rig.models.filter((m) => m.lease(KEYS)?.holder === LEASE_ID).map((m) => m.index);
}

function register(rig: ScriptedRig, node: number): bigint {
  return rig.models[node]!.answer(KEYS.token);
}

/** Every message takes `ms`, except those `override` names. */
function uniform(
  ms: number,
  override: (message: string) => number | 'lost' | undefined = () => undefined,
): Schedule {
  return (message) => override(message) ?? ms;
}

describe('an acquire attempt counts only a majority of promises', () => {
  it('is not granted when only quorum − 1 nodes promise, whatever the rounds (the others grant but are outbid)', async () => {
    const rig = scriptedRig({
      nodes: 3,
      delaysMs: [1],
      schedule: uniform(1),
      // Nodes 1 and 2 vote for the lease but refuse every promise: their registers stay ahead of each proposal.
      model: (i, now) => (i === 0 ? new SimRedisNode(i, now) : new OutbidModel(i, now)),
    });
    rig.models[1]!.setRegister(KEYS.token, AHEAD);
    rig.models[2]!.setRegister(KEYS.token, AHEAD);

    const { value: result } = await rig.runAt(0, attempt(rig));

    expect(result.kind).toBe('failed');
    expect(result).toMatchObject({ contended: true });
    // Only node 0 ever promised anything of ours; the partial grants were undone.
    expect(register(rig, 0)).toBeGreaterThan(GUESS);
    expect(holders(rig)).toEqual([]);
  });

  it('is not granted when the second promise round reaches only a minority', async () => {
    const rig = scriptedRig({
      nodes: 3,
      delaysMs: [1],
      // The first round reaches everyone; the later promises to nodes 1 and 2 are lost: they time out after
      // 300 ms, well within the ttl, so only the count of promises can refuse this token.
      schedule: uniform(1, (m) => (/^request c->n[12] promise/.test(m) ? 'lost' : undefined)),
      options: { nodeTimeoutMs: 300 },
    });
    rig.models[1]!.setRegister(KEYS.token, AHEAD);
    rig.models[2]!.setRegister(KEYS.token, AHEAD);

    const { value: result } = await rig.runAt(0, attempt(rig));

    expect(result.kind).toBe('unavailable');
    expect(result).toMatchObject({ retryable: true });
    if (result.kind === 'unavailable') {
      expect(result.error.message).toMatch(/no majority of nodes answered the token promise/);
    }
    // Node 0 promised a value above AHEAD, alone: that is one promise, not a token.
    expect(register(rig, 0)).toBeGreaterThan(AHEAD);
    expect(register(rig, 1)).toBe(AHEAD);
    expect(register(rig, 2)).toBe(AHEAD);
    expect(holders(rig)).toEqual([]);
  });

  it('goes above the refusals in a second round and is granted once a majority promised that token', async () => {
    const rig = scriptedRig({ nodes: 3, delaysMs: [1], schedule: uniform(1) });
    rig.models[1]!.setRegister(KEYS.token, AHEAD);
    rig.models[2]!.setRegister(KEYS.token, AHEAD);

    const { value: result } = await rig.runAt(0, attempt(rig));

    expect(result.kind).toBe('granted');
    if (result.kind !== 'granted') return;
    const token = result.grant.token;
    expect(token).toBeGreaterThan(AHEAD);
    // A majority holds exactly this token as its register: it promised it.
    expect([0, 1, 2].filter((i) => register(rig, i) === token).length).toBeGreaterThanOrEqual(2);
    expect(holders(rig)).toEqual([0, 1, 2]);
  });
});

describe('an acquire attempt asks for later promises only where its lease stands', () => {
  it('sends the second round only to the nodes that granted, so every node that promised the token records it', async () => {
    const rig = scriptedRig({
      nodes: 3,
      delaysMs: [1, 50],
      // Node 2's acquire arrives after the second round would have reached it: its grant is not in at the decision.
      schedule: uniform(1, (m) => (/^request c->n2 acquire/.test(m) ? 50 : undefined)),
    });
    for (const i of [0, 1, 2]) rig.models[i]!.setRegister(KEYS.token, AHEAD);

    const { value: result } = await rig.runAt(0, attempt(rig));

    expect(result.kind).toBe('granted');
    if (result.kind !== 'granted') return;
    const token = result.grant.token;
    // Nodes 0 and 1 granted, then promised: their records carry the token. Node 2 was not asked to promise: a
    // promise that arrives before its lease record leaves the record with the refused guess (acquire.lua), and an
    // extend answered by nodes 2 and one other would report a token the lease was never granted.
    expect([register(rig, 0), register(rig, 1), register(rig, 2)]).toEqual([token, token, AHEAD]);
    expect([0, 1, 2].map((i) => rig.models[i]!.lease(KEYS)?.token)).toEqual([token, token, GUESS]);
  });
});

describe('an acquire attempt measures validity from its own start', () => {
  it('subtracts a slow first round: validUntil = start + ttl − drift, validity ≤ ttl − elapsed − drift', async () => {
    // 400 ms of a 1 000 ms ttl go by before a majority has answered (200 ms each way).
    const rig = scriptedRig({
      nodes: 3,
      delaysMs: [200, 1],
      schedule: uniform(1, (m) => (/acquire/.test(m) ? 200 : undefined)),
    });

    const { value: result, startedMs, settledMs } = await rig.runAt(100, attempt(rig));

    expect(settledMs - startedMs).toBe(400);
    expect(result.kind).toBe('granted');
    if (result.kind !== 'granted') return;
    expect(result.grant.validUntil).toBe(startedMs + TTL_MS - DRIFT_MS); // 1 088
    expect(result.grant.validityMs).toBeLessThanOrEqual(TTL_MS - (settledMs - startedMs) - DRIFT_MS); // 588
    expect(result.grant.validityMs).toBe(588);
  });

  it('also subtracts the token rounds it needed', async () => {
    // Round one takes 100 ms and is refused by nodes 1 and 2; round two takes 300 ms.
    const rig = scriptedRig({
      nodes: 3,
      delaysMs: [50, 150],
      schedule: (m) => (/promise/.test(m) ? 150 : 50),
    });
    rig.models[1]!.setRegister(KEYS.token, AHEAD);
    rig.models[2]!.setRegister(KEYS.token, AHEAD);

    const { value: result, startedMs, settledMs } = await rig.runAt(0, attempt(rig));

    expect(settledMs - startedMs).toBe(400);
    expect(result.kind).toBe('granted');
    if (result.kind !== 'granted') return;
    expect(result.grant.token).toBeGreaterThan(AHEAD);
    expect(result.grant.validUntil).toBe(startedMs + TTL_MS - DRIFT_MS);
    expect(result.grant.validityMs).toBeLessThanOrEqual(TTL_MS - 400 - DRIFT_MS);
  });
});

describe('an acquire attempt never hands out a lease without validity', () => {
  /** Round one (nodes 1 and 2 refuse the proposal) takes 100 ms; the second promise round takes `secondMs`. */
  function slowSecondRound(secondMs: number): ScriptedRig {
    const rig = scriptedRig({
      nodes: 3,
      delaysMs: [1, 40, 60, secondMs - 40],
      schedule: (m) => {
        if (/^request .* (acquire|promise)/.test(m)) return 40;
        if (/^reply .* acquire/.test(m)) return 60;
        if (/^reply .* promise/.test(m)) return secondMs - 40;
        return 1; // releases
      },
    });
    rig.models[1]!.setRegister(KEYS.token, AHEAD);
    rig.models[2]!.setRegister(KEYS.token, AHEAD);
    return rig;
  }

  it('refuses a lease that a slow second promise round left already expired, and releases it everywhere', async () => {
    // 100 ms + 950 ms: the token is promised by a majority only after the ttl has run out (validity −62 ms).
    const rig = slowSecondRound(950);
    const holdersAtTheEnd: number[][] = [];

    const { value: result, settledMs } = await rig.runAt(0, async () => {
      const r = await attempt(rig)();
      holdersAtTheEnd.push(holders(rig));
      return r;
    });

    expect(settledMs).toBeGreaterThanOrEqual(1_050);
    expect(result.kind).toBe('unavailable');
    expect(result).toMatchObject({ retryable: true });
    if (result.kind === 'unavailable') expect(result.error.message).toMatch(/answered too slowly/);
    expect(holdersAtTheEnd).toEqual([[]]);
  });

  it(`refuses a lease left with validity ≤ minValidityMs (${MIN_VALIDITY_MS} ms), releasing the grants it had`, async () => {
    // 100 ms + 883 ms: validity = 1 000 − 983 − 12 = 5 ms. The nodes' keys (set at 40 ms) would live until 1 040 ms.
    const rig = slowSecondRound(883);
    const holdersAtTheEnd: number[][] = [];

    const { value: result, settledMs } = await rig.runAt(0, async () => {
      const r = await attempt(rig)();
      holdersAtTheEnd.push(holders(rig));
      return r;
    });

    expect(result.kind).toBe('unavailable');
    if (result.kind === 'unavailable') expect(result.error.message).toMatch(/validity left 5 ms/);
    // Released, not left to expire: at the end of the attempt no node holds our id any more.
    expect(settledMs).toBeLessThan(1_040);
    expect(holdersAtTheEnd).toEqual([[]]);
  });
});
