import { operations, type CommitRecord, type HistoryData, type Op, type Operation } from './history.js';

/**
 * A checker's verdict. `violations` break a promise of DESIGN §1 and make `ok` false; `info` only explains
 * (counts, unverifiable cases) and never fails a run.
 */
export interface CheckResult {
  readonly ok: boolean;
  readonly violations: string[];
  readonly info: string[];
}

function result(violations: string[], info: string[]): CheckResult {
  return { ok: violations.length === 0, violations, info };
}

/** Merges named results; every line is prefixed with its checker's name. */
export function combine(results: Record<string, CheckResult>): CheckResult {
  const violations: string[] = [];
  const info: string[] = [];
  for (const [name, r] of Object.entries(results)) {
    violations.push(...r.violations.map((v) => `${name}: ${v}`));
    info.push(...r.info.map((i) => `${name}: ${i}`));
  }
  return result(violations, info);
}

const ms = (t: number): string => (Number.isFinite(t) ? `${t.toFixed(1)} ms` : 'never');

function describe(o: Operation): string {
  const parts = [o.process];
  if (o.leaseId !== undefined) parts.push(`lease ${o.leaseId}`);
  if (o.token !== undefined) parts.push(`token ${o.token}`);
  return `${o.op} by ${parts.join(', ')} [${ms(o.invokedAt)}..${ms(o.completedAt)}]`;
}

function groupBy<T>(items: Iterable<T>, key: (item: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const group = groups.get(k);
    if (group) group.push(item);
    else groups.set(k, [item]);
  }
  return groups;
}

/** Same grant: the same lease when both name one, else the same operation. */
function sameGrant(a: Operation, b: Operation): boolean {
  if (a.leaseId !== undefined && b.leaseId !== undefined) return a.leaseId === b.leaseId;
  return a === b;
}

/**
 * For operations that completed `ok` with a token, visits each one with the completed-before-it-started
 * operation of highest token (real-time order: A.completedAt < B.invokedAt).
 */
function sweepRealTime(ops: Operation[], visit: (b: Operation, highest: Operation | null) => void): void {
  const byCompletion = [...ops].sort((x, y) => x.completedAt - y.completedAt);
  const byInvoke = [...ops].sort((x, y) => x.invokedAt - y.invokedAt);
  let highest: Operation | null = null;
  let i = 0;
  for (const b of byInvoke) {
    for (; i < byCompletion.length && byCompletion[i]!.completedAt < b.invokedAt; i++) {
      const a = byCompletion[i]!;
      if (highest === null || a.token! > highest.token!) highest = a;
    }
    visit(b, highest);
  }
}

export interface TokenCheckOptions {
  /** @defaultValue `'acquire'` */
  acquireOp?: Op;
  /** @defaultValue `'extend'` */
  extendOp?: Op;
}

/**
 * G2: every `ok` grant's token is unique per resource, and if grant A completed before grant B was
 * invoked, token(A) < token(B). Also: an extend never changes its lease's token (DESIGN §3).
 */
