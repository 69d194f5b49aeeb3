import { describe, expect, it } from 'vitest';
import {
  configProblems,
  parseConfigReply,
  parseRole,
} from '../../../../packages/coordinator/src/nodes/node-check.js';

const good = { appendonly: 'yes', appendfsync: 'always', 'maxmemory-policy': 'noeviction' } as const;

describe('node start-up checks', () => {
  it('accepts fsync-always AOF, noeviction and the master role', () => {
    expect(configProblems({ config: good, role: 'master' })).toEqual([]);
  });

  it('names each wrong setting with what it must be', () => {
    const problems = configProblems({
      config: { appendonly: 'no', appendfsync: 'everysec', 'maxmemory-policy': 'allkeys-lru' },
      role: 'slave',
    });
    expect(problems).toHaveLength(4);
    expect(problems[0]).toMatch(/appendonly is 'no'; it must be 'yes'/);
    expect(problems[1]).toMatch(/appendfsync is 'everysec'; it must be 'always'/);
    expect(problems[2]).toMatch(/maxmemory-policy is 'allkeys-lru'; it must be 'noeviction'/);
    expect(problems[3]).toMatch(/role is 'slave'/);
  });

  it('refuses a node whose settings cannot be read', () => {
    expect(configProblems({ config: {}, role: undefined })).toHaveLength(4);
    expect(configProblems({ config: {}, role: undefined })[0]).toMatch(/CONFIG GET appendonly failed/);
  });

  it('parses CONFIG GET and INFO replies', () => {
    expect(parseConfigReply(['appendonly', 'yes', 'appendfsync', 'always'])).toEqual({
      appendonly: 'yes',
      appendfsync: 'always',
    });
    expect(parseConfigReply('nonsense')).toEqual({});
    expect(parseRole('# Replication\r\nrole:master\r\nconnected_slaves:0\r\n')).toBe('master');
    expect(parseRole('nothing')).toBeUndefined();
  });
});
