import { MAX_TOKEN } from '@fenced/shared';
import { MalformedReplyError, NodeCallError } from '../errors.js';

/**
 * The small integer codes the Lua scripts return (see the contract block at the top of each lua/*.lua).
 * One table, one mapping function ({@link interpretReply}); a unit test checks every `return {n` in every
 * script is listed here and mapped.
 */
export const ScriptCode = {
  OK: 1,
  HELD: 2,
  NOT_INITIALIZED: 3,
  CORRUPT: 4,
  REFUSED: 5,
  NO_REPAIR_MARKER: 6,
  /** One call of a batch raised a Redis error; `{7, message}`. Thrown as NodeCallError, never returned. */
  CALL_ERROR: 7,
  /** A repair source holds a repair marker: it is itself under repair and must not be read. */
  UNDER_REPAIR: 8,
  /** A repair source's incarnation changed between two batches of one read: it restarted meanwhile. */
  INCARNATION_CHANGED: 9,
  /** The node holds its incarnation key: there is nothing to repair. */
  INITIALIZED: 10,
  /** Another repair holds the node's repair marker. */
  BUSY: 11,
  /** fresh-init.lua: this initialization's init mark is gone from the node (it restarted, or the marks expired). */
  NO_INIT_MARK: 12,
  /** The caller's seal epoch is not the node's (a repair read the node since): nothing written; `{13, epoch}`. */
  SEALED: 13,
  /** The ttl exceeds the cluster's maxTtlMs recorded on the node: nothing written; `{14, maxTtlMs}`. */
  TTL_ABOVE_MAX: 14,
  /**
   * The caller's nodeCount or key layout is not the cluster's recorded on the node: nothing written, no vote;
   * `{15, field, recorded value}`.
   */
  SETTINGS_MISMATCH: 15,
} as const;
export type ScriptCode = (typeof ScriptCode)[keyof typeof ScriptCode];

export type ScriptName =
  | 'acquire'
  | 'promise'
  | 'extend'
  | 'release'
  | 'inspect'
  | 'repair-marker'
  | 'repair-read'
  | 'repair-read-slot'
  | 'repair-raise'
  | 'finish-repair'
  | 'fold'
  | 'fold-slot'
  | 'fresh-init'
  | 'fresh-init-shard'
  | 'probe-shard'
  | 'settings';

/** The codes each script may return. */
export const SCRIPT_CODES = {
  acquire: [
    ScriptCode.OK,
    ScriptCode.HELD,
    ScriptCode.NOT_INITIALIZED,
    ScriptCode.CORRUPT,
    ScriptCode.CALL_ERROR,
    ScriptCode.SEALED,
    ScriptCode.TTL_ABOVE_MAX,
    ScriptCode.SETTINGS_MISMATCH,
  ],
  promise: [
    ScriptCode.OK,
    ScriptCode.REFUSED,
    ScriptCode.NOT_INITIALIZED,
    ScriptCode.CORRUPT,
    ScriptCode.SEALED,
    ScriptCode.SETTINGS_MISMATCH,
  ],
  extend: [
    ScriptCode.OK,
    ScriptCode.HELD,
    ScriptCode.NOT_INITIALIZED,
    ScriptCode.TTL_ABOVE_MAX,
    ScriptCode.SETTINGS_MISMATCH,
  ],
  release: [ScriptCode.OK, ScriptCode.HELD, ScriptCode.CALL_ERROR],
  inspect: [ScriptCode.OK, ScriptCode.NOT_INITIALIZED],
  'repair-marker': [ScriptCode.OK, ScriptCode.INITIALIZED, ScriptCode.BUSY, ScriptCode.NO_REPAIR_MARKER],
  'repair-read': [
    ScriptCode.OK,
    ScriptCode.NOT_INITIALIZED,
    ScriptCode.UNDER_REPAIR,
    ScriptCode.INCARNATION_CHANGED,
    ScriptCode.CORRUPT,
  ],
  // The same check as repair-read's (include/source-keys.lua); INCARNATION_CHANGED never comes back in practice, as
  // the slot is read whole in one call (no first incarnation to compare), and means what it means there.
  'repair-read-slot': [
    ScriptCode.OK,
    ScriptCode.NOT_INITIALIZED,
    ScriptCode.UNDER_REPAIR,
    ScriptCode.INCARNATION_CHANGED,
    ScriptCode.CORRUPT,
  ],
  'repair-raise': [ScriptCode.OK, ScriptCode.CORRUPT, ScriptCode.NO_REPAIR_MARKER],
  'finish-repair': [ScriptCode.OK, ScriptCode.NO_REPAIR_MARKER],
  fold: [ScriptCode.OK, ScriptCode.BUSY, ScriptCode.NOT_INITIALIZED, ScriptCode.CORRUPT],
  'fold-slot': [ScriptCode.OK, ScriptCode.NOT_INITIALIZED, ScriptCode.CORRUPT],
  'fresh-init': [ScriptCode.OK, ScriptCode.INITIALIZED, ScriptCode.NO_INIT_MARK],
  // Per slot, one character each in its reply (the call itself answers OK).
  'fresh-init-shard': [ScriptCode.OK, ScriptCode.INITIALIZED, ScriptCode.NO_INIT_MARK],
  'probe-shard': [ScriptCode.OK],
  settings: [ScriptCode.OK, ScriptCode.NOT_INITIALIZED],
} as const satisfies Record<ScriptName, readonly ScriptCode[]>;