export function checkTokens(history: HistoryData, options: TokenCheckOptions = {}): CheckResult {
  const acquireOp = options.acquireOp ?? 'acquire';
  const extendOp = options.extendOp ?? 'extend';
  const ops = operations(history);
  const violations: string[] = [];
  const info: string[] = [];
  const grants = ops.filter((o) => o.op === acquireOp && o.outcome === 'ok' && o.token !== undefined);
  const missingToken = ops.filter((o) => o.op === acquireOp && o.outcome === 'ok' && o.token === undefined);
  if (missingToken.length > 0) violations.push(`${missingToken.length} ok grants carry no token`);

  for (const [resource, list] of groupBy(grants, (g) => g.resource)) {
    for (const [token, same] of groupBy(list, (g) => String(g.token))) {
      const distinct = same.filter((g, i) => same.findIndex((h) => sameGrant(g, h)) === i);
      if (distinct.length > 1)
        violations.push(
          `${resource}: token ${token} granted ${distinct.length} times: ${distinct.map(describe).join('; ')}`,
        );
    }
    sweepRealTime(list, (b, a) => {
      if (a !== null && a.token! >= b.token! && !sameGrant(a, b))
        violations.push(
          `${resource}: ${describe(b)} started after ${describe(a)} completed, yet its token is not larger`,
        );
    });
    const tokens = list.map((g) => g.token!).sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
    info.push(`${resource}: ${list.length} grants, tokens ${tokens[0]}..${tokens.at(-1)}`);
  }

  const tokenOfLease = new Map<string, bigint>();
  for (const g of grants) if (g.leaseId !== undefined) tokenOfLease.set(g.leaseId, g.token!);
  for (const e of ops) {
    if (e.op !== extendOp || e.outcome !== 'ok' || e.token === undefined || e.leaseId === undefined) continue;
    const granted = tokenOfLease.get(e.leaseId);
    if (granted !== undefined && granted !== e.token)
      violations.push(`${e.resource}: ${describe(e)} changed the lease's token from ${granted}`);
  }

  const unknown = ops.filter((o) => o.op === acquireOp && o.outcome === 'unknown').length;
  if (unknown > 0) info.push(`${unknown} acquires with unknown outcome (not checked)`);
  return result(violations, info);
}

export interface CommitCheckOptions {
  /** Operations that are guarded transactions, for the real-time check. @defaultValue `['write', 'increment', 'fence']` */
  writeOps?: readonly Op[];
  /** @defaultValue `'acquire'` */
  acquireOp?: Op;
}

/**
 * G1 and G3, three ways:
 * - commit records, in commit order per resource: tokens never go below the high-water mark, and an equal
 *   token comes only from the lease that set it;
 * - events, in real time: a guarded write invoked after another write with a higher token completed `ok`
 *   (the new holder had fenced in) must not complete `ok` itself;
 * - by grant order, whatever the tokens say: once a grant has fenced in, no grant that completed before it
 *   started commits again (commit records and write events; needs lease ids on grants and commits).
 */
export function checkCommitOrder(history: HistoryData, options: CommitCheckOptions = {}): CheckResult {
  const writeOps = new Set<Op>(options.writeOps ?? ['write', 'increment', 'fence']);
  const acquireOp = options.acquireOp ?? 'acquire';
  const violations: string[] = [];
  const info: string[] = [];

  let unverifiedEqual = 0;
  for (const [resource, list] of groupBy(commitOrder(history.commits), (c) => c.resource)) {
    let high: { record: CommitRecord; position: number } | null = null;
    for (const [position, c] of list.entries()) {
      if (high === null || c.token > high.record.token) {
        high = { record: c, position };
        continue;
      }
      const h = high.record;
      if (c.token < h.token)
        violations.push(
          `${resource}: commit #${position} (${commitLabel(c)}) has a token below the high-water mark ${h.token} set by commit #${high.position} (${commitLabel(h)})`,
        );
      else if (c.leaseId === undefined || h.leaseId === undefined) unverifiedEqual++;
      else if (c.leaseId !== h.leaseId)
        violations.push(
          `${resource}: commit #${position} (${commitLabel(c)}) reuses token ${c.token} of another lease (${commitLabel(h)}, commit #${high.position})`,
        );
    }
    info.push(`${resource}: ${list.length} commits`);
  }
  if (unverifiedEqual > 0)
    info.push(`${unverifiedEqual} equal-token commits without lease ids (lease not checked)`);

  const ops = operations(history);
  const writes = ops.filter((o) => writeOps.has(o.op) && o.outcome === 'ok' && o.token !== undefined);
  for (const [resource, list] of groupBy(writes, (w) => w.resource)) {
    sweepRealTime(list, (b, a) => {
      if (a === null || sameGrant(a, b) || a.token! < b.token!) return;
      if (a.token! > b.token!)
        violations.push(`${resource}: ${describe(b)} committed after ${describe(a)} had fenced in`);
      else if (a.leaseId !== undefined && b.leaseId !== undefined)
        violations.push(`${resource}: ${describe(b)} reused the token of ${describe(a)}, another lease`);
    });
  }

  violations.push(...laterGrantFencedIn(history.commits, ops, writeOps, acquireOp));

  const granted = new Set(
    ops
      .filter((o) => o.op === acquireOp && o.token !== undefined)
      .map((o) => `${o.resource}\u0000${o.token}`),
  );
  if (granted.size > 0) {
    const orphans = history.commits.filter((c) => !granted.has(`${c.resource}\u0000${c.token}`)).length;
    if (orphans > 0) info.push(`${orphans} commits carry a token no recorded acquire returned`);
  }
  return result(violations, info);
}

