/**
 * An in-memory Redis node with the semantics of the coordinator's Lua scripts (packages/coordinator/lua/*.lua),
 * for the deterministic protocol simulation. Each method is one script run, atomic as on Redis; the transport
 * (sim-world.ts) decides when a call reaches the node and whether its reply comes back.
 *
 * Kept deliberately close to the Lua: an absent register reads as the floor; a node without its incarnation key
 * refuses to vote; acquire and promise refuse a call whose seal epoch is not the node's; a repair read seals the
 * source in its first batch and returns registers and live leases in key order (SCAN's guarantee: a key present
 * for the whole read is returned once); the repair scripts check the marker and (for sources) the incarnation and
 * marker atomically.
 */
import type {
  AcquireReply,
  ExtendReply,
  FinishRepairReply,
  InspectReply,
  PromiseReply,
  ReleaseReply,
  RepairMarkerReply,
  RepairRaiseReply,
  RepairReadReply,
} from '../../../packages/coordinator/src/scripts/script-results.js';

interface LeaseEntry {
  holder: string;
  token: bigint;
  expiresAt: number;
}

export interface SimNodeState {
  incarnation: string | null;
  marker: { id: string; expiresAt: number } | null;
  floor: bigint;
  /** The seal epoch ('' when absent). */
  seal: string;
  settings: Record<string, string>;
  registers: Map<string, bigint>;
  leases: Map<string, LeaseEntry>;
}

export function emptyState(): SimNodeState {
  return {
    incarnation: null,
    marker: null,
    floor: 0n,
    seal: '',
    settings: {},
    registers: new Map(),
    leases: new Map(),
  };
}

/** The scripts' semantics over one node's state; `now` is the node's clock. */
export class SimNodeModel {
  state: SimNodeState = emptyState();
  /** How many times this node lost its state. */
  amnesias = 0;
  /** False for a negative control: the scripts ignore the seal epoch (the seal is off). */
  sealsEnforced = true;

  constructor(
    readonly index: number,
    private readonly now: () => number,
  ) {}

  /** Restart without data (a disk loss, persistence off): everything is gone, including the incarnation key. */
  loseState(): void {
    this.state = emptyState();
    this.amnesias++;
  }

  private cur(tokenKey: string): bigint {
    // A node never answers below its floor (include/decimal-token.lua, read_register).
    const register = this.state.registers.get(tokenKey);
    return register !== undefined && register > this.state.floor ? register : this.state.floor;
  }

  private lease(leaseKey: string): LeaseEntry | undefined {
    const entry = this.state.leases.get(leaseKey);
    if (entry !== undefined && entry.expiresAt <= this.now()) {
      this.state.leases.delete(leaseKey);
      return undefined;
    }
    return entry;
  }

  private markerLive(): { id: string; expiresAt: number } | null {
    const marker = this.state.marker;
    if (marker !== null && marker.expiresAt <= this.now()) this.state.marker = null;
    return this.state.marker;
  }

  acquire(
    leaseKey: string,
    tokenKey: string,
    leaseId: string,
    ttlMs: number,
    proposal: bigint,
    epoch: string,
  ): AcquireReply {
    if (this.state.incarnation === null) return { kind: 'not-initialized' };
    if (this.sealsEnforced && epoch !== this.state.seal) return { kind: 'sealed', epoch: this.state.seal };
    const max = this.maxTtl();
    if (max !== undefined && ttlMs > max) return { kind: 'ttl-above-max', maxTtlMs: max };
    const cur = this.cur(tokenKey);
    const held = this.lease(leaseKey);
    if (held !== undefined && held.holder !== leaseId) {
      return { kind: 'held', pttlMs: held.expiresAt - this.now(), cur };
    }
    this.state.leases.set(leaseKey, { holder: leaseId, token: proposal, expiresAt: this.now() + ttlMs });
    if (proposal > cur) {
      this.state.registers.set(tokenKey, proposal);
      return { kind: 'granted', promised: true };
    }
    return { kind: 'granted', promised: false, cur };
  }

  private maxTtl(): number | undefined {
    const max = this.state.settings.maxTtlMs;
    return max === undefined ? undefined : Number(max);
  }

  promise(
    leaseKey: string,
    tokenKey: string,
    leaseId: string,
    proposal: bigint,
    epoch: string,
  ): PromiseReply {
    if (this.state.incarnation === null) return { kind: 'not-initialized' };
    if (this.sealsEnforced && epoch !== this.state.seal) return { kind: 'sealed', epoch: this.state.seal };
    const cur = this.cur(tokenKey);
    if (proposal <= cur) return { kind: 'refused', cur };
    this.state.registers.set(tokenKey, proposal);
    const held = this.lease(leaseKey);
    if (held !== undefined && held.holder === leaseId) held.token = proposal;
    return { kind: 'promised', cur: proposal };
  }

