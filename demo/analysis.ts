import {
  checkCommitOrder,
  checkCounter,
  checkGrantedTokens,
  checkTokens,
  combine,
  reportOverlaps,
  type CheckResult,
} from '@fenced/test-utils/checkers';
import type { CommitRecord, HistoryData, HistoryEvent } from '@fenced/test-utils/history';
import type { Lane, OpRecord, RunRecord, WorkerName } from './run-record.js';

/** One lock grant, numbered in the order the acquires were sent. */
export interface Grant {
  readonly worker: WorkerName;
  readonly leaseRef: string;
  readonly number: number;
  /**
   * Fenced: the fencing token. Unprotected: the grant number, standing in for the token plain Redlock does
   * not have, so the commit-order checker can still ask "did an older grant write after a newer one?".
   */
  readonly token: bigint;
  /** `token …123456` or `grant #1`. */
  readonly label: string;
  readonly requestedAt: number;
  readonly grantedAt: number;
  readonly validityMs: number;
  readonly validUntil: number;
  /** When the worker stopped believing it held the lock: its release, or the end of the run. */
  readonly heldUntil: number;
}

/**
 * `forged-accepted`: a write that presented a token nobody was granted (F20) and was committed; the fence is then
 * at that token, so every honest holder after it is refused.
 */
export type WriteStatus = 'committed' | 'stale-accepted' | 'forged-accepted' | 'refused' | 'failed';

export interface WriteView {
  readonly worker: WorkerName;
  readonly startedAt: number;
  readonly endedAt: number;
  readonly value: number;
  readonly via: 'db' | 'http';
  readonly status: WriteStatus;
  readonly grant: Grant | undefined;
  /** Why, for the timeline: the refusal, or what a stale write overwrote. */
  readonly detail: string;
}

export type Tone = 'info' | 'muted' | 'good' | 'bad' | 'warn';

export interface TimelineEntry {
  readonly t: number;
  readonly lane: Lane;
  readonly text: string;
  readonly tone: Tone;
}

export interface Verdict {
  /** What the run must show: the anomaly (unprotected) or none (fenced). */
  readonly expectation: 'anomaly' | 'safe';
  readonly passed: boolean;
  /** Short: `data lost`, `safe`, `NO ANOMALY`, `UNSAFE`, `NOT EXERCISED`, `BROKEN`. */
  readonly label: string;
  readonly headline: string;
  readonly findings: readonly string[];
  /** The checkers' combined result (violations are the anomaly in an unprotected run). */
  readonly checks: CheckResult;
}

export interface RunAnalysis {
  readonly record: RunRecord;
  readonly grants: readonly Grant[];
  readonly writes: readonly WriteView[];
  readonly timeline: readonly TimelineEntry[];
  readonly verdict: Verdict;
}

/** Whether the run's data was lost or damaged: a checker found a violation (lost update, order, tokens, forgery). */
export function dataLost(a: RunAnalysis): boolean {
  return !a.verdict.checks.ok;
}

/** What the whole demo proves, per scenario, computed from the runs' histories. */
export interface DemoHeadline {
  /** Scenarios with both runs. */
  readonly scenarios: number;
  /** Of those, how many lost or damaged data in the unprotected run, and in the fenced run. */
  readonly unprotectedLost: number;
  readonly fencedLost: number;
  /** One line: `the lock alone lost data in 5 of 6 scenarios; with fenced, 0 of 6`. */
  readonly text: string;
}

export function demoHeadline(analyses: readonly RunAnalysis[]): DemoHeadline {
  const ids = [...new Set(analyses.map((a) => a.record.scenario))];
  const both = ids.filter((id) =>
    (['unprotected', 'fenced'] as const).every((mode) =>
      analyses.some((a) => a.record.scenario === id && a.record.mode === mode),
    ),
  );
  const lostIn = (mode: 'unprotected' | 'fenced'): number =>
    both.filter((id) =>
      analyses.some((a) => a.record.scenario === id && a.record.mode === mode && dataLost(a)),
    ).length;
  const unprotectedLost = lostIn('unprotected');
  const fencedLost = lostIn('fenced');
  const m = both.length;
  // F20's unprotected run is fenced without signatures: "alone" then means tokens without proofs.
  const alone = both.includes('F20')
    ? 'the lock alone (in F20: tokens without signatures)'
    : 'the lock alone';
  const text = `${alone} lost data in ${unprotectedLost} of ${m} scenario${m === 1 ? '' : 's'}; with fenced, ${fencedLost} of ${m}`;
  return { scenarios: m, unprotectedLost, fencedLost, text };
}