/**
 * G3 by grant order, independent of the tokens: if grant A completed before grant B was invoked (real time), then
 * once B has fenced in (a guarded transaction of B's lease committed) no guarded transaction of A's lease may
 * commit. Checked on the commit records (commit order) and on the write events (real time). Needs lease ids on
 * the grants and on the commits or writes; anything without one is skipped. Tokens are what the guard compares,
 * so when the tokens themselves are wrong (a later grant with a lower token) only this check sees the zombie.
 */
function laterGrantFencedIn(
  commits: readonly CommitRecord[],
  ops: readonly Operation[],
  writeOps: ReadonlySet<Op>,
  acquireOp: Op,
): string[] {
  const violations: string[] = [];
  const grants = new Map<string, Operation>();
  for (const o of ops)
    if (o.op === acquireOp && o.outcome === 'ok' && o.leaseId !== undefined)
      grants.set(`${o.resource}\u0000${o.leaseId}`, o);
  const grantOf = (resource: string, leaseId: string | undefined): Operation | undefined =>
    leaseId === undefined ? undefined : grants.get(`${resource}\u0000${leaseId}`);
  if (grants.size === 0) return violations;

  // Commit order: the latest-starting grant that has fenced in so far, per resource.
  for (const [resource, list] of groupBy(commitOrder(commits), (c) => c.resource)) {
    let latest: { grant: Operation; position: number; commit: CommitRecord } | null = null;
    for (const [position, c] of list.entries()) {
      const grant = grantOf(resource, c.leaseId);
      if (grant === undefined) continue;
      if (
        latest !== null &&
        grant.leaseId !== latest.grant.leaseId &&
        grant.completedAt < latest.grant.invokedAt
      )
        violations.push(
          `${resource}: commit #${position} (${commitLabel(c)}) is of ${describe(grant)}, which completed before ${describe(latest.grant)} started, yet it committed after that grant had fenced in (commit #${latest.position}, ${commitLabel(latest.commit)})`,
        );
      if (latest === null || grant.invokedAt > latest.grant.invokedAt)
        latest = { grant, position, commit: c };
    }
  }

  // Real time: a write invoked after a later grant's write completed ok must not complete ok itself.
  const writes = ops.filter((o) => writeOps.has(o.op) && o.outcome === 'ok' && o.leaseId !== undefined);
  for (const [resource, list] of groupBy(writes, (w) => w.resource)) {
    const byCompletion = [...list].sort((x, y) => x.completedAt - y.completedAt);
    const byInvoke = [...list].sort((x, y) => x.invokedAt - y.invokedAt);
    let latest: { grant: Operation; write: Operation } | null = null;
    let i = 0;
    for (const w of byInvoke) {
      for (; i < byCompletion.length && byCompletion[i]!.completedAt < w.invokedAt; i++) {
        const done = byCompletion[i]!;
        const grant = grantOf(resource, done.leaseId);
        if (grant !== undefined && (latest === null || grant.invokedAt > latest.grant.invokedAt))
          latest = { grant, write: done };
      }
      const grant = grantOf(resource, w.leaseId);
      if (
        grant !== undefined &&
        latest !== null &&
        grant.leaseId !== latest.grant.leaseId &&
        grant.completedAt < latest.grant.invokedAt
      )
        violations.push(
          `${resource}: ${describe(w)} of a grant that completed before ${describe(latest.grant)} started committed after ${describe(latest.write)} had fenced in`,
        );
    }
  }
  return violations;
}

function commitOrder(commits: readonly CommitRecord[]): CommitRecord[] {
  if (commits.every((c) => c.seq !== undefined)) return [...commits].sort((a, b) => a.seq! - b.seq!);
  return [...commits];
}

