/**
 * Majority of N: `floor(N/2) + 1`. Any two majorities of the same N nodes share at least one node — the
 * single fact both the lease (two holders cannot both win) and the token register (a later grant meets an
 * earlier one's promise) rest on.
 */
export function quorumOf(nodeCount: number): number {
  return Math.floor(nodeCount / 2) + 1;
}

/**
 * The most votes against a call can take and still win: `N − quorum`. One more against and the majority is
 * out of reach, so the caller stops waiting (DESIGN §2.2: never wait for a hung node, never hang on an even
 * split — with N = 4, quorum is 3, and 2 against already decides).
 */
export function maxAgainst(nodeCount: number): number {
  return nodeCount - quorumOf(nodeCount);
}

export type Outcome = 'won' | 'lost' | 'open';

/** Counts votes and says as soon as the outcome is known. */
export class VoteTally {
  private votesFor = 0;
  private votesAgainst = 0;
  readonly quorum: number;

  constructor(readonly nodeCount: number) {
    this.quorum = quorumOf(nodeCount);
  }

  recordFor(): Outcome {
    this.votesFor++;
    return this.outcome;
  }

  recordAgainst(): Outcome {
    this.votesAgainst++;
    return this.outcome;
  }

  get for(): number {
    return this.votesFor;
  }

  get against(): number {
    return this.votesAgainst;
  }

  get outcome(): Outcome {
    if (this.votesFor >= this.quorum) return 'won';
    if (this.votesAgainst > maxAgainst(this.nodeCount)) return 'lost';
    return 'open';
  }
}

/** What one node said in a fan-out: a value, an error (timeout, connection, malformed reply), or not yet. */
export type NodeReply<T> =
  | { readonly state: 'ok'; readonly value: T }
  | { readonly state: 'error'; readonly error: unknown }
  | { readonly state: 'pending' };

export interface FanOutResult<T> {
  readonly outcome: 'won' | 'lost';
  /** One entry per node, in node order, as known at the moment of decision. */
  readonly replies: readonly NodeReply<T>[];
  /** True when some node had not replied at the moment of decision: the call's effect there is unknown. */
  readonly indeterminate: boolean;
  /**
   * Every node's final reply, once every call has finished (each call bounds its own time). For classifying a
   * decided call after the fact — e.g. "held by another" versus "unreachable" — never for deciding it.
   */
  readonly settled: Promise<readonly NodeReply<T>[]>;
}

/**
 * Sends one call to every node in parallel and resolves as soon as the outcome is decided: `won` at quorum
 * votes for, `lost` once votes against exceed `N − quorum`. A `null` call means the node does not vote (it is
 * not asked and counts against). Errors count against. Each call must bound its own time.
 */
export function fanOut<T>(
  calls: readonly ((() => Promise<T>) | null)[],
  isVoteFor: (value: T) => boolean,
): Promise<FanOutResult<T>> {
  const tally = new VoteTally(calls.length);
  const replies: NodeReply<T>[] = calls.map(() => ({ state: 'pending' }));
  let finished: () => void = () => undefined;
  const settled = new Promise<readonly NodeReply<T>[]>((resolve) => {
    let remaining = calls.length;
    finished = () => {
      if (--remaining === 0) resolve([...replies]);
    };
    if (remaining === 0) resolve([]);
  });
  return new Promise((resolve) => {
    let decided = false;
    const settle = (outcome: Outcome): void => {
      if (decided || outcome === 'open') return;
      decided = true;
      resolve({
        outcome,
        replies: [...replies],
        indeterminate: replies.some((r) => r.state === 'pending'),
        settled,
      });
    };
    calls.forEach((call, index) => {
      if (call === null) {
        replies[index] = { state: 'error', error: new Error('node does not vote') };
        finished();
        settle(tally.recordAgainst());
        return;
      }
      call().then(
        (value) => {
          replies[index] = { state: 'ok', value };
          finished();
          settle(isVoteFor(value) ? tally.recordFor() : tally.recordAgainst());
        },
        (error: unknown) => {
          replies[index] = { state: 'error', error };
          finished();
          settle(tally.recordAgainst());
        },
      );
    });
    if (calls.length === 0) settle('lost');
  });
}