const REFUSAL_CODES = new Set(['STALE_TOKEN', 'INVALID_PROOF']);

function isRefusal(op: OpRecord): boolean {
  return (
    !op.outcome.ok &&
    (REFUSAL_CODES.has(op.outcome.code ?? '') || op.outcome.status === 409 || op.outcome.status === 403)
  );
}

/** Whether the run's workers used the coordinator and the guard (every fenced run, and both runs of F20). */
function isGuarded(record: RunRecord): boolean {
  return record.mode === 'fenced' || record.protection === 'signatures';
}

/** `1846123456789012345` → `…012345`: tokens are 19 digits; the tail tells them apart on a timeline. */
export function shortToken(token: string | bigint): string {
  const text = token.toString();
  return text.length > 8 ? `…${text.slice(-6)}` : text;
}

/**
 * Judges one run from its recorded history, with the checkers of @fenced/test-utils: tokens (G2), commit order
 * (G1/G3: no write of an older grant after a newer one) and the lost-update counter (G4). The verdict is
 * what the history shows, never what the scenario meant to show.
 */
export function analyseRun(record: RunRecord): RunAnalysis {
  const ops = [...record.ops].sort((a, b) => a.outcome.startedAt - b.outcome.startedAt);
  const end = record.endedAt;

  const grants: Grant[] = [];
  for (const op of ops) {
    const lease = op.outcome.lease;
    if (op.op !== 'acquire' || !op.outcome.ok || !lease) continue;
    const number = grants.length + 1;
    const release = ops.find(
      (o) => o.op === 'release' && o.worker === op.worker && o.leaseRef === lease.leaseRef,
    );
    const token = lease.token !== undefined ? BigInt(lease.token) : BigInt(number);
    grants.push({
      worker: op.worker,
      leaseRef: lease.leaseRef,
      number,
      token,
      label: lease.token !== undefined ? `token ${shortToken(lease.token)}` : `grant #${number}`,
      requestedAt: op.outcome.startedAt,
      grantedAt: op.outcome.endedAt,
      validityMs: lease.validityMs,
      validUntil: lease.validUntil,
      heldUntil: release?.outcome.startedAt ?? end,
    });
  }
  const grantOf = (leaseRef: string | undefined): Grant | undefined =>
    grants.find((g) => g.leaseRef === leaseRef);

  const history = toHistory(record, ops, grantOf);
  const tokens = checkTokens(history);
  const order = checkCommitOrder(history);
  const counter = checkCounter(history, {
    resource: record.resource,
    final: record.final?.value ?? 0,
    op: 'increment',
  });
  // Token provenance (F20): every committed token was granted, and every stale refusal had a real grant above it.
  const provenance = checkGrantedTokens(history);
  const checks = combine({ tokens, 'commit order': order, 'lost update': counter, provenance });
  const overlaps = reportOverlaps(history, { honourValidity: true }).overlaps;

  const writes = classifyWrites(record, ops, grantOf);
  const timeline = buildTimeline(record, ops, grants, writes, grantOf);
  const verdict = judge(record, ops, writes, checks, overlaps);
  return { record, grants, writes, timeline, verdict };
}

