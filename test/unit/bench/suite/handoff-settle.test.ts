// `npm run bench -- --handoff-settle-ms N`: how long the hand-off scenario's first holder holds the resource, parsed
// and refused as bench/suite/options.ts says, and carried into the plan and the report.
import { describe, expect, it } from 'vitest';
import { parseBenchOptions } from '../../../../bench/suite/options.js';

describe('--handoff-settle-ms', () => {
  it('takes a whole number of milliseconds and makes the run partial', () => {
    const options = parseBenchOptions(['--scenario', 'handoff', '--handoff-settle-ms', '10']);
    if (options === 'help') throw new Error('unexpected help');
    expect(options.handoffSettleMs).toBe(10);
    expect(options.complete).toBe(false);
  });

  it('is undefined without the option (the plan keeps its own), and a run of everything stays complete', () => {
    const options = parseBenchOptions([]);
    if (options === 'help') throw new Error('unexpected help');
    expect(options.handoffSettleMs).toBeUndefined();
    expect(options.complete).toBe(true);
  });

  it('even alone it keeps a run from being the full one', () => {
    const options = parseBenchOptions(['--handoff-settle-ms', '100']);
    if (options === 'help') throw new Error('unexpected help');
    expect(options.complete).toBe(false);
    expect(options.writeDocs).toBe(false);
  });

  it('refuses what is not a whole number from 1 to 60000, quoting it', () => {
    for (const given of ['0', '-5', '1.5', 'ten', '60001']) {
      expect(() => parseBenchOptions([`--handoff-settle-ms=${given}`])).toThrow(`got '${given}'`);
    }
  });
});
