// `--cpu-prof` for the in-process scenarios: the bench process profiles itself (the inspector's Profiler, the
// sampler `node --cpu-prof` uses) during each measured run of the throughput scenario, and keeps, per
// concurrency and library, where its CPU went per cycle (bench/profilers/cpu-profile-summary.ts areas, node's own time
// credited to its caller). Profiling slows the client a little: a profiled run's figures are for the "where".
import { Session } from 'node:inspector/promises';
import { summarizeCpuProfile, type CpuProfile, type ProfileArea } from './cpu-profile-summary.js';
import { median } from '../suite/statistics.js';

/** Where one cycle's client CPU went, medians over the profiled runs of one cell. */
export interface ClientProfileCell {
  /** Sampled non-idle time per cycle, µs (the profile's view of the CPU per cycle, GC included). */
  busyUsPerCycle: number;
  /** µs per cycle by area, node's own time credited to its nearest caller (e.g. socket writes to ioredis). */
  onBehalfUsPerCycle: Partial<Record<ProfileArea, number>>;
  /** The costliest functions of the last profiled run (self µs per cycle). */
  topFunctions: { area: ProfileArea; name: string; usPerCycle: number }[];
  runs: number;
}

/** The sampling interval, µs: finer than `--cpu-prof`'s default 1 000, since a cycle costs tens of µs. */
const SAMPLING_INTERVAL_US = 100;

export class ClientProfiler {
  readonly #session = new Session();
  readonly #cells = new Map<
    string,
    { busy: number[]; areas: Map<ProfileArea, number[]>; top: ClientProfileCell['topFunctions'] }
  >();
  #connected = false;

  async begin(): Promise<void> {
    if (!this.#connected) {
      this.#session.connect();
      this.#connected = true;
      await this.#session.post('Profiler.enable');
      await this.#session.post('Profiler.setSamplingInterval', { interval: SAMPLING_INTERVAL_US });
    }
    await this.#session.post('Profiler.start');
  }

  /** Stops the profile begun by `begin` and files it under the cell, divided by the cycles the run completed. */
  async end(concurrency: string, library: string, cycles: number): Promise<void> {
    const { profile } = (await this.#session.post('Profiler.stop')) as { profile: CpuProfile };
    if (cycles <= 0) return;
    const summary = summarizeCpuProfile(profile);
    const key = `${concurrency}\u0000${library}`;
    let cell = this.#cells.get(key);
    if (cell === undefined) {
      cell = { busy: [], areas: new Map(), top: [] };
      this.#cells.set(key, cell);
    }
    cell.busy.push(summary.busyUs / cycles);
    for (const [area, us] of Object.entries(summary.onBehalfUs) as [ProfileArea, number][]) {
      if (area === 'idle') continue;
      const list = cell.areas.get(area) ?? [];
      list.push(us / cycles);
      cell.areas.set(area, list);
    }
    cell.top = summary.topFunctions
      .slice(0, 8)
      .map((f) => ({ area: f.area, name: f.name, usPerCycle: f.selfUs / cycles }));
  }

  cell(concurrency: string, library: string): ClientProfileCell | undefined {
    const cell = this.#cells.get(`${concurrency}\u0000${library}`);
    if (cell === undefined) return undefined;
    const onBehalfUsPerCycle: Partial<Record<ProfileArea, number>> = {};
    for (const [area, list] of cell.areas) {
      const value = median(list);
      if (value > 0) onBehalfUsPerCycle[area] = value;
    }
    return {
      busyUsPerCycle: median(cell.busy),
      onBehalfUsPerCycle,
      topFunctions: cell.top,
      runs: cell.busy.length,
    };
  }

  close(): void {
    if (this.#connected) this.#session.disconnect();
    this.#connected = false;
  }
}