/** Results shared by several scripts: the node must not vote. */
export type Abstain = { readonly kind: 'not-initialized' } | { readonly kind: 'corrupt' };
/**
 * The call carried a seal epoch that is not the node's (a repair read the node since the caller last looked): it
 * recorded nothing, and did not vote. The caller remembers `epoch` and uses it from its next round on.
 */
export type Sealed = { readonly kind: 'sealed'; readonly epoch: string };
/** The ttl exceeds the cluster's maxTtlMs recorded on the node: nothing written, no vote. */
export type TtlAboveMax = { readonly kind: 'ttl-above-max'; readonly maxTtlMs: number };
/**
 * The caller's node count or key layout differs from the cluster's recorded on the node: nothing written, no vote.
 * The process re-reads the cluster's settings before its next round (nodes/cluster-settings.ts).
 */
export type SettingsMismatch = {
  readonly kind: 'settings-mismatch';
  readonly field: 'nodeCount' | 'keyLayout';
  readonly recorded: string;
};

export type AcquireReply =
  /** The register now holds the proposal, which the caller knows, so the node does not send it back. */
  | { readonly kind: 'granted'; readonly promised: true }
  | { readonly kind: 'granted'; readonly promised: false; readonly cur: bigint }
  | { readonly kind: 'held'; readonly pttlMs: number; readonly cur: bigint }
  | Abstain
  | Sealed
  | TtlAboveMax
  | SettingsMismatch;
export type PromiseReply =
  | { readonly kind: 'promised'; readonly cur: bigint }
  | { readonly kind: 'refused'; readonly cur: bigint }
  | Abstain
  | Sealed
  | SettingsMismatch;
export type ExtendReply =
  | { readonly kind: 'extended'; readonly token: bigint | null }
  | { readonly kind: 'not-held' }
  | { readonly kind: 'not-initialized' }
  | TtlAboveMax
  | SettingsMismatch;
export type ReleaseReply = { readonly kind: 'released' } | { readonly kind: 'not-held' };
export type InspectReply =
  | { readonly kind: 'view'; readonly held: boolean; readonly token: bigint | null }
  | { readonly kind: 'not-initialized' };
export type RepairMarkerReply =
  | { readonly kind: 'claimed' }
  | { readonly kind: 'initialized' }
  | { readonly kind: 'busy' }
  | { readonly kind: 'no-repair-marker' };