function commitLabel(c: CommitRecord): string {
  const parts = [`token ${c.token}`];
  if (c.leaseId !== undefined) parts.push(`lease ${c.leaseId}`);
  if (c.process !== undefined) parts.push(c.process);
  if (c.opId !== undefined) parts.push(`op ${c.opId}`);
  return parts.join(', ');
}

export interface GrantedTokenOptions {
  /** @defaultValue `'acquire'` */
  acquireOp?: Op;
  /** Guarded writes whose refusals are checked. @defaultValue `['write', 'increment', 'fence']` */
  writeOps?: readonly Op[];
}

/**
 * Token provenance (F20, DESIGN §4b): the guard must only ever have been raised by tokens the coordinator
 * granted. Two views of the same breach:
 * - every commit record carries a token that an `ok` acquire of its resource returned, and from that grant's
 *   lease when both name one (a forged 2^63 − 1, or another resource's token, is a violation);
 * - a guarded write refused as stale (`error` starting with `STALE_TOKEN`) must have been overtaken by a real
 *   grant: some `ok` acquire of the resource with a larger token was invoked before the refusal. A refusal with
 *   no such grant means a fence above every granted token — an honest holder locked out by a forged fence (the
 *   resource is bricked).
 * Needs every grant of the resources in the history: record every acquire.
 */
export function checkGrantedTokens(history: HistoryData, options: GrantedTokenOptions = {}): CheckResult {
  const acquireOp = options.acquireOp ?? 'acquire';
  const writeOps = new Set<Op>(options.writeOps ?? ['write', 'increment', 'fence']);
  const ops = operations(history);
  const grants = ops.filter((o) => o.op === acquireOp && o.outcome === 'ok' && o.token !== undefined);
  const violations: string[] = [];
  const info: string[] = [];

  const byToken = groupBy(grants, (g) => `${g.resource}\u0000${g.token}`);
  for (const c of commitOrder(history.commits)) {
    const granted = byToken.get(`${c.resource}\u0000${c.token}`);
    if (granted === undefined)
      violations.push(
        `${c.resource}: commit of ${commitLabel(c)}: no grant of this resource has token ${c.token}`,
      );
    else if (
      c.leaseId !== undefined &&
      granted.every((g) => g.leaseId !== undefined && g.leaseId !== c.leaseId)
    )
      violations.push(
        `${c.resource}: commit of ${commitLabel(c)}: token ${c.token} was granted to another lease`,
      );
  }

  const refusals = ops.filter(
    (o) =>
      writeOps.has(o.op) &&
      o.outcome === 'fail' &&
      o.token !== undefined &&
      typeof o.error === 'string' &&
      o.error.startsWith('STALE_TOKEN'),
  );
  for (const r of refusals) {
    const overtaken = grants.some(
      (g) => g.resource === r.resource && g.token! > r.token! && g.invokedAt < r.completedAt,
    );
    if (!overtaken)
      violations.push(
        `${r.resource}: ${describe(r)} was refused as stale, yet no grant with a larger token existed: the fence was raised by a token nobody was granted`,
      );
  }
  info.push(
    `${history.commits.length} commits, ${refusals.length} stale refusals checked against ${grants.length} grants`,
  );
  return result(violations, info);
}

export interface CounterCheckOptions {
  /** The counter's resource. */
  resource: string;
  /** The counter's value read from the database at the end of the run. */
  final: number | bigint;
  /** The counter's value before the run. @defaultValue `0` */
  initial?: number | bigint;
  /** @defaultValue `'increment'` */
  op?: Op;
}

/**
 * G4, the lost-update counter: every accepted increment is in the final value, and nothing else is. The
 * final value must lie between the `ok` increments and those plus the ones whose outcome is unknown. When
 * `ok` increments report the value they wrote (`value`), two that wrote the same value prove a lost update
 * even if a retry hid it from the final count; commit records with numeric values must count up by one.
 */
