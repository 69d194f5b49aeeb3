/**
 * Checkers of G3, G4 and G5 (DESIGN §1) over a simulation run's recorded history, and of the lease calls' retries.
 * They judge what was recorded — the modelled guard's commits (guard-model.ts), what each holder was answered, what
 * each extend returned, what each release deleted — never the code that produced it, so each is also shown
 * hand-made bad histories (test/unit/coordinator/protocol/checkers.test.ts) and a negative control that switches
 * one protection off and must be found by the search.
 *
 * - **G3**: once a holder has fenced in (its grant's first guarded transaction committed), no guarded transaction
 *   of an earlier grant commits. "Earlier" is either order a reader may mean: a lower token, or a grant that
 *   completed before this one's attempt began (real time). With G1 and G2 both orders agree; when G2 fails (a later
 *   grant with a lower token) the real-time order still names the stale writer.
 * - **G4**: the committed history of read-modify-write critical sections equals a serial run in token order: sorted
 *   by token (commit order among equal tokens, one lease's transactions), each read sees the value the previous one
 *   wrote (no lost update).
 * - **G5**: a retried guarded write with the same operation id takes effect once: at most one commit per
 *   (resource, operation id); every answer that reports it done carries that commit's result; and no retry is told
 *   "stale, nothing written" after its operation committed.
 * - **Lease retries**: an extend (retried when its replies were lost, as the keep-alive loop does) reports its grant's
 *   token: never above it (extend never mints one, and never prolongs a later lease), and never below it (a record
 *   set back to the attempt's refused first guess by a duplicated acquire, or written by an acquire that arrived
 *   after its node's promise: acquire.lua's "The record's token", docs/simulation.md "Found on the way"); a release
 *   (retried, duplicated, late) never deletes another lease's key.
 */
import type { CommitRecord, PresentedGrant } from './guard-model.js';

/** What a holder was finally answered for one operation (after its retries). */
export interface WriteOutcome {
  readonly grant: PresentedGrant;
  readonly opId: string;
  /** `unknown`: every try's reply was lost. */
  readonly kind: 'committed' | 'replayed' | 'stale' | 'unknown';
  readonly result: number | null;
  /** The event at which the guard decided the answer the holder read (for `stale`: when it refused). */
  readonly decidedSeq: number;
}

/** A successful extend and the token it reported. */
export interface ExtendRecord {
  readonly grant: PresentedGrant;
  readonly token: bigint;
  readonly seq: number;
}

/** A release that deleted a key holding another lease (seen at the node, as the script ran). */
export interface Trespass {
  readonly node: number;
  readonly releasedBy: string;
  readonly deleted: string;
  readonly seq: number;
}

export interface CheckedHistory {
  readonly commits: readonly CommitRecord[];
  readonly outcomes: readonly WriteOutcome[];
  readonly extensions: readonly ExtendRecord[];
  readonly trespasses: readonly Trespass[];
}

function grantKey(g: PresentedGrant): string {
  return `${g.leaseId}|${g.token}`;
}

function describe(g: PresentedGrant): string {
  return `${g.process} (lease ${g.leaseId}, token ${g.token}, granted #${g.startSeq}–#${g.endSeq})`;
}

/** Whether `a` is an earlier grant than `b` of the same resource, in token order or in real-time order. */
function earlier(a: PresentedGrant, b: PresentedGrant): boolean {
  return a.token < b.token || a.endSeq < b.startSeq;
}

/** G3: no commit of an earlier grant after a later grant fenced in. */
export function g3Violations(commits: readonly CommitRecord[]): string[] {
  const out: string[] = [];
  /** Per resource, the grants that fenced in so far (their first commit), in commit order. */
  const fencedIn = new Map<string, { grant: PresentedGrant; seq: number }[]>();
  for (const commit of commits) {
    const list = fencedIn.get(commit.grant.resource) ?? [];
    fencedIn.set(commit.grant.resource, list);
    for (const later of list) {
      if (grantKey(later.grant) === grantKey(commit.grant)) continue;
      if (!earlier(commit.grant, later.grant)) continue;
      out.push(
        `G3: on ${commit.grant.resource}, ${describe(later.grant)} fenced in at #${later.seq}, then ` +
          `${describe(commit.grant)} committed ${commit.kind} ${commit.opId} at #${commit.seq}`,
      );
    }
    if (!list.some((f) => grantKey(f.grant) === grantKey(commit.grant)))
      list.push({ grant: commit.grant, seq: commit.seq });
  }
  return out;
}

