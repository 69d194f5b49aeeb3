import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { MalformedReplyError, NodeCallError } from '@fenced/coordinator';
import {
  interpretReply,
  splitBatchReply,
  SCRIPT_CODES,
  ScriptCode,
  type ScriptName,
} from '../../../../packages/coordinator/src/scripts/script-results.js';
import {
  loadScriptSource,
  SCRIPT_NAMES,
  scriptUrl,
} from '../../../../packages/coordinator/src/scripts/scripts.js';

/** A well-formed sample reply for every (script, code) pair the contracts allow. */
const SAMPLES: { [S in ScriptName]: Record<number, unknown[]> } = {
  acquire: {
    1: [1, 0, '42'],
    2: [2, 1500, '9223372036854775807'],
    3: [3],
    4: [4],
    7: [7, 'ERR x'],
    13: [13, 'epoch-2'],
    14: [14, 3000],
    15: [15, 'keyLayout', 'fenced'],
  },
  promise: { 1: [1, '43'], 5: [5, '44'], 3: [3], 4: [4], 13: [13, ''], 15: [15, 'nodeCount', '5'] },
  extend: { 1: [1, '42'], 2: [2], 3: [3], 14: [14, 3000], 15: [15, 'keyLayout', 'redlock'] },
  release: { 1: [1], 2: [2], 7: [7, 'ERR x'] },
  inspect: { 1: [1, 1, '42'], 3: [3] },
  'repair-marker': { 1: [1], 10: [10], 11: [11], 6: [6] },
  'repair-read': {
    1: [
      1,
      'incarnation-1',
      '17',
      '100',
      ['maxTtlMs', '3000', 'nodeCount', '3'],
      ['fenced:{a}:token', '42', 'fenced:{b}:token', '7'],
      ['fenced:{a}:lease', 'lease-1|42', 1500],
    ],
    3: [3],
    4: [4],
    8: [8],
    9: [9],
  },
  'repair-read-slot': {
    1: [
      1,
      'incarnation-1',
      '0',
      '100',
      ['maxTtlMs', '3000', 'nodeCount', '3'],
      ['fenced:{a}:token', '42'],
      ['fenced:{a}:lease', 'lease-1|42', 1500],
    ],
    3: [3],
    4: [4],
    8: [8],
    9: [9],
  },
  'repair-raise': { 1: [1], 4: [4], 6: [6] },
  'finish-repair': { 1: [1], 6: [6] },
  fold: { 1: [1, '0', 3], 11: [11], 3: [3], 4: [4] },
  'fold-slot': { 1: [1, '0', 3], 3: [3], 4: [4] },
  'fresh-init': { 1: [1], 10: [10], 12: [12] },
  // One character per slot: each code as a slot's step.
  'fresh-init-shard': { 1: [1, '11'], 10: [1, 'a1'], 12: [1, 'c'] },
  'probe-shard': { 1: [1, '101', [2, 'epoch-1']] },
  settings: { 1: [1, ['maxTtlMs', '3000']], 3: [3] },
};

