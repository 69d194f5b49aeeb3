import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SLOT_COUNT, keySlot, slotTag } from '../../../../packages/coordinator/src/keys/slots.js';

describe('keySlot', () => {
  it("matches Redis Cluster's published examples (CLUSTER KEYSLOT)", () => {
    // Values printed by `redis-cli CLUSTER KEYSLOT <key>` on Redis 7.0.
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('bar')).toBe(5061);
    expect(keySlot('123456789')).toBe(12739); // CRC16/XMODEM check value 0x31C3 mod 16384
    expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'));
    expect(keySlot('foo{}{bar}')).toBe(keySlot('foo{}{bar}')); // an empty first tag hashes the whole key
    expect(keySlot('foo{}{bar}')).not.toBe(keySlot('bar'));
    expect(keySlot('foo{{bar}}zap')).toBe(keySlot('{bar'));
    expect(keySlot('foo{bar}{zap}')).toBe(keySlot('bar'));
  });

  it('hashes UTF-8 bytes', () => {
    expect(keySlot('{é}x')).toBe(keySlot('é'));
    expect(keySlot('é')).not.toBe(keySlot('e'));
  });
});

describe('slotTag', () => {
  it('gives every slot a tag that hashes to it, without braces', () => {
    const seen = new Set<string>();
    for (let slot = 0; slot < SLOT_COUNT; slot++) {
      const tag = slotTag(slot);
      expect(tag).toMatch(/^[0-9a-z]+$/);
      expect(keySlot(`prefix:{${tag}}:node`)).toBe(slot);
      seen.add(tag);
    }
    expect(seen.size).toBe(SLOT_COUNT);
  });

  it('refuses a slot out of range, naming what was given', () => {
    expect(() => slotTag(SLOT_COUNT)).toThrow(/0 to 16383; got 16384 \(number\)/);
    expect(() => slotTag(1.5)).toThrow(RangeError);
  });
});

describe('keySlot against a plain reference (CRC16/XMODEM of the UTF-8 bytes)', () => {
  function reference(key: string): number {
    const bytes = new TextEncoder().encode(key);
    let start = 0;
    let end = bytes.length;
    const open = bytes.indexOf(0x7b);
    if (open !== -1) {
      const close = bytes.indexOf(0x7d, open + 1);
      if (close > open + 1) [start, end] = [open + 1, close];
    }
    let crc = 0;
    for (let i = start; i < end; i++) {
      crc ^= bytes[i]! << 8;
      for (let bit = 0; bit < 8; bit++)
        crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc % SLOT_COUNT;
  }

  it('agrees on ASCII keys (hashed from the string) and on any Unicode key (hashed from its bytes)', () => {
    const braces = fc.constantFrom('{', '}', 'a', 'é', '€', '😀', 'z', '0');
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.string({ unit: 'binary' }),
          fc.array(braces, { maxLength: 12 }).map((parts) => parts.join('')),
        ),
        (key) => keySlot(key) === reference(key),
      ),
      { numRuns: 2000 },
    );
  });
});
