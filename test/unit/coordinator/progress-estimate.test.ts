// The operator commands' progress lines: one per phase change, then at most one per interval while a phase
// lasts, with done/total and the time left estimated from the rate since the phase began, or the time spent.
import { describe, expect, it } from 'vitest';
import { ProgressEstimate, formatDuration } from '../../../packages/coordinator/src/cli/progress-estimate.js';

function withClock() {
  let now = 1_000;
  const estimate = new ProgressEstimate({ now: () => now, intervalMs: 2_000 });
  return { estimate, advance: (ms: number) => (now += ms) };
}

describe('ProgressEstimate', () => {
  it('prints a line for every phase change, however quick', () => {
    const { estimate, advance } = withClock();
    expect(estimate.step({ phase: 'claiming', detail: 'claiming the marker' })?.text).toBe(
      'claiming the marker',
    );
    advance(1);
    expect(estimate.step({ phase: 'reading', detail: 'reading registers' })?.text).toBe('reading registers');
    advance(1);
    const copying = estimate.step({
      phase: 'copying',
      detail: 'copying 4000 registers',
      done: 0,
      total: 4_000,
    });
    expect(copying?.text).toBe('copying 4000 registers');
    expect(copying?.elapsedMs).toBe(2);
  });

  it('reports counted progress at most once per interval, with the time left from the rate so far', () => {
    const { estimate, advance } = withClock();
    estimate.step({ phase: 'copying', detail: 'copying', done: 0, total: 10_000 });
    advance(1_000);
    expect(estimate.tick()).toBeUndefined();
    // within the interval: nothing
    expect(
      estimate.step({ phase: 'copying', detail: 'copying', done: 1_000, total: 10_000 }),
    ).toBeUndefined();
    advance(1_000);
    // 2 000 registers in 2 s: 8 000 left at 1 per ms
    const line = estimate.step({ phase: 'copying', detail: 'copying', done: 2_000, total: 10_000 });
    expect(line?.text).toBe('copying (2000 of 10000, 20%; about 8 s left)');
    expect(line?.etaMs).toBe(8_000);
    expect(estimate.current()).toEqual({ elapsedMs: 2_000, etaMs: 8_000 });
    advance(2_000);
    // no new step for an interval: the same count, and the rate as of now (2 000 in 4 s) makes the estimate longer
    expect(estimate.tick()?.text).toBe('copying (2000 of 10000, 20%; about 16 s left)');
  });

  it('keeps a long phase without counts from going silent: its time so far, once per interval', () => {
    const { estimate, advance } = withClock();
    estimate.step({ phase: 'waiting', detail: 'another process repairs it; waiting' });
    advance(1_999);
    expect(estimate.tick()).toBeUndefined();
    advance(1);
    expect(estimate.tick()?.text).toBe('waiting: 2 s so far');
    advance(500);
    expect(estimate.tick()).toBeUndefined();
    advance(63_000);
    expect(estimate.tick()?.text).toBe('waiting: 1 min 6 s so far');
  });

  it('says nothing before the first step, and nothing is left once all is done', () => {
    const { estimate, advance } = withClock();
    advance(10_000);
    expect(estimate.tick()).toBeUndefined();
    estimate.step({ phase: 'finishing', detail: 'finishing', done: 5, total: 5 });
    expect(estimate.current().etaMs).toBe(0);
  });

  it('formats durations for people', () => {
    expect(formatDuration(850)).toBe('850 ms');
    expect(formatDuration(12_400)).toBe('12 s');
    expect(formatDuration(200_000)).toBe('3 min 20 s');
    expect(formatDuration(7_500_000)).toBe('2 h 5 min');
  });
});
