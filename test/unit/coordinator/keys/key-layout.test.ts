import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  encodeResourceTag,
  keyLayoutOf,
  leaseKeyOfRecord,
  redlockKeySlotSplit,
  nodeStateKeys,
  resourceKeys,
  resourceNameClash,
  slotKeyTemplate,
  tokenKeyPattern,
} from '../../../../packages/coordinator/src/keys/key-layout.js';
import { keySlot, SLOT_COUNT, slotTag } from '../../../../packages/coordinator/src/keys/slots.js';

/** Redis' hash tag rule: the text between the first '{' and the first '}' after it, if non-empty. */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open < 0) return key;
  const close = key.indexOf('}', open + 1);
  if (close < 0 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

describe('resource keys', () => {
  it('namespaces and hash-tags every key of a resource', () => {
    expect(resourceKeys('fenced', 'orders/42')).toEqual({
      lease: 'fenced:{orders/42}:lease',
      record: 'fenced:{orders/42}:lease',
      token: 'fenced:{orders/42}:token',
      channel: 'fenced:{orders/42}:released',
    });
  });

  it('escapes braces and percent signs so the hash tag is the whole name', () => {
    expect(encodeResourceTag('a}b{c%d')).toBe('a%7Db%7Bc%25d');
    const keys = resourceKeys('fenced', '}{');
    expect(hashTag(keys.lease)).toBe('%7D%7B');
    expect(hashTag(keys.token)).toBe(hashTag(keys.lease));
  });

  it('never maps two resources to the same keys, and keeps one slot per resource', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.string({ minLength: 1 }), (a, b) => {
        const ka = resourceKeys('fenced', a);
        const kb = resourceKeys('fenced', b);
        expect(hashTag(ka.lease)).toBe(hashTag(ka.token));
        expect(hashTag(ka.lease)).toBe(hashTag(ka.channel));
        if (a !== b) {
          expect(ka.lease).not.toBe(kb.lease);
          expect(ka.token).not.toBe(kb.token);
          expect(ka.channel).not.toBe(kb.channel);
        }
      }),
    );
  });
});

describe("resource keys in the 'redlock' layout", () => {
  it("uses the resource name itself as the lease key, with the others beside it in that key's slot", () => {
    const keys = resourceKeys('fenced', '{redlock}x', 'redlock');
    const tag = slotTag(keySlot('{redlock}x'));
    expect(keys).toEqual({
      lease: '{redlock}x',
      record: `fenced:{${tag}}:%7Bredlock%7Dx:lease`,
      token: `fenced:{${tag}}:%7Bredlock%7Dx:token`,
      channel: `fenced:{${tag}}:%7Bredlock%7Dx:released`,
    });
  });

  it('keeps every key of a resource in one slot, maps different resources apart, and finds the lease key of a record', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), fc.string({ minLength: 1 }), (a, b) => {
        const ka = resourceKeys('fenced', a, 'redlock');
        const kb = resourceKeys('fenced', b, 'redlock');
        for (const key of [ka.record, ka.token, ka.channel]) expect(keySlot(key)).toBe(keySlot(a));
        expect(leaseKeyOfRecord('fenced', ka.record)).toBe(a);
        if (a !== b) {
          expect(ka.record).not.toBe(kb.record);
          expect(ka.token).not.toBe(kb.token);
        }
      }),
    );
  });

  it("finds a 'fenced' layout record's lease key: the record itself", () => {
    const keys = resourceKeys('fenced', 'orders/42');
    expect(leaseKeyOfRecord('fenced', keys.record)).toBe(keys.lease);
  });

  it('matches the token registers of both layouts with one SCAN pattern, and nothing else of a resource', () => {
    const pattern = new RegExp(`^${tokenKeyPattern('fenced').replace('{', '\\{').replace('*', '.*')}$`);
    for (const layout of ['fenced', 'redlock'] as const) {
      const keys = resourceKeys('fenced', '{redlock}x', layout);
      expect(pattern.test(keys.token)).toBe(true);
      expect(pattern.test(keys.record)).toBe(false);
    }
  });

  it('refuses resource names inside the prefix only in the redlock layout', () => {
    expect(resourceNameClash('fenced', 'fenced:{x}:token', 'redlock')).toBe(true);
    expect(resourceNameClash('fenced', 'fenced:{x}:token', 'fenced')).toBe(false);
    expect(resourceNameClash('fenced', '{redlock}x', 'redlock')).toBe(false);
  });
});

describe('slotKeyTemplate', () => {
  it("rebuilds every slot's node-state keys as head + tag + tail, for any prefix", () => {
    // One assertion over all 16 384 slots: an expect() per key made the test CPU-bound past its timeout on a busy
    // machine.
    const wrong: string[] = [];
    for (const prefix of ['fenced', 'a:b', 'pre{fix}', '']) {
      const { head, tails } = slotKeyTemplate(prefix);
      for (let slot = 0; slot < SLOT_COUNT; slot++) {
        const keys = nodeStateKeys(prefix, slot);
        for (const name of Object.keys(keys) as (keyof typeof keys)[]) {
          const built = head + slotTag(slot) + tails[name];
          if (built !== keys[name]) wrong.push(`${prefix} slot ${slot} ${name}: ${built} != ${keys[name]}`);
        }
      }
    }
    expect(wrong.slice(0, 5)).toEqual([]);
  });
});

describe("node-redlock's key beside a 'fenced' record (holdRedlockKey)", () => {
  it("keeps the 'fenced' record, register and channel, with the resource name as the lease key", () => {
    expect(resourceKeys('fenced', 'account:frank', 'fenced', true)).toEqual({
      ...resourceKeys('fenced', 'account:frank'),
      lease: 'account:frank',
    });
    // The 'redlock' layout's lease key is the name already.
    expect(resourceKeys('fenced', 'account:frank', 'redlock', true)).toEqual(
      resourceKeys('fenced', 'account:frank', 'redlock'),
    );
  });

  it("tells every key set's layout by its record, as the scripts' key_layout does", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), (name) => {
        expect(keyLayoutOf(resourceKeys('fenced', name))).toBe('fenced');
        expect(keyLayoutOf(resourceKeys('fenced', name, 'fenced', true))).toBe('fenced');
        expect(keyLayoutOf(resourceKeys('fenced', name, 'redlock'))).toBe('redlock');
      }),
    );
  });

  it('shares the record’s slot unless the name holds a hash tag of its own, a brace or a percent sign', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1 }), (name) => {
        const split = redlockKeySlotSplit('fenced', name, 'fenced', true);
        expect(split).toBe(keySlot(name) !== keySlot(resourceKeys('fenced', name).record));
        if (!/[{}%]/.test(name)) expect(split).toBe(false);
        expect(redlockKeySlotSplit('fenced', name, 'fenced', false)).toBe(false);
        expect(redlockKeySlotSplit('fenced', name, 'redlock', true)).toBe(false);
      }),
    );
    expect(redlockKeySlotSplit('fenced', '{account}:frank', 'fenced', true)).toBe(true);
  });

  it('refuses resource names inside the prefix with holdRedlockKey', () => {
    expect(resourceNameClash('fenced', 'fenced:{x}:lease', 'fenced', true)).toBe(true);
    expect(resourceNameClash('fenced', 'account:frank', 'fenced', true)).toBe(false);
  });
});