export function checkCounter(history: HistoryData, options: CounterCheckOptions): CheckResult {
  const op = options.op ?? 'increment';
  const initial = BigInt(options.initial ?? 0);
  const final = BigInt(options.final) - initial;
  const ops = operations(history).filter((o) => o.op === op && o.resource === options.resource);
  const ok = ops.filter((o) => o.outcome === 'ok');
  const maybe = ops.filter((o) => o.outcome === 'unknown').length;
  const violations: string[] = [];
  const info = [`${options.resource}: final ${options.final}, ${ok.length} increments ok, ${maybe} unknown`];

  if (final < BigInt(ok.length))
    violations.push(
      `${options.resource}: lost update: the counter rose by ${final}, but ${ok.length} increments were acknowledged`,
    );
  if (final > BigInt(ok.length + maybe))
    violations.push(
      `${options.resource}: the counter rose by ${final}, more than the ${ok.length} acknowledged + ${maybe} unknown increments`,
    );

  for (const [value, same] of groupBy(
    ok.filter((o) => typeof o.value === 'number' || typeof o.value === 'bigint'),
    (o) => String(o.value),
  )) {
    if (same.length > 1)
      violations.push(
        `${options.resource}: ${same.length} increments all wrote ${value}: ${same.map(describe).join('; ')}`,
      );
  }

  const committed = commitOrder(history.commits).filter(
    (c) => c.resource === options.resource && (typeof c.value === 'number' || typeof c.value === 'bigint'),
  );
  for (let i = 1; i < committed.length; i++) {
    const prev = BigInt(committed[i - 1]!.value as number | bigint);
    const cur = BigInt(committed[i]!.value as number | bigint);
    if (cur !== prev + 1n)
      violations.push(
        `${options.resource}: commit #${i} (${commitLabel(committed[i]!)}) wrote ${cur} after ${prev}: not a serial run`,
      );
  }
  return result(violations, info);
}

export interface ExactlyOnceOptions {
  /**
   * How often each operation id took effect, e.g. counted from the data at the end of the run. When absent,
   * counted from the commit records' `opId`.
   */
  applied?: ReadonlyMap<string, number> | Readonly<Record<string, number>>;
}

/**
 * G5: an operation id takes effect at most once, however often it was retried, and an operation id that was
 * acknowledged (`ok`) took effect.
 */
export function checkExactlyOnce(history: HistoryData, options: ExactlyOnceOptions = {}): CheckResult {
  const applied = new Map<string, number>();
  const given = options.applied;
  if (given) {
    const entries: Iterable<[string, number]> =
      given instanceof Map ? (given as ReadonlyMap<string, number>).entries() : Object.entries(given);
    for (const [id, n] of entries) applied.set(id, n);
  } else
    for (const c of history.commits)
      if (c.opId !== undefined) applied.set(c.opId, (applied.get(c.opId) ?? 0) + 1);

  const violations: string[] = [];
  const info: string[] = [];
  const ops = operations(history).filter((o) => o.opId !== undefined);
  const byId = groupBy(ops, (o) => o.opId!);

  for (const [id, n] of applied) if (n > 1) violations.push(`operation ${id} took effect ${n} times`);
  for (const [id, attempts] of byId) {
    if (attempts.some((a) => a.outcome === 'ok') && (applied.get(id) ?? 0) === 0)
      violations.push(`operation ${id} was acknowledged but never took effect`);
  }
  const retried = [...byId.values()].filter((a) => a.length > 1).length;
  info.push(`${byId.size} operation ids, ${retried} retried, ${applied.size} applied`);
  const unseen = [...applied.keys()].filter((id) => !byId.has(id)).length;
  if (unseen > 0) info.push(`${unseen} applied operation ids never appear in the events`);
  return result(violations, info);
}

export interface LeaseInterval {
  readonly resource: string;
  readonly process: string;
  readonly leaseId?: string;
  readonly token?: bigint;
  /** When the holder learned it had the lease (acquire completed). */
  readonly from: number;
  /** When it stopped believing so: release invoked, extend failed, validity ran out, or the history ended. */
  readonly to: number;
}