  extend(leaseKey: string, leaseId: string, ttlMs: number): ExtendReply {
    if (this.state.incarnation === null) return { kind: 'not-initialized' };
    const max = this.maxTtl();
    if (max !== undefined && ttlMs > max) return { kind: 'ttl-above-max', maxTtlMs: max };
    const held = this.lease(leaseKey);
    if (held === undefined || held.holder !== leaseId) return { kind: 'not-held' };
    held.expiresAt = this.now() + ttlMs;
    return { kind: 'extended', token: held.token };
  }

  release(leaseKey: string, leaseId: string): ReleaseReply {
    const held = this.lease(leaseKey);
    if (held === undefined || held.holder !== leaseId) return { kind: 'not-held' };
    this.state.leases.delete(leaseKey);
    return { kind: 'released' };
  }

  inspect(leaseKey: string): InspectReply {
    if (this.state.incarnation === null) return { kind: 'not-initialized' };
    const held = this.lease(leaseKey);
    return { kind: 'view', held: held !== undefined, token: held?.token ?? null };
  }

  repairMarker(operation: 'claim' | 'renew', repairId: string, markerTtlMs: number): RepairMarkerReply {
    if (this.state.incarnation !== null) return { kind: 'initialized' };
    const marker = this.markerLive();
    if (operation === 'renew') {
      if (marker?.id !== repairId) return { kind: 'no-repair-marker' };
      marker.expiresAt = this.now() + markerTtlMs;
      return { kind: 'claimed' };
    }
    if (marker !== null && marker.id !== repairId) return { kind: 'busy' };
    this.state.marker = { id: repairId, expiresAt: this.now() + markerTtlMs };
    return { kind: 'claimed' };
  }

  repairRead(cursor: string, count: number, incarnation: string, seal: string): RepairReadReply {
    if (this.state.incarnation === null) return { kind: 'not-initialized' };
    if (this.markerLive() !== null) return { kind: 'under-repair' };
    if (incarnation !== '' && incarnation !== this.state.incarnation) return { kind: 'incarnation-changed' };
    if (seal !== '') this.state.seal = seal;
    // Deterministic "SCAN": every resource key (registers and live leases) in key order, `count` per batch; the
    // cursor is the last key returned, so a key present for the whole read is returned exactly once.
    for (const key of [...this.state.leases.keys()]) this.lease(key); // drop expired leases
    const keys = [...new Set([...this.state.registers.keys(), ...this.state.leases.keys()])]
      .filter((key) => cursor === '0' || key > cursor.slice(2))
      .sort();
    const batch = keys.slice(0, count);
    const next = keys.length > count ? `k:${batch[batch.length - 1]!}` : '0';
    const registers: [string, bigint][] = [];
    const leases: [string, string, number][] = [];
    for (const key of batch) {
      const value = this.state.registers.get(key);
      if (value !== undefined) registers.push([key, value]);
      const lease = this.state.leases.get(key);
      if (lease !== undefined) {
        leases.push([key, `${lease.holder}|${lease.token}`, lease.expiresAt - this.now()]);
      }
    }
    return {
      kind: 'read',
      incarnation: this.state.incarnation,
      cursor: next,
      floor: this.state.floor,
      settings: { ...this.state.settings },
      registers,
      leases,
    };
  }

  repairRaise(
    repairId: string,
    floor: bigint,
    registers: readonly (readonly [string, bigint])[],
    leases: readonly (readonly [string, string, number])[],
  ): RepairRaiseReply {
    if (this.markerLive()?.id !== repairId) return { kind: 'no-repair-marker' };
    if (floor > this.state.floor) this.state.floor = floor;
    for (const [key, value] of registers) {
      if (value > this.cur(key)) this.state.registers.set(key, value);
    }
    for (const [key, value, pttlMs] of leases) {
      if (this.lease(key) !== undefined) continue;
      const [holder, token] = value.split('|') as [string, string];
      this.state.leases.set(key, { holder, token: BigInt(token), expiresAt: this.now() + pttlMs });
    }
    return { kind: 'raised' };
  }

  finishRepair(
    repairId: string,
    incarnation: string,
    seal: string,
    settings: Readonly<Record<string, string>>,
  ): FinishRepairReply {
    if (this.markerLive()?.id !== repairId) return { kind: 'no-repair-marker' };
    this.state.settings = { ...settings };
    this.state.seal = seal;
    this.state.incarnation = incarnation;
    this.state.marker = null;
    return { kind: 'finished' };
  }

  /** fold.lua for one register: only without a live lease; floor first, then the register goes. */
  fold(tokenKey: string, leaseKey: string): boolean {
    if (this.state.incarnation === null) return false;
    const value = this.state.registers.get(tokenKey);
    if (value === undefined || this.lease(leaseKey) !== undefined) return false;
    if (value > this.state.floor) this.state.floor = value;
    this.state.registers.delete(tokenKey);
    return true;
  }
}