function toHistory(
  record: RunRecord,
  ops: readonly OpRecord[],
  grantOf: (ref: string | undefined) => Grant | undefined,
): HistoryData {
  const events: HistoryEvent[] = [];
  const resource = record.resource;
  ops.forEach((o, index) => {
    const call = index + 1;
    const grant = o.op === 'acquire' ? grantOf(o.outcome.lease?.leaseRef) : grantOf(o.leaseRef);
    const lease: { token?: bigint; leaseId?: string } = grant
      ? { token: grant.token, leaseId: grant.leaseRef }
      : {};
    const op =
      o.op === 'write'
        ? 'increment'
        : o.op === 'read'
          ? isGuarded(record)
            ? 'fence' // a guarded read: it raised the fence, and G3 applies to it as to a write
            : 'read'
          : o.op;
    // A forged write presents its own token: that is the token the guard saw, and the one the checkers judge.
    if (o.forgedToken !== undefined && 'token' in lease) lease.token = BigInt(o.forgedToken);
    events.push({ kind: 'invoke', process: o.worker, op, resource, t: o.outcome.startedAt, call, ...lease });
    const kind = o.outcome.ok ? 'ok' : o.op === 'write' && !isRefusal(o) ? 'unknown' : 'fail';
    const fields = o.outcome.ok
      ? {
          ...lease,
          ...(o.op === 'write' && o.value !== undefined ? { value: o.value } : {}),
          ...(o.op === 'acquire' && grant ? { validityMs: grant.validityMs } : {}),
        }
      : { ...lease, error: o.outcome.code ?? 'ERROR' };
    events.push({ kind, process: o.worker, op, resource, t: o.outcome.endedAt, call, ...fields });
  });
  const commits: CommitRecord[] = [];
  for (const entry of record.log) {
    const token = entry.token ?? grantOf(entry.leaseRef)?.token;
    if (token === undefined) continue;
    commits.push({
      resource,
      token,
      leaseId: entry.leaseRef,
      process: entry.worker,
      value: entry.value,
      seq: entry.seq,
    });
  }
  return { events, commits };
}

function classifyWrites(
  record: RunRecord,
  ops: readonly OpRecord[],
  grantOf: (ref: string | undefined) => Grant | undefined,
): WriteView[] {
  // Walk the committed writes in commit order: one below the high-water mark of earlier commits is stale.
  const staleSeqs = new Map<number, string>();
  let high: { token: bigint; worker: string; label: string } | undefined;
  for (const entry of record.log) {
    const grant = grantOf(entry.leaseRef);
    const token = entry.token ?? grant?.token;
    if (token === undefined) continue;
    const label = grant?.label ?? `token ${shortToken(token)}`;
    if (high && token < high.token) {
      staleSeqs.set(
        entry.seq,
        `it overwrote ${high.worker}'s newer write (${high.label}) with a value computed before it`,
      );
    } else if (!high || token > high.token) {
      high = { token, worker: entry.worker, label };
    }
  }
  const unmatched = [...record.log];
  return ops
    .filter((o) => o.op === 'write')
    .map((o): WriteView => {
      const grant = grantOf(o.leaseRef);
      const base = {
        worker: o.worker,
        startedAt: o.outcome.startedAt,
        endedAt: o.outcome.endedAt,
        value: o.value ?? 0,
        via: o.via ?? 'db',
        grant,
      };
      if (o.outcome.ok) {
        const at = unmatched.findIndex(
          (e) => e.worker === o.worker && e.leaseRef === o.leaseRef && e.value === o.value,
        );
        const entry = at >= 0 ? unmatched.splice(at, 1)[0] : undefined;
        const stale = entry ? staleSeqs.get(entry.seq) : undefined;
        if (o.forgedToken !== undefined)
          return {
            ...base,
            status: 'forged-accepted',
            detail: `the fence is now at ${o.forgedToken}, above every token the coordinator has granted: every later holder is refused`,
          };
        return stale
          ? { ...base, status: 'stale-accepted', detail: stale }
          : { ...base, status: 'committed', detail: '' };
      }
      if (isRefusal(o)) {
        const { presented, current } = o.outcome;
        const detail =
          o.outcome.code === 'INVALID_PROOF'
            ? `INVALID_PROOF: ${o.outcome.message ?? ''}`
            : presented !== undefined && current !== undefined
              ? `${o.outcome.status === 409 ? 'HTTP 409 ' : ''}STALE_TOKEN: presented ${shortToken(presented)}, the fence is at ${shortToken(current)}`
              : (o.outcome.message ?? 'STALE_TOKEN');
        return { ...base, status: 'refused', detail };
      }
      return {
        ...base,
        status: 'failed',
        detail: `${o.outcome.code ?? 'ERROR'}: ${o.outcome.message ?? ''}`,
      };
    });
}

