import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { TokenProposer } from '../../../../packages/coordinator/src/tokens/proposal.js';
import { VoteTally } from '../../../../packages/coordinator/src/quorum/quorum.js';

/**
 * A pure model of the token protocol of DESIGN §3 — nodes with `cur` registers, clients proposing through the
 * real TokenProposer and deciding with the real VoteTally — driven by fast-check through random schedules:
 * lost requests and replies, duplicated and reordered deliveries, paused nodes, client timeouts, and nodes
 * that crash and restart with their data (in-flight work lost). Checks that granted tokens are unique and
 * that a grant completed before another started has the smaller token.
 */

/** The node's promise rule; the correct one is strict (`t > cur`), as in acquire.lua / promise.lua. */
type PromiseRule = (cur: bigint, t: bigint) => boolean;
const strictRule: PromiseRule = (cur, t) => t > cur;

const NODES = 5;
const CLIENTS = 3;
const MAX_ROUNDS = 5;

interface Message {
  readonly kind: 'request' | 'reply';
  readonly client: number;
  readonly op: number;
  readonly round: number;
  readonly node: number;
  readonly t: bigint;
  readonly promised?: boolean;
  readonly cur?: bigint;
}

interface Attempt {
  op: number;
  round: number;
  t: bigint;
  tally: VoteTally;
  replied: Set<number>;
  start: number;
}

interface Grant {
  readonly token: bigint;
  readonly start: number;
  readonly end: number;
}

type Command =
  | { type: 'start'; client: number }
  | { type: 'deliver'; index: number }
  | { type: 'drop'; index: number }
  | { type: 'duplicate'; index: number }
  | { type: 'timeout'; client: number }
  | { type: 'crash'; node: number }
  | { type: 'pause'; node: number }
  | { type: 'resume'; node: number };

class Simulation {
  readonly nodes = Array.from({ length: NODES }, () => ({ cur: 0n, paused: false }));
  readonly network: Message[] = [];
  readonly grants: Grant[] = [];
  /** Grants won in a second or later round (the first proposal was refused): the schedules must reach them. */
  laterRoundGrants = 0;
  private readonly clients: { proposer: TokenProposer; attempt: Attempt | undefined; op: number }[];
  private step = 0;

  constructor(
    clockSkews: readonly number[],
    private readonly rule: PromiseRule,
  ) {
    this.clients = clockSkews.map((skew) => ({
      // Each client's wall clock: the step count plus its own skew (some clients are far behind).
      proposer: new TokenProposer(() => this.step + skew),
      attempt: undefined,
      op: 0,
    }));
  }

  run(command: Command): void {
    this.step++;
    switch (command.type) {
      case 'start':
        return this.start(command.client);
      case 'deliver':
        return this.deliver(command.index);
      case 'drop':
        if (this.network.length > 0) this.network.splice(command.index % this.network.length, 1);
        return;
      case 'duplicate':
        if (this.network.length > 0) this.network.push(this.network[command.index % this.network.length]!);
        return;
      case 'timeout':
        return this.timeout(command.client);
      case 'crash':
        // Restart with data (fsync always): cur survives, work in flight to the node is lost.
        for (let i = this.network.length - 1; i >= 0; i--) {
          const m = this.network[i]!;
          if (m.kind === 'request' && m.node === command.node) this.network.splice(i, 1);
        }
        this.nodes[command.node]!.paused = false;
        return;
      case 'pause':
        this.nodes[command.node]!.paused = true;
        return;
      case 'resume':
        this.nodes[command.node]!.paused = false;
        return;
    }
  }

  private start(index: number): void {
    const client = this.clients[index]!;
    if (client.attempt !== undefined) return;
    const t = client.proposer.firstProposal('r');
    if (t === null) return;
    client.op++;
    client.attempt = {
      op: client.op,
      round: 0,
      t,
      tally: new VoteTally(NODES),
      replied: new Set(),
      start: this.step,
    };
    this.send(index, client.attempt);
  }

  private send(client: number, attempt: Attempt): void {
    for (let node = 0; node < NODES; node++) {
      this.network.push({
        kind: 'request',
        client,
        op: attempt.op,
        round: attempt.round,
        node,
        t: attempt.t,
      });
    }
  }