export type RepairReadReply =
  | {
      readonly kind: 'read';
      readonly incarnation: string;
      /** SCAN cursor to continue from; '0' when the read is complete. */
      readonly cursor: string;
      readonly floor: bigint;
      /** The cluster's settings recorded on the source (field → value; empty when none are recorded). */
      readonly settings: Readonly<Record<string, string>>;
      readonly registers: readonly (readonly [key: string, value: bigint])[];
      /** Live lease keys: key, value (`<leaseId>|<token>`) and remaining ttl in ms (> 0). */
      readonly leases: readonly (readonly [key: string, value: string, pttlMs: number])[];
    }
  | { readonly kind: 'not-initialized' }
  | { readonly kind: 'under-repair' }
  | { readonly kind: 'incarnation-changed' }
  | { readonly kind: 'corrupt' };
export type RepairRaiseReply =
  { readonly kind: 'raised' } | { readonly kind: 'corrupt' } | { readonly kind: 'no-repair-marker' };
export type FoldReply =
  | { readonly kind: 'folded'; readonly cursor: string; readonly folded: number }
  | { readonly kind: 'busy' }
  | { readonly kind: 'not-initialized' }
  | { readonly kind: 'corrupt' };
export type FinishRepairReply = { readonly kind: 'finished' } | { readonly kind: 'no-repair-marker' };
/** settings.lua: the settings hash after the call (field → value), or `not-initialized`. */
export type SettingsReply =
  | { readonly kind: 'settings'; readonly settings: Readonly<Record<string, string>> }
  | { readonly kind: 'not-initialized' };
/** fresh-init.lua: `ok` (marked, init mark still ours, or initialized), `initialized` (not fresh), `init-mark-lost`. */
export type FreshInitReply =
  { readonly kind: 'ok' } | { readonly kind: 'initialized' } | { readonly kind: 'init-mark-lost' };

/** fresh-init-shard.lua: per slot of the call, in its order, fresh-init.lua's reply for that slot. */
export type FreshInitShardReply = { readonly kind: 'steps'; readonly steps: readonly FreshInitReply[] };

/**
 * probe-shard.lua: per slot of the call, in its order, whether the slot holds its incarnation key (`flags[i]` is
 * '1') and its seal epoch (`epochs`, by position; absent: the empty epoch).
 */
export type ProbeShardReply = {
  readonly kind: 'probed';
  readonly flags: string;
  readonly epochs: ReadonlyMap<number, string>;
};

export interface ScriptReplies {
  acquire: AcquireReply;
  promise: PromiseReply;
  extend: ExtendReply;
  release: ReleaseReply;
  inspect: InspectReply;
  'repair-marker': RepairMarkerReply;
  'repair-read': RepairReadReply;
  'repair-read-slot': RepairReadReply;
  'repair-raise': RepairRaiseReply;
  'finish-repair': FinishRepairReply;
  fold: FoldReply;
  'fold-slot': FoldReply;
  'fresh-init': FreshInitReply;
  'fresh-init-shard': FreshInitShardReply;
  'probe-shard': ProbeShardReply;
  settings: SettingsReply;
}

/**
 * Maps a raw script reply to its typed result. The only place script codes are interpreted.
 * @throws MalformedReplyError when the reply is not one the script's contract allows.
 */
export function interpretReply<S extends ScriptName>(script: S, reply: unknown): ScriptReplies[S] {
  return interpreters[script](new ReplyReader(script, reply));
}

/**
 * fresh-init.lua's replies by code. fresh-init-shard.lua answers the same codes, one per slot, each written as one
 * base-36 character ('1', 'a', 'c').
 */
const FRESH_INIT_REPLIES = {
  [ScriptCode.OK]: { kind: 'ok' },
  [ScriptCode.INITIALIZED]: { kind: 'initialized' },
  [ScriptCode.NO_INIT_MARK]: { kind: 'init-mark-lost' },
} as const satisfies Record<(typeof SCRIPT_CODES)['fresh-init'][number], FreshInitReply>;