/** A failed acquire that did not wait and still took longer than the ttl: its grant came back too late. */
function lateGrants(record: RunRecord, ops: readonly OpRecord[]): OpRecord[] {
  return ops.filter(
    (o) =>
      o.op === 'acquire' &&
      !o.outcome.ok &&
      (o.waitMs ?? 0) === 0 &&
      o.outcome.endedAt - o.outcome.startedAt > record.ttlMs,
  );
}

function judge(
  record: RunRecord,
  ops: readonly OpRecord[],
  writes: readonly WriteView[],
  checks: CheckResult,
  overlaps: readonly { a: { process: string }; b: { process: string }; fromMs: number; toMs: number }[],
): Verdict {
  const expectation = record.mode === 'unprotected' ? 'anomaly' : 'safe';
  const findings: string[] = [];
  const acknowledged = writes.filter(
    (w) => w.status === 'committed' || w.status === 'stale-accepted' || w.status === 'forged-accepted',
  );
  const final = record.final?.value;
  findings.push(
    `final counter = ${final ?? '?'}${record.final?.writer ? ` (last written by ${record.final.writer})` : ''}; ` +
      `${acknowledged.length} increment${acknowledged.length === 1 ? '' : 's'} acknowledged` +
      (acknowledged.length > 0 ? ` (${acknowledged.map((w) => w.worker).join(', ')})` : ''),
  );
  const stale = writes.filter((w) => w.status === 'stale-accepted');
  for (const w of stale)
    findings.push(
      `stale write accepted: ${w.worker}'s write of ${w.value} (${w.grant?.label ?? '?'}) — ${w.detail}`,
    );
  for (const w of writes.filter((v) => v.status === 'forged-accepted'))
    findings.push(`forged write accepted: ${w.worker}'s write of ${w.value} — ${w.detail}`);
  const refused = writes.filter((w) => w.status === 'refused');
  for (const w of refused)
    findings.push(
      `${w.detail.startsWith('INVALID_PROOF') ? 'forged write' : 'stale write'} refused: ${w.worker}'s write of ${w.value} — ${w.detail}; nothing was written`,
    );
  const refusedReads = ops.filter((o) => o.op === 'read' && isRefusal(o));
  for (const r of refusedReads) findings.push(`stale read refused: ${r.worker} — ${r.outcome.message ?? ''}`);
  const late = lateGrants(record, ops);
  for (const o of late)
    findings.push(
      `late grant discarded: ${o.worker}'s acquire came back after ${Math.round(o.outcome.endedAt - o.outcome.startedAt)} ms, ` +
        `past the ${record.ttlMs} ms ttl, so ${o.worker} got no lease`,
    );
  for (const o of overlaps)
    findings.push(
      `${o.a.process} and ${o.b.process} both held a valid lease for ${Math.round(o.toMs - o.fromMs)} ms (the lock alone did not exclude)`,
    );
  const failed = writes.filter((w) => w.status === 'failed');
  for (const w of failed) findings.push(`${w.worker}'s write failed: ${w.detail}`);

  const lost = checks.violations.some((v) => v.startsWith('lost update:'));
  const outOfOrder = checks.violations.some((v) => v.startsWith('commit order:'));
  const anomaly = !checks.ok;
  const what = [
    lost ? 'lost update' : '',
    outOfOrder ? 'a stale write committed after a newer one' : '',
    checks.violations.some((v) => v.startsWith('tokens:')) ? 'token order broken' : '',
    checks.violations.some((v) => v.startsWith('provenance:'))
      ? 'a token nobody was granted raised the fence, locking honest holders out'
      : '',
  ]
    .filter(Boolean)
    .join(' + ');

  if (record.error !== undefined) {
    return {
      expectation,
      passed: false,
      label: 'BROKEN',
      headline: `the orchestration failed, so the run proves nothing: ${record.error}`,
      findings,
      checks,
    };
  }
  if (expectation === 'anomaly') {
    const increments = `${acknowledged.length} increments acknowledged, the counter went from 0 to ${final ?? '?'}`;
    return anomaly
      ? {
          expectation,
          passed: true,
          label: 'data lost',
          headline: `${what}: ${increments}`,
          findings,
          checks,
        }
      : {
          expectation,
          passed: false,
          label: 'NO ANOMALY',
          headline: `the lock alone was not broken this time (${increments}): the orchestration failed to provoke the fault`,
          findings,
          checks,
        };
  }
  const stopped = refused.length + refusedReads.length + late.length;
  if (anomaly) {
    return {
      expectation,
      passed: false,
      label: 'UNSAFE',
      headline: `the fenced run let the anomaly through: ${what}`,
      findings,
      checks,
    };
  }
  const forged = refused.filter((w) => w.detail.startsWith('INVALID_PROOF'));
  const staleRefused = refused.length - forged.length;
  const how = [
    staleRefused > 0
      ? `${staleRefused === 1 ? 'stale write' : `${staleRefused} stale writes`} refused by the fence`
      : '',
    forged.length > 0
      ? `${forged.length === 1 ? 'forged write' : `${forged.length} forged writes`} refused: no valid proof`
      : '',
    refusedReads.length > 0 ? 'stale read refused by the fence' : '',
    late.length > 0 ? 'late grant discarded by the coordinator' : '',
  ]
    .filter(Boolean)
    .join(', ');
  if (stopped === 0) {
    return {
      expectation,
      passed: false,
      label: 'NOT EXERCISED',
      headline: 'no stale attempt happened, so the protection was not exercised',
      findings,
      checks,
    };
  }
  return {
    expectation,
    passed: true,
    label: 'safe',
    headline: `${how}; data intact: counter = ${final ?? '?'} = acknowledged increments, in grant order`,
    findings,
    checks,
  };
}