/** G4: the committed read-modify-writes of each resource equal a serial run in token order from 0. */
export function g4Violations(commits: readonly CommitRecord[]): string[] {
  const out: string[] = [];
  const byResource = new Map<string, CommitRecord[]>();
  for (const c of commits) {
    if (c.read === null) continue;
    byResource.set(c.grant.resource, [...(byResource.get(c.grant.resource) ?? []), c]);
  }
  for (const [resource, list] of byResource) {
    // Array.prototype.sort is stable: equal tokens keep their commit order.
    const serial = [...list].sort((a, b) =>
      a.grant.token < b.grant.token ? -1 : a.grant.token > b.grant.token ? 1 : 0,
    );
    let value = 0;
    let previous: CommitRecord | null = null;
    for (const c of serial) {
      if (c.read !== value) {
        out.push(
          `G4: on ${resource}, ${describe(c.grant)} read ${c.read} and wrote ${c.wrote} at #${c.seq}; a serial run ` +
            `in token order reads ${value} there (` +
            (previous === null
              ? 'no earlier write'
              : `after ${previous.opId} of token ${previous.grant.token}`) +
            '): an update was lost',
        );
      }
      value = c.wrote!;
      previous = c;
    }
  }
  return out;
}

/** G5: each operation takes effect once, and every answer about it agrees with that one effect. */
export function g5Violations(commits: readonly CommitRecord[], outcomes: readonly WriteOutcome[]): string[] {
  const out: string[] = [];
  const committed = new Map<string, CommitRecord>();
  for (const c of commits) {
    const key = `${c.grant.resource}\u0000${c.opId}`;
    const first = committed.get(key);
    if (first !== undefined) {
      out.push(
        `G5: operation ${c.opId} on ${c.grant.resource} took effect twice: at #${first.seq} (wrote ${first.wrote}) ` +
          `and at #${c.seq} (wrote ${c.wrote}), by ${describe(c.grant)}`,
      );
      continue;
    }
    committed.set(key, c);
  }
  for (const o of outcomes) {
    const c = committed.get(`${o.grant.resource}\u0000${o.opId}`);
    if ((o.kind === 'committed' || o.kind === 'replayed') && (c === undefined || c.wrote !== o.result)) {
      out.push(
        `G5: ${describe(o.grant)} was answered ${o.kind} (${o.result}) for ${o.opId}, but ` +
          (c === undefined ? 'it never committed' : `it committed writing ${c.wrote}`),
      );
    }
    if (o.kind === 'stale' && c !== undefined && c.seq < o.decidedSeq) {
      out.push(
        `G5: ${describe(o.grant)} retried ${o.opId} and was told stale at #${o.decidedSeq}, though the operation ` +
          `had committed at #${c.seq}: its caller believes it never took effect`,
      );
    }
  }
  return out;
}

/** Retried lease calls: an extend reports its grant's token; a release deletes only its own lease. */
export function leaseRetryViolations(
  extensions: readonly ExtendRecord[],
  trespasses: readonly Trespass[],
): string[] {
  const out: string[] = [];
  for (const e of extensions) {
    if (e.token > e.grant.token) {
      out.push(
        `lease: an extend of ${describe(e.grant)} succeeded at #${e.seq} reporting token ${e.token}: ` +
          'an extension keeps its own token and never prolongs a later lease',
      );
    } else if (e.token < e.grant.token) {
      out.push(
        `lease: an extend of ${describe(e.grant)} succeeded at #${e.seq} reporting the lower token ${e.token}: ` +
          'the lease record holds a token the lease was not granted',
      );
    }
  }
  for (const t of trespasses) {
    out.push(
      `lease: a release by ${t.releasedBy} deleted the lease of ${t.deleted} on n${t.node} at #${t.seq}`,
    );
  }
  return out;
}

/** Extends that reported a token below their grant's (each also a violation; `npm run sim` prints the total). */
export function lowerExtendTokens(extensions: readonly ExtendRecord[]): number {
  return extensions.filter((e) => e.token < e.grant.token).length;
}

/** Every checker over one history, by guarantee. */
export function checkHistory(h: CheckedHistory): Record<'g3' | 'g4' | 'g5' | 'leases', string[]> {
  return {
    g3: g3Violations(h.commits),
    g4: g4Violations(h.commits),
    g5: g5Violations(h.commits, h.outcomes),
    leases: leaseRetryViolations(h.extensions, h.trespasses),
  };
}