describe('script result codes', () => {
  it('lists, for every script, exactly the codes its Lua source returns', () => {
    for (const name of SCRIPT_NAMES) {
      const lua = loadScriptSource(name);
      // A reply is `return {code, …}`, built up from `local reply = {code, …}` (repair-read's batch), or a refusal
      // an included check hands back as `return nil, {code}` (include/source-keys.lua) for the script to return.
      const returned = new Set(
        [...lua.matchAll(/(?:return|return nil,|local reply =) \{(\d+)/g)].map((m) => Number(m[1])),
      );
      expect([...returned].sort(), name).toEqual([...SCRIPT_CODES[name]].sort());
    }
  });

  it('opens every script with its KEYS/ARGV/returns contract', () => {
    for (const name of SCRIPT_NAMES) {
      const lua = readFileSync(scriptUrl(name), 'utf8');
      const header = lua.slice(0, lua.indexOf('\n\n'));
      expect(header, name).toMatch(/^-- /);
      expect(lua, name).toMatch(/-- KEYS\[/);
      expect(lua, name).toMatch(/-- Returns/);
    }
  });

  it('inlines every included helper, so no script reaches Redis with an @include line', () => {
    for (const name of SCRIPT_NAMES) {
      const lua = loadScriptSource(name);
      expect(lua, name).not.toMatch(/^-- @include /m);
      if (readFileSync(scriptUrl(name), 'utf8').includes('@include decimal-token')) {
        expect(lua, name).toMatch(/local function greater\(a, b\)/);
      }
    }
  });

  it('maps every code of every script to a result', () => {
    for (const name of SCRIPT_NAMES) {
      for (const code of SCRIPT_CODES[name]) {
        const sample = SAMPLES[name][code];
        expect(sample, `${name} code ${code}`).toBeDefined();
        if (code === ScriptCode.CALL_ERROR) {
          // One call of a batch failed on the node: it surfaces as that call's error, never as a result.
          expect(() => interpretReply(name, sample), `${name} code ${code}`).toThrow(NodeCallError);
        } else {
          expect(() => interpretReply(name, sample), `${name} code ${code}`).not.toThrow();
        }
      }
    }
  });

  it('reads fields into typed results, tokens as bigint', () => {
    expect(interpretReply('acquire', [1, 0, '9007199254740993'])).toEqual({
      kind: 'granted',
      promised: false,
      cur: 9_007_199_254_740_993n,
    });
    // A promised grant does not echo the register: it holds the proposal the caller sent.
    expect(interpretReply('acquire', [1, 1])).toEqual({ kind: 'granted', promised: true });
    expect(interpretReply('acquire', [2, -1, '0'])).toEqual({ kind: 'held', pttlMs: -1, cur: 0n });
    expect(interpretReply('extend', [1, ''])).toEqual({ kind: 'extended', token: null });
    expect(interpretReply('inspect', [1, 0, ''])).toEqual({ kind: 'view', held: false, token: null });
    expect(interpretReply('promise', [5, '77'])).toEqual({ kind: 'refused', cur: 77n });
  });

  it('turns malformed replies into MalformedReplyError instead of crashing', () => {
    const malformed: Array<[ScriptName, unknown]> = [
      ['acquire', null],
      ['acquire', 'OK'],
      ['acquire', []],
      ['acquire', [9]],
      ['acquire', [ScriptCode.OK, 0]],
      ['acquire', [ScriptCode.OK, 1, '5']],
      ['acquire', [ScriptCode.OK, 2, '5']],
      ['acquire', [ScriptCode.OK, 0, 5]],
      ['acquire', [ScriptCode.OK, 0, '05']],
      ['acquire', [ScriptCode.OK, 0, '9223372036854775808']],
      ['acquire', [ScriptCode.HELD, 'soon', '5']],
      ['acquire', [ScriptCode.NOT_INITIALIZED, 'extra']],
      ['promise', [ScriptCode.HELD]],
      ['release', [ScriptCode.REFUSED]],
      ['release', [ScriptCode.CALL_ERROR]],
      ['release', [ScriptCode.CALL_ERROR, 'ERR x', 'extra']],
      ['extend', [ScriptCode.OK, '-1']],
      ['inspect', [ScriptCode.OK, 1]],
    ];
    for (const [name, reply] of malformed) {
      expect(() => interpretReply(name, reply), JSON.stringify(reply)).toThrow(MalformedReplyError);
    }
  });

  it('splits a batch reply into one reply per call, and refuses any other shape', () => {
    expect(splitBatchReply('release', [[1], [2]], 2)).toEqual([[1], [2]]);
    for (const reply of [null, 'OK', [[1]], [[1], [1], [1]], {}]) {
      expect(() => splitBatchReply('release', reply, 2), JSON.stringify(reply)).toThrow(MalformedReplyError);
    }
  });
});
