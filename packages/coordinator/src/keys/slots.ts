/**
 * Redis Cluster's key-to-slot mapping, computed here so that keys can be built to land in a chosen slot.
 *
 * Why: a script's keys must share one slot (DESIGN §3c). A resource's own keys share it through the resource's hash
 * tag, but keys that are not named after the resource (a Cluster member's per-slot node state, or a token register
 * beside a lease key named exactly as the user's resource, in redlock's layout) need a hash tag that lands in the
 * resource's slot. {@link slotTag} gives, for every slot, a short fixed string whose hash is that slot.
 *
 * The mapping is Redis's own: CRC16 (XMODEM: polynomial 0x1021, initial value 0) of the key, or of its hash tag
 * when the key has one (the bytes between the first `{` and the first `}` after it, if that is not empty), modulo
 * 16384. Keys are hashed as UTF-8 bytes.
 */

/** Redis Cluster's number of hash slots. */
export const SLOT_COUNT = 16384;

const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte << 8;
    for (let bit = 0; bit < 8; bit++)
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[byte] = crc;
  }
  return table;
})();

function crc16(bytes: Uint8Array, start: number, end: number): number {
  let crc = 0;
  for (let i = start; i < end; i++)
    crc = ((crc << 8) ^ CRC16_TABLE[((crc >> 8) ^ bytes[i]!) & 0xff]!) & 0xffff;
  return crc;
}

/** CRC16 of the characters `start` to `end` of `text`, every one below U+0080 (so each is its own UTF-8 byte). */
function crc16Ascii(text: string, start: number, end: number): number {
  let crc = 0;
  for (let i = start; i < end; i++)
    crc = ((crc << 8) ^ CRC16_TABLE[((crc >> 8) ^ text.charCodeAt(i)) & 0xff]!) & 0xffff;
  return crc;
}

const encoder = new TextEncoder();

/** Whether every character of `text` is below U+0080. */
function isAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) > 0x7f) return false;
  return true;
}

/** The hash slot Redis Cluster stores `key` in. */
export function keySlot(key: string): number {
  if (isAscii(key)) {
    // Most keys: hashed from the string itself, without encoding it into a new byte array first.
    const open = key.indexOf('{');
    if (open !== -1) {
      const close = key.indexOf('}', open + 1);
      if (close > open + 1) return crc16Ascii(key, open + 1, close) % SLOT_COUNT;
    }
    return crc16Ascii(key, 0, key.length) % SLOT_COUNT;
  }
  const bytes = encoder.encode(key);
  const open = bytes.indexOf(0x7b); // '{'
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1); // '}'
    if (close > open + 1) return crc16(bytes, open + 1, close) % SLOT_COUNT;
  }
  return crc16(bytes, 0, bytes.length) % SLOT_COUNT;
}

let tags: readonly string[] | undefined;

/**
 * A short string (letters and digits, no `{` or `}`) whose hash is `slot`: a key containing `{<slotTag(s)>}` as its
 * first hash tag is stored in slot `s`. The same slot always gets the same tag. The table is built on first use
 * (about 50 000 CRC computations, a few milliseconds).
 */
export function slotTag(slot: number): string {
  if (!Number.isInteger(slot) || slot < 0 || slot >= SLOT_COUNT) {
    throw new RangeError(
      `slot must be an integer from 0 to ${SLOT_COUNT - 1}; got ${String(slot)} (${typeof slot})`,
    );
  }
  tags ??= buildSlotTags();
  return tags[slot]!;
}

function buildSlotTags(): readonly string[] {
  const found: (string | undefined)[] = new Array<string | undefined>(SLOT_COUNT);
  let missing = SLOT_COUNT;
  for (let n = 0; missing > 0; n++) {
    const candidate = n.toString(36);
    // Base-36 digits are ASCII: no byte array per candidate (encoding each took most of the build's time).
    const slot = crc16Ascii(candidate, 0, candidate.length) % SLOT_COUNT;
    if (found[slot] === undefined) {
      found[slot] = candidate;
      missing--;
    }
  }
  return Object.freeze(found as string[]);
}
