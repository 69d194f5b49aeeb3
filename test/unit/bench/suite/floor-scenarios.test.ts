// Which scenarios of a run the floor (bench/suite/scenarios/floor.ts) joins as one more library, and when its own entry
// runs the throughput scenario: the rule of bench/suite/plan.ts, as `npm run bench -- --scenario …` selects them.
import { describe, expect, it } from 'vitest';
import { parseBenchOptions } from '../../../../bench/suite/options.js';
import { floorRunsThroughput, scenariosWithFloor, type ScenarioName } from '../../../../bench/suite/plan.js';

function selected(...argv: string[]): ScenarioName[] {
  const options = parseBenchOptions(argv);
  if (options === 'help') throw new Error('unexpected help');
  return options.scenarios;
}

describe('the scenarios the floor joins', () => {
  it('joins none without `floor`', () => {
    expect(scenariosWithFloor(selected('--scenario', 'throughput,scale'))).toEqual([]);
    expect(scenariosWithFloor(selected('--scenario', 'scale'))).toEqual([]);
  });

  it('joins each selected scenario that takes it: throughput, scale, or both', () => {
    expect(scenariosWithFloor(selected('--scenario', 'throughput,floor'))).toEqual(['throughput']);
    expect(scenariosWithFloor(selected('--scenario', 'scale,floor'))).toEqual(['scale']);
    expect(scenariosWithFloor(selected('--scenario', 'floor', '--scenario', 'scale,throughput'))).toEqual([
      'throughput',
      'scale',
    ]);
  });

  it('joins the throughput scenario when `floor` comes without throughput or scale', () => {
    expect(scenariosWithFloor(selected('--scenario', 'floor'))).toEqual(['throughput']);
    expect(scenariosWithFloor(selected('--scenario', 'floor,latency,handoff'))).toEqual(['throughput']);
  });

  it('joins scale but not throughput beside other scenarios when throughput is not selected', () => {
    expect(scenariosWithFloor(selected('--scenario', 'latency,scale,floor'))).toEqual(['scale']);
  });

  it('joins both in a run of every scenario', () => {
    expect(scenariosWithFloor(selected())).toEqual(['throughput', 'scale']);
  });

  it('runs the throughput scenario from its own entry only when neither throughput nor scale is selected', () => {
    expect(floorRunsThroughput(selected('--scenario', 'floor'))).toBe(true);
    expect(floorRunsThroughput(selected('--scenario', 'floor,latency'))).toBe(true);
    expect(floorRunsThroughput(selected('--scenario', 'throughput,floor'))).toBe(false);
    expect(floorRunsThroughput(selected('--scenario', 'scale,floor'))).toBe(false);
    expect(floorRunsThroughput(selected('--scenario', 'latency'))).toBe(false);
    expect(floorRunsThroughput(selected())).toBe(false);
  });
});
