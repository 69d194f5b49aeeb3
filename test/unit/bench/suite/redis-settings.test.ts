// `npm run bench -- --redis-config NAME=VALUE,…`: the settings an experiment applies to every node, parsed and
// refused as bench/suite/options.ts says.
import { describe, expect, it } from 'vitest';
import { parseBenchOptions, parseRedisSettings } from '../../../../bench/suite/options.js';

describe('--redis-config', () => {
  it('takes NAME=VALUE pairs, comma-separated or repeated, and makes the run partial', () => {
    const options = parseBenchOptions([
      '--scenario',
      'scale',
      '--redis-config',
      'auto-aof-rewrite-percentage=0,hz=20',
      '--redis-config',
      'activedefrag=no',
    ]);
    if (options === 'help') throw new Error('unexpected help');
    expect(options.redisSettings).toEqual({
      'auto-aof-rewrite-percentage': '0',
      hz: '20',
      activedefrag: 'no',
    });
    expect(options.complete).toBe(false);
    expect(options.out).toBe('bench/results/partial.tmp.json');
  });

  it('is empty without the option, and a run of everything stays complete', () => {
    const options = parseBenchOptions([]);
    if (options === 'help') throw new Error('unexpected help');
    expect(options.redisSettings).toEqual({});
    expect(options.complete).toBe(true);
  });

  it('refuses the settings fenced relies on, naming the setting', () => {
    for (const name of ['appendonly', 'appendfsync', 'maxmemory-policy']) {
      expect(() => parseRedisSettings([`${name}=no`])).toThrow(`--redis-config cannot change ${name}`);
    }
  });

  it('refuses what is not a NAME=VALUE pair, quoting what was given', () => {
    for (const pair of ['hz', 'hz=', '=1', 'HZ=1', 'hz=1 2', 'save=""']) {
      expect(() => parseRedisSettings([pair])).toThrow(`got '${pair}'`);
    }
  });
});
