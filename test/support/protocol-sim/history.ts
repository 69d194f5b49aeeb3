/**
 * The history checker of the simulation: G2 (DESIGN §1) over every pair of completed grants of a resource, after the
 * run. Tokens are unique per grant, and if grant A completed before grant B started, token(A) < token(B): a later
 * grant must carry a larger token than every earlier completed grant, whichever process, key layout or node set gave
 * it. ("Before" is the simulation's real-time order of events: A's last reply was read before B's attempt began.)
 *
 * Its negative control (test/unit/coordinator/protocol/nemesis.test.ts) runs the same search with a protection
 * switched off, and feeds it a history with one pair out of order.
 */

export interface GrantRecord {
  readonly resource: string;
  readonly process: string;
  readonly token: bigint;
  /** Event counter when the attempt began and when its grant completed (SimWorld.seq). */
  readonly startSeq: number;
  readonly endSeq: number;
  /** Virtual times of the same, for the message. */
  readonly startMs: number;
  readonly endMs: number;
}

export interface G2Violation {
  readonly earlier: GrantRecord;
  readonly later: GrantRecord;
  readonly text: string;
}

function describe(g: GrantRecord): string {
  return `${g.process} (token ${g.token}, ${g.startMs}–${g.endMs} ms)`;
}

/** Every G2 violation of a history, pair by pair (quadratic: histories are short). */
export function g2Violations(grants: readonly GrantRecord[]): G2Violation[] {
  const out: G2Violation[] = [];
  for (let i = 0; i < grants.length; i++) {
    for (let j = i + 1; j < grants.length; j++) {
      const a = grants[i]!;
      const b = grants[j]!;
      if (a.resource !== b.resource) continue;
      if (a.token === b.token) {
        out.push({
          earlier: a,
          later: b,
          text: `duplicate token ${a.token}: ${describe(a)} and ${describe(b)}`,
        });
        continue;
      }
      for (const [x, y] of [
        [a, b],
        [b, a],
      ] as const) {
        if (x.endSeq < y.startSeq && x.token > y.token) {
          out.push({
            earlier: x,
            later: y,
            text: `token went backwards on ${x.resource}: ${describe(x)} completed before ${describe(y)} started`,
          });
        }
      }
    }
  }
  return out;
}