  private deliver(index: number): void {
    if (this.network.length === 0) return;
    const [message] = this.network.splice(index % this.network.length, 1);
    if (message === undefined) return;
    if (message.kind === 'request') {
      const node = this.nodes[message.node]!;
      if (node.paused) {
        this.network.push(message); // stays queued until the node resumes
        return;
      }
      const promised = this.rule(node.cur, message.t);
      if (promised) node.cur = message.t;
      this.network.push({ ...message, kind: 'reply', promised, cur: node.cur });
      return;
    }
    const client = this.clients[message.client]!;
    if (message.cur !== undefined) client.proposer.observe('r', message.cur);
    const attempt = client.attempt;
    if (attempt === undefined || attempt.op !== message.op || attempt.round !== message.round) return;
    if (attempt.replied.has(message.node)) return; // a duplicated reply is one vote
    attempt.replied.add(message.node);
    const outcome = message.promised ? attempt.tally.recordFor() : attempt.tally.recordAgainst();
    if (outcome === 'won') {
      this.grants.push({ token: attempt.t, start: attempt.start, end: this.step });
      if (attempt.round > 0) this.laterRoundGrants++;
      client.attempt = undefined;
    } else if (outcome === 'lost') {
      this.nextRound(message.client);
    }
  }

  private timeout(index: number): void {
    if (this.clients[index]!.attempt !== undefined) this.nextRound(index);
  }

  private nextRound(index: number): void {
    const client = this.clients[index]!;
    const attempt = client.attempt!;
    const t = attempt.round + 1 < MAX_ROUNDS ? client.proposer.nextAbove('r', attempt.t) : null;
    if (t === null) {
      client.attempt = undefined; // gives up; a later start is a new grant attempt
      return;
    }
    client.attempt = {
      ...attempt,
      round: attempt.round + 1,
      t,
      tally: new VoteTally(NODES),
      replied: new Set(),
    };
    this.send(index, client.attempt);
  }
}

const command: fc.Arbitrary<Command> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ type: fc.constant('start' as const), client: fc.nat(CLIENTS - 1) }) },
  // Mostly in order (the oldest message first), sometimes any message: reordering and late delivery.
  {
    weight: 12,
    arbitrary: fc.record({
      type: fc.constant('deliver' as const),
      index: fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.nat(1000) }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ type: fc.constant('drop' as const), index: fc.nat(1000) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('duplicate' as const), index: fc.nat(1000) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('timeout' as const), client: fc.nat(CLIENTS - 1) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('crash' as const), node: fc.nat(NODES - 1) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('pause' as const), node: fc.nat(NODES - 1) }) },
  { weight: 1, arbitrary: fc.record({ type: fc.constant('resume' as const), node: fc.nat(NODES - 1) }) },
);

const schedule = fc.record({
  skews: fc.array(fc.integer({ min: 0, max: 50 }), { minLength: CLIENTS, maxLength: CLIENTS }),
  commands: fc.array(command, { minLength: 50, maxLength: 400, size: 'max' }),
});

/** Returns a description of the first violation, or null. */
function violation(grants: readonly Grant[]): string | null {
  const seen = new Set<bigint>();
  for (const g of grants) {
    if (seen.has(g.token)) return `token ${g.token} granted twice`;
    seen.add(g.token);
  }
  for (const a of grants) {
    for (const b of grants) {
      if (a.end < b.start && !(a.token < b.token)) {
        return `grant ${a.token} completed at step ${a.end} before grant ${b.token} started at ${b.start}`;
      }
    }
  }
  return null;
}

function property(rule: PromiseRule) {
  return fc.property(schedule, ({ skews, commands }) => {
    const simulation = new Simulation(skews, rule);
    for (const c of commands) simulation.run(c);
    expect(violation(simulation.grants)).toBeNull();
  });
}

describe('token protocol model (quorum max-register)', () => {
  it('grants unique tokens that increase in real time under lost, duplicated and late messages', () => {
    fc.assert(property(strictRule), { numRuns: 400 });
  });

  it('reaches grants, including grants in later rounds, in the generated schedules', () => {
    let grants = 0;
    let laterRounds = 0;
    for (const { skews, commands } of fc.sample(schedule, { numRuns: 200, seed: 7 })) {
      const simulation = new Simulation(skews, strictRule);
      for (const c of commands) simulation.run(c);
      grants += simulation.grants.length;
      laterRounds += simulation.laterRoundGrants;
    }
    expect(grants).toBeGreaterThan(300);
    expect(laterRounds).toBeGreaterThan(50);
  });

  it('catches the anomaly when nodes promise a value twice (negative control: the checker checks)', () => {
    const result = fc.check(
      property((cur, t) => t >= cur),
      { numRuns: 1_000, seed: 42, endOnFailure: true },
    );
    expect(result.failed).toBe(true);
  });
});
