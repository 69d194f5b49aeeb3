import type { WorkerOutcome } from '@fenced/test-utils/counter-worker/protocol';
import type { LoggedWrite } from './counter-table.js';

export type { WorkerOutcome } from '@fenced/test-utils/counter-worker/protocol';

/** How a run protects its data. */
export type Mode = 'unprotected' | 'fenced';

export const MODES: readonly Mode[] = ['unprotected', 'fenced'];

export type WorkerName = 'A' | 'B';
export const WORKER_NAMES: readonly WorkerName[] = ['A', 'B'];

/** Where something happens on the timeline: a worker's lane, or the infrastructure (Redis, network). */
export type Lane = WorkerName | 'system';

export type OpName = 'acquire' | 'read' | 'write' | 'release';

/** One command a worker ran, as it reported it. */
export interface OpRecord {
  readonly worker: WorkerName;
  readonly op: OpName;
  readonly outcome: WorkerOutcome;
  /** The command's arguments that matter for the story. */
  readonly ttlMs?: number;
  readonly waitMs?: number;
  readonly value?: number;
  readonly via?: 'db' | 'http';
  /** The lease the worker held when the command started (reads, writes, releases). */
  readonly leaseRef?: string;
  /** A forged write (F20): the token it presented instead of its lease's. */
  readonly forgedToken?: string;
}

export type ActionKind = 'pause' | 'hold' | 'cutoff' | 'clock' | 'restart' | 'note';

/** Something the orchestrator did to the world (or a remark on it). Spans have an `until`. */
export interface ActionRecord {
  readonly lane: Lane;
  readonly kind: ActionKind;
  readonly t: number;
  until?: number;
  readonly text: string;
  /** A few words for the SVG timeline. */
  readonly short?: string;
  endText?: string;
}

/** Everything that happened in one run (one scenario, one mode), before any judgement. */
export interface RunRecord {
  readonly scenario: string;
  /** What the verdict expects: `unprotected` must show the anomaly, `fenced` must not. */
  readonly mode: Mode;
  /**
   * What `fenced` adds in this scenario. `signatures` (F20): both runs use the coordinator and the guard; the
   * fenced run adds signed leases and a store that verifies them. Absent: the lock alone vs lock + guard.
   */
  readonly protection?: 'signatures';
  readonly counter: string;
  readonly resource: string;
  readonly ttlMs: number;
  startedAt: number;
  endedAt: number;
  readonly ops: OpRecord[];
  readonly actions: ActionRecord[];
  /** The counter at the end, read by the orchestrator, and the committed writes in commit order. */
  final?: { readonly value: number; readonly writer: string | null };
  log: LoggedWrite[];
  /** Set when the orchestration itself failed (a step that had to succeed did not). */
  error?: string;
}
