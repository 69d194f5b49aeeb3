/**
 * An in-memory Redis node with the semantics of the coordinator's Lua scripts (packages/coordinator/lua/*.lua),
 * for the deterministic protocol simulation. Each method is one script run, atomic as on Redis; the transport
 * (sim-world.ts) decides when a call reaches the node and whether its reply comes back.
 *
 * Kept deliberately close to the Lua: an absent register reads as the floor; a node without its incarnation key
 * refuses to vote; the repair scripts check the marker and (for sources) the incarnation and marker atomically.
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
  registers: Map<string, bigint>;
  leases: Map<string, LeaseEntry>;
}

export function emptyState(): SimNodeState {
  return { incarnation: null, marker: null, floor: 0n, registers: new Map(), leases: new Map() };
}

/** The scripts' semantics over one node's state; `now` is the node's clock. */
export class SimNodeModel {
  state: SimNodeState = emptyState();
  /** How many times this node lost its state. */
  amnesias = 0;

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
    return this.state.registers.get(tokenKey) ?? this.state.floor;
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
  ): AcquireReply {
    if (this.state.incarnation === null) return { kind: 'not-initialized' };
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

  promise(leaseKey: string, tokenKey: string, leaseId: string, proposal: bigint): PromiseReply {
    if (this.state.incarnation === null) return { kind: 'not-initialized' };
    const cur = this.cur(tokenKey);
    if (proposal <= cur) return { kind: 'refused', cur };
    this.state.registers.set(tokenKey, proposal);
    const held = this.lease(leaseKey);
    if (held !== undefined && held.holder === leaseId) held.token = proposal;
    return { kind: 'promised', cur: proposal };
  }

  extend(leaseKey: string, leaseId: string, ttlMs: number): ExtendReply {
    if (this.state.incarnation === null) return { kind: 'not-initialized' };
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

  repairRead(cursor: string, count: number, incarnation: string): RepairReadReply {
    if (this.state.incarnation === null) return { kind: 'not-initialized' };
    if (this.markerLive() !== null) return { kind: 'under-repair' };
    if (incarnation !== '' && incarnation !== this.state.incarnation) return { kind: 'incarnation-changed' };
    // Deterministic "SCAN": registers in insertion order, `count` per batch.
    const entries = [...this.state.registers];
    const from = Number(cursor);
    const batch = entries.slice(from, from + count);
    const next = from + count >= entries.length ? '0' : String(from + count);
    return {
      kind: 'read',
      incarnation: this.state.incarnation,
      cursor: next,
      floor: this.state.floor,
      registers: batch,
    };
  }

  repairRaise(
    repairId: string,
    floor: bigint,
    registers: readonly (readonly [string, bigint])[],
  ): RepairRaiseReply {
    if (this.markerLive()?.id !== repairId) return { kind: 'no-repair-marker' };
    if (floor > this.state.floor) this.state.floor = floor;
    for (const [key, value] of registers) {
      if (value > this.cur(key)) this.state.registers.set(key, value);
    }
    return { kind: 'raised' };
  }

  finishRepair(repairId: string, incarnation: string): FinishRepairReply {
    if (this.markerLive()?.id !== repairId) return { kind: 'no-repair-marker' };
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