function buildTimeline(
  record: RunRecord,
  ops: readonly OpRecord[],
  grants: readonly Grant[],
  writes: readonly WriteView[],
  grantOf: (ref: string | undefined) => Grant | undefined,
): TimelineEntry[] {
  const entries: TimelineEntry[] = [];
  const add = (t: number, lane: Lane, text: string, tone: Tone = 'info'): void => {
    entries.push({ t, lane, text, tone });
  };
  const fenced = isGuarded(record);
  const lockWord = fenced ? 'lease' : 'lock';

  for (const o of ops) {
    const { startedAt, endedAt, ok } = o.outcome;
    switch (o.op) {
      case 'acquire': {
        const wait = (o.waitMs ?? 0) > 0 ? `, waiting up to ${o.waitMs} ms` : '';
        add(startedAt, o.worker, `acquire ${record.resource} (ttl ${o.ttlMs} ms${wait})`, 'muted');
        const grant = grantOf(o.outcome.lease?.leaseRef);
        const took = Math.round(endedAt - startedAt);
        if (ok && grant) {
          const id = fenced ? `token ${o.outcome.lease?.token ?? '?'}` : `grant #${grant.number} (no token)`;
          if (grant.validityMs <= 0)
            add(
              endedAt,
              o.worker,
              `${lockWord} granted after ${took} ms — ${id} — although it expired ${-grant.validityMs} ms ago: plain Redlock hands it out anyway`,
              'bad',
            );
          else
            add(
              endedAt,
              o.worker,
              `${lockWord} granted after ${took} ms — ${id}, valid for ${grant.validityMs} ms`,
              'good',
            );
        } else if (!ok) {
          const late = (o.waitMs ?? 0) === 0 && took > record.ttlMs;
          add(
            endedAt,
            o.worker,
            late
              ? // Paused, the worker read the replies only after its node timers had run out: the library's error
                // then names timeouts, while what happened is a grant that came too late and was discarded.
                `not granted: the grant came back after ${took} ms, past the ${o.ttlMs} ms ttl, so the coordinator discarded it and released it on the nodes (the library reports ${o.outcome.code ?? 'an error'}: ${o.worker}'s node timers ran out while it was paused)`
              : `not granted after ${took} ms: ${o.outcome.code}: ${o.outcome.message ?? ''}`,
            late ? 'good' : 'warn',
          );
        }
        break;
      }
      case 'read': {
        const grant = grantOf(o.leaseRef);
        if (ok)
          add(
            endedAt,
            o.worker,
            `read counter = ${o.outcome.value}${fenced && grant ? ` (guarded, ${grant.label}: fenced in)` : ' (plain SELECT)'}`,
          );
        else
          add(
            endedAt,
            o.worker,
            `read refused: ${o.outcome.code}: ${o.outcome.message ?? ''}`,
            isRefusal(o) ? 'good' : 'warn',
          );
        break;
      }
      case 'write': {
        const grant = grantOf(o.leaseRef);
        const how =
          o.via === 'http'
            ? fenced
              ? 'PUT /counters (Fencing-Token header)'
              : 'PUT /counters'
            : fenced
              ? 'guarded UPDATE'
              : 'plain UPDATE';
        const expired =
          grant && startedAt > grant.validUntil
            ? ` — its ${lockWord} expired ${Math.round(startedAt - grant.validUntil)} ms ago, it does not know`
            : '';
        const forgedNote =
          o.forgedToken !== undefined ? `, presenting the FORGED token ${o.forgedToken}` : '';
        add(
          startedAt,
          o.worker,
          `write counter := ${o.value} (${how}, ${grant?.label ?? 'no lease'}${forgedNote})${expired}`,
          o.forgedToken !== undefined ? 'warn' : 'info',
        );
        const view = writes.find((w) => w.worker === o.worker && w.startedAt === startedAt);
        if (view?.status === 'committed') add(endedAt, o.worker, `✓ committed: counter = ${o.value}`, 'good');
        else if (view?.status === 'stale-accepted')
          add(endedAt, o.worker, `✗ STALE WRITE ACCEPTED: counter = ${o.value} — ${view.detail}`, 'bad');
        else if (view?.status === 'forged-accepted')
          add(endedAt, o.worker, `✗ FORGED TOKEN ACCEPTED: counter = ${o.value} — ${view.detail}`, 'bad');
        else if (view?.status === 'refused')
          add(endedAt, o.worker, `✓ REFUSED: ${view.detail}; nothing written`, 'good');
        else add(endedAt, o.worker, `write failed: ${view?.detail ?? o.outcome.message ?? ''}`, 'warn');
        break;
      }
      case 'release':
        if (o.leaseRef !== undefined) add(startedAt, o.worker, `release`, 'muted');
        break;
    }
  }
  for (const g of grants) {
    if (g.validUntil > g.grantedAt && g.validUntil < g.heldUntil && g.validUntil < record.endedAt)
      add(
        g.validUntil,
        g.worker,
        `${g.worker}'s ${lockWord} (${g.label}) has expired — ${g.worker} does not know`,
        'warn',
      );
  }
  for (const a of record.actions) {
    const tone: Tone = a.kind === 'note' ? 'info' : 'warn';
    const icon = a.kind === 'pause' ? '⏸ ' : a.kind === 'note' ? '' : '⚡ ';
    add(a.t, a.lane, `${icon}${a.text}`, tone);
    if (a.until !== undefined) {
      const lasted = Math.round(a.until - a.t);
      const endIcon = a.kind === 'pause' ? '▶ ' : '⚡ ';
      add(a.until, a.lane, `${endIcon}${a.endText ?? 'ends'} (after ${lasted} ms)`, 'warn');
    }
  }
  return entries.sort((x, y) => x.t - y.t);
}