/** A repair read's reply (repair-read.lua, repair-read-slot.lua: one check, include/source-keys.lua). */
function repairRead(
  r: ReplyReader,
  code: (typeof SCRIPT_CODES)['repair-read-slot'][number],
): RepairReadReply {
  switch (code) {
    case ScriptCode.OK: {
      const incarnation = r.text(1);
      const cursor = r.cursor(2);
      const floor = r.register(3);
      const settings = r.fieldMap(4);
      const registers = r.registerPairs(5);
      const leases = r.leaseTriples(6);
      return r.done({ kind: 'read', incarnation, cursor, floor, settings, registers, leases });
    }
    case ScriptCode.NOT_INITIALIZED:
      return r.done({ kind: 'not-initialized' });
    case ScriptCode.UNDER_REPAIR:
      return r.done({ kind: 'under-repair' });
    case ScriptCode.INCARNATION_CHANGED:
      return r.done({ kind: 'incarnation-changed' });
    case ScriptCode.CORRUPT:
      return r.done({ kind: 'corrupt' });
  }
}

const interpreters: { [S in ScriptName]: (r: ReplyReader) => ScriptReplies[S] } = {
  acquire: (r) => {
    switch (r.code(SCRIPT_CODES.acquire)) {
      case ScriptCode.OK:
        return r.flag(1)
          ? r.done({ kind: 'granted', promised: true })
          : r.done({ kind: 'granted', promised: false, cur: r.register(2) });
      case ScriptCode.HELD:
        return r.done({ kind: 'held', pttlMs: r.integer(1), cur: r.register(2) });
      case ScriptCode.NOT_INITIALIZED:
        return r.done({ kind: 'not-initialized' });
      case ScriptCode.CORRUPT:
        return r.done({ kind: 'corrupt' });
      case ScriptCode.CALL_ERROR:
        throw r.callError();
      case ScriptCode.SEALED:
        return r.done({ kind: 'sealed', epoch: r.epoch(1) });
      case ScriptCode.TTL_ABOVE_MAX:
        return r.done({ kind: 'ttl-above-max', maxTtlMs: r.integer(1) });
      case ScriptCode.SETTINGS_MISMATCH:
        return r.done(r.settingsMismatch());
    }
  },
  promise: (r) => {
    switch (r.code(SCRIPT_CODES.promise)) {
      case ScriptCode.OK:
        return r.done({ kind: 'promised', cur: r.register(1) });
      case ScriptCode.REFUSED:
        return r.done({ kind: 'refused', cur: r.register(1) });
      case ScriptCode.NOT_INITIALIZED:
        return r.done({ kind: 'not-initialized' });
      case ScriptCode.CORRUPT:
        return r.done({ kind: 'corrupt' });
      case ScriptCode.SEALED:
        return r.done({ kind: 'sealed', epoch: r.epoch(1) });
      case ScriptCode.SETTINGS_MISMATCH:
        return r.done(r.settingsMismatch());
    }
  },
  extend: (r) => {
    switch (r.code(SCRIPT_CODES.extend)) {
      case ScriptCode.OK:
        return r.done({ kind: 'extended', token: r.optionalToken(1) });
      case ScriptCode.HELD:
        return r.done({ kind: 'not-held' });
      case ScriptCode.NOT_INITIALIZED:
        return r.done({ kind: 'not-initialized' });
      case ScriptCode.TTL_ABOVE_MAX:
        return r.done({ kind: 'ttl-above-max', maxTtlMs: r.integer(1) });
      case ScriptCode.SETTINGS_MISMATCH:
        return r.done(r.settingsMismatch());
    }
  },
  release: (r) => {
    switch (r.code(SCRIPT_CODES.release)) {
      case ScriptCode.OK:
        return r.done({ kind: 'released' });
      case ScriptCode.HELD:
        return r.done({ kind: 'not-held' });
      case ScriptCode.CALL_ERROR:
        throw r.callError();
    }
  },
  inspect: (r) => {
    switch (r.code(SCRIPT_CODES.inspect)) {
      case ScriptCode.OK:
        return r.done({ kind: 'view', held: r.flag(1), token: r.optionalToken(2) });
      case ScriptCode.NOT_INITIALIZED:
        return r.done({ kind: 'not-initialized' });
    }
  },
  'repair-marker': (r) => {
    switch (r.code(SCRIPT_CODES['repair-marker'])) {
      case ScriptCode.OK:
        return r.done({ kind: 'claimed' });
      case ScriptCode.INITIALIZED:
        return r.done({ kind: 'initialized' });
      case ScriptCode.BUSY:
        return r.done({ kind: 'busy' });
      case ScriptCode.NO_REPAIR_MARKER:
        return r.done({ kind: 'no-repair-marker' });
    }
  },
  'repair-read': (r) => repairRead(r, r.code(SCRIPT_CODES['repair-read'])),
  'repair-read-slot': (r) => repairRead(r, r.code(SCRIPT_CODES['repair-read-slot'])),
  'repair-raise': (r) => {
    switch (r.code(SCRIPT_CODES['repair-raise'])) {
      case ScriptCode.OK:
        return r.done({ kind: 'raised' });
      case ScriptCode.CORRUPT:
        return r.done({ kind: 'corrupt' });
      case ScriptCode.NO_REPAIR_MARKER:
        return r.done({ kind: 'no-repair-marker' });
    }
  },
  fold: (r) => {
    switch (r.code(SCRIPT_CODES.fold)) {
      case ScriptCode.OK:
        return r.done({ kind: 'folded', cursor: r.cursor(1), folded: r.integer(2) });
      case ScriptCode.BUSY:
        return r.done({ kind: 'busy' });
      case ScriptCode.NOT_INITIALIZED:
        return r.done({ kind: 'not-initialized' });
      case ScriptCode.CORRUPT:
        return r.done({ kind: 'corrupt' });
    }
  },
  'fold-slot': (r) => {
    switch (r.code(SCRIPT_CODES['fold-slot'])) {
      case ScriptCode.OK:
        return r.done({ kind: 'folded', cursor: r.cursor(1), folded: r.integer(2) });
      case ScriptCode.NOT_INITIALIZED:
        return r.done({ kind: 'not-initialized' });
      case ScriptCode.CORRUPT:
        return r.done({ kind: 'corrupt' });
    }
  },
  'fresh-init': (r) => r.done(FRESH_INIT_REPLIES[r.code(SCRIPT_CODES['fresh-init'])]),
  // Each slot's character is fresh-init.lua's reply code for that slot (the same step,
  // lua/include/fresh-init-step.lua); SCRIPT_CODES lists those codes.
  'fresh-init-shard': (r) => {
    switch (r.code([ScriptCode.OK])) {
      case ScriptCode.OK:
        return r.done({ kind: 'steps', steps: r.stepCodes(1) });
    }
  },
  'probe-shard': (r) => {
    switch (r.code(SCRIPT_CODES['probe-shard'])) {
      case ScriptCode.OK:
        return r.done({ kind: 'probed', flags: r.slotFlags(1), epochs: r.epochsByPosition(2) });
    }
  },
  settings: (r) => {
    switch (r.code(SCRIPT_CODES.settings)) {
      case ScriptCode.OK:
        return r.done({ kind: 'settings', settings: r.fieldMap(1) });
      case ScriptCode.NOT_INITIALIZED:
        return r.done({ kind: 'not-initialized' });
    }
  },
  'finish-repair': (r) => {
    switch (r.code(SCRIPT_CODES['finish-repair'])) {
      case ScriptCode.OK:
        return r.done({ kind: 'finished' });
      case ScriptCode.NO_REPAIR_MARKER:
        return r.done({ kind: 'no-repair-marker' });
    }
  },
};