export interface Overlap {
  readonly resource: string;
  readonly a: LeaseInterval;
  readonly b: LeaseInterval;
  readonly fromMs: number;
  readonly toMs: number;
}

export interface OverlapReport extends CheckResult {
  readonly intervals: LeaseInterval[];
  readonly overlaps: Overlap[];
}

export interface OverlapOptions {
  /**
   * End a holding interval when the lease's validity (from the acquire's or the last ok extend's invoke,
   * DESIGN §2) runs out. Off by default: a paused holder (F1) still believes it holds, which is the point.
   * @defaultValue `false`
   */
  honourValidity?: boolean;
  acquireOp?: Op;
  releaseOp?: Op;
  extendOp?: Op;
}

/**
 * Reports when two holders believed they held the same resource at once. Information only: Redlock does not
 * promise mutual exclusion (DESIGN §1), so `ok` is always true; the guard is what must keep data safe.
 */
export function reportOverlaps(history: HistoryData, options: OverlapOptions = {}): OverlapReport {
  const acquireOp = options.acquireOp ?? 'acquire';
  const releaseOp = options.releaseOp ?? 'release';
  const extendOp = options.extendOp ?? 'extend';
  const ops = operations(history);
  const end = history.events.reduce((max, e) => Math.max(max, e.t), 0);
  const leaseKey = (o: Operation): string =>
    o.leaseId !== undefined ? `lease\u0000${o.leaseId}` : `proc\u0000${o.resource}\u0000${o.process}`;

  const intervals: LeaseInterval[] = [];
  for (const grant of ops.filter((o) => o.op === acquireOp && o.outcome === 'ok')) {
    const key = leaseKey(grant);
    const later = ops.filter(
      (o) =>
        o !== grant &&
        o.resource === grant.resource &&
        leaseKey(o) === key &&
        o.invokedAt >= grant.completedAt,
    );
    let to = end;
    const nextGrant = later.find((o) => o.op === acquireOp);
    if (nextGrant) to = Math.min(to, nextGrant.invokedAt);
    const release = later.find((o) => o.op === releaseOp);
    if (release) to = Math.min(to, release.invokedAt);
    const lost = later.find((o) => o.op === extendOp && o.outcome === 'fail');
    if (lost) to = Math.min(to, lost.completedAt);
    if (options.honourValidity && grant.validityMs !== undefined) {
      let validUntil = grant.invokedAt + grant.validityMs;
      for (const e of later)
        if (e.op === extendOp && e.outcome === 'ok' && e.validityMs !== undefined && e.invokedAt < to)
          validUntil = Math.max(validUntil, e.invokedAt + e.validityMs);
      to = Math.min(to, validUntil);
    }
    if (to > grant.completedAt)
      intervals.push({
        resource: grant.resource,
        process: grant.process,
        ...(grant.leaseId !== undefined ? { leaseId: grant.leaseId } : {}),
        ...(grant.token !== undefined ? { token: grant.token } : {}),
        from: grant.completedAt,
        to,
      });
  }

  const overlaps: Overlap[] = [];
  for (const [resource, list] of groupBy(intervals, (i) => i.resource)) {
    const sorted = [...list].sort((x, y) => x.from - y.from);
    const active: LeaseInterval[] = [];
    for (const b of sorted) {
      for (let i = active.length - 1; i >= 0; i--) if (active[i]!.to <= b.from) active.splice(i, 1);
      for (const a of active) overlaps.push({ resource, a, b, fromMs: b.from, toMs: Math.min(a.to, b.to) });
      active.push(b);
    }
  }
  const label = (i: LeaseInterval): string =>
    `${i.process}${i.leaseId !== undefined ? ` lease ${i.leaseId}` : ''}${i.token !== undefined ? ` token ${i.token}` : ''}`;
  const info = overlaps.map(
    (o) =>
      `${o.resource}: ${label(o.a)} and ${label(o.b)} both held it for ${(o.toMs - o.fromMs).toFixed(1)} ms from ${ms(o.fromMs)}`,
  );
  info.unshift(`${intervals.length} holding intervals, ${overlaps.length} overlaps`);
  return { ok: true, violations: [], info, intervals, overlaps };
}