/** The scripts that take a batch of calls (or of slots) and answer with one reply per call. */
export type BatchScriptName = 'acquire' | 'release';

/**
 * Splits a batch script's reply into its per-call replies (each still raw, for {@link interpretReply}).
 * @throws MalformedReplyError when the reply is not an array of exactly `count` entries.
 */
export function splitBatchReply(script: BatchScriptName, reply: unknown, count: number): readonly unknown[] {
  if (!Array.isArray(reply) || reply.length !== count) {
    throw new MalformedReplyError(
      script,
      reply,
      `expected an array of ${count} replies, one per batched call`,
    );
  }
  return reply as unknown[];
}

const DECIMAL = /^(0|[1-9][0-9]{0,18})$/;

/** Reads one reply array field by field, checking shapes; every shape error is a MalformedReplyError. */
class ReplyReader {
  private readonly items: readonly unknown[];
  private used = 1;

  constructor(
    private readonly script: ScriptName,
    private readonly reply: unknown,
  ) {
    if (!Array.isArray(reply) || reply.length === 0) throw this.malformed('expected a non-empty array');
    this.items = reply;
  }

  code<C extends ScriptCode>(allowed: readonly C[]): C {
    const code = this.items[0];
    if (typeof code !== 'number' || !(allowed as readonly number[]).includes(code)) {
      throw this.malformed(`unexpected code ${JSON.stringify(code)}`);
    }
    return code as C;
  }

  private at(index: number): unknown {
    if (index >= this.items.length) throw this.malformed(`missing field ${index}`);
    this.used = Math.max(this.used, index + 1);
    return this.items[index];
  }

  integer(index: number): number {
    const value = this.at(index);
    if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
      throw this.malformed(`field ${index} must be an integer`);
    }
    return value;
  }

  flag(index: number): boolean {
    const value = this.integer(index);
    if (value !== 0 && value !== 1) throw this.malformed(`field ${index} must be 0 or 1`);
    return value === 1;
  }

  /** A token register value: a decimal string from 0 to 2^63 − 1. */
  register(index: number): bigint {
    const value = this.at(index);
    const text = Buffer.isBuffer(value) ? value.toString('utf8') : value;
    if (typeof text !== 'string' || !DECIMAL.test(text)) {
      throw this.malformed(`field ${index} must be a decimal token`);
    }
    const parsed = BigInt(text);
    if (parsed > MAX_TOKEN) throw this.malformed(`field ${index} exceeds 2^63-1`);
    return parsed;
  }

  /** A non-empty string. */
  text(index: number): string {
    const value = this.at(index);
    if (typeof value !== 'string' || value === '') throw this.malformed(`field ${index} must be a string`);
    return value;
  }

  /** `{15, field, recorded value}`: a settings field the node refused the call for, and its recorded value. */
  settingsMismatch(): SettingsMismatch {
    const field = this.text(1);
    if (field !== 'nodeCount' && field !== 'keyLayout') {
      throw this.malformed(`field 1 must be nodeCount or keyLayout`);
    }
    return { kind: 'settings-mismatch', field, recorded: this.text(2) };
  }

  /** A SCAN cursor: a decimal string. */
  cursor(index: number): string {
    const value = this.at(index);
    if (typeof value !== 'string' || !/^(0|[1-9][0-9]{0,19})$/.test(value)) {
      throw this.malformed(`field ${index} must be a SCAN cursor`);
    }
    return value;
  }

  /** A seal epoch: a string ('' for a node that has none). */
  epoch(index: number): string {
    const value = this.at(index);
    if (typeof value !== 'string') throw this.malformed(`field ${index} must be a seal epoch`);
    return value;
  }

  /** A string of '0' and '1', one per slot of the call. */
  slotFlags(index: number): string {
    const value = this.at(index);
    if (typeof value !== 'string' || !/^[01]+$/.test(value)) {
      throw this.malformed(`field ${index} must be a string of 0 and 1, one per slot`);
    }
    return value;
  }

  /** Field `index` as fresh-init.lua replies, one base-36 code character per slot (fresh-init-shard.lua). */
  stepCodes(index: number): FreshInitReply[] {
    const value = this.at(index);
    if (typeof value !== 'string' || !/^[1ac]+$/.test(value)) {
      throw this.malformed(`field ${index} must be a string of '1', 'a' and 'c', one per slot`);
    }
    const steps: FreshInitReply[] = [];
    for (const code of value) {
      steps.push(FRESH_INIT_REPLIES[parseInt(code, 36) as keyof typeof FRESH_INIT_REPLIES]);
    }
    return steps;
  }

  /** Field `index` as (position from 1, seal epoch) pairs. */
  epochsByPosition(index: number): Map<number, string> {
    const items = this.array(index, 2, 'position/epoch pairs');
    const epochs = new Map<number, string>();
    for (let i = 0; i < items.length; i += 2) {
      const [position, epoch] = [items[i], items[i + 1]];
      if (
        typeof position !== 'number' ||
        !Number.isSafeInteger(position) ||
        position < 1 ||
        typeof epoch !== 'string'
      ) {
        throw this.malformed(`field ${index} must hold positions and seal epochs`);
      }
      epochs.set(position, epoch);
    }
    return epochs;
  }

  /** Field `index` is an array; its entries, checked to be there. */
  private array(index: number, stride: number, what: string): readonly unknown[] {
    const value = this.at(index);
    if (!Array.isArray(value) || value.length % stride !== 0) {
      throw this.malformed(`field ${index} must be an array of ${what}`);
    }
    return value as unknown[];
  }

  /** Field `index` as a flat field/value array of strings (HGETALL). */
  fieldMap(index: number): Record<string, string> {
    const items = this.array(index, 2, 'field/value pairs');
    const map: Record<string, string> = {};
    for (let i = 0; i < items.length; i += 2) {
      const [field, value] = [items[i], items[i + 1]];
      if (typeof field !== 'string' || typeof value !== 'string') {
        throw this.malformed(`field ${index} must hold strings`);
      }
      map[field] = value;
    }
    return map;
  }

  /** Field `index` as (key, token register value) pairs. */
  registerPairs(index: number): [string, bigint][] {
    const items = this.array(index, 2, 'key/value pairs');
    const pairs: [string, bigint][] = [];
    for (let i = 0; i < items.length; i += 2) {
      const [key, value] = [items[i], items[i + 1]];
      if (typeof key !== 'string' || key === '' || typeof value !== 'string' || !DECIMAL.test(value)) {
        throw this.malformed(`field ${index} must hold keys and decimal tokens`);
      }
      const token = BigInt(value);
      if (token > MAX_TOKEN) throw this.malformed(`field ${index} holds a token above 2^63-1`);
      pairs.push([key, token]);
    }
    return pairs;
  }

  /** Field `index` as (lease key, value, remaining ttl) triples. */
  leaseTriples(index: number): [string, string, number][] {
    const items = this.array(index, 3, 'lease key/value/ttl triples');
    const triples: [string, string, number][] = [];
    for (let i = 0; i < items.length; i += 3) {
      const [key, value, pttl] = [items[i], items[i + 1], items[i + 2]];
      if (
        typeof key !== 'string' ||
        key === '' ||
        typeof value !== 'string' ||
        typeof pttl !== 'number' ||
        !Number.isSafeInteger(pttl) ||
        pttl <= 0
      ) {
        throw this.malformed(`field ${index} must hold lease keys, values and positive ttls`);
      }
      triples.push([key, value, pttl]);
    }
    return triples;
  }

  /** A token, or '' for none. */
  optionalToken(index: number): bigint | null {
    const value = this.at(index);
    if (value === '') return null;
    const token = this.register(index);
    return token === 0n ? null : token;
  }

  /** A `{7, message}` reply: the node's error for this one call. */
  callError(): NodeCallError {
    const message = this.at(1);
    if (typeof message !== 'string') throw this.malformed('field 1 must be an error message');
    this.done(undefined);
    return new NodeCallError(this.script, message);
  }

  done<T>(result: T): T {
    if (this.items.length !== this.used) throw this.malformed(`expected ${this.used} fields`);
    return result;
  }

  private malformed(detail: string): MalformedReplyError {
    return new MalformedReplyError(this.script, this.reply, detail);
  }
}
