import { describe, expect, it } from 'vitest';
import {
  chunksOf,
  parseClusterSlots,
  shardChunksOf,
  SHARD_SCRIPT_SLOTS,
  slotsOf,
} from '../../../../../packages/coordinator/src/nodes/cluster/slot-layout.js';
import { slotTag } from '../../../../../packages/coordinator/src/keys/slots.js';

describe('a Cluster member’s slot layout', () => {
  it('reads CLUSTER SLOTS into ranges with their master and replicas, skipping what it cannot read', () => {
    const reply = [
      [0, 5460, ['10.0.0.1', 7000, 'id1'], ['10.0.0.4', 7003, 'id4']],
      [5461, 10922, ['10.0.0.2', 7001, 'id2']],
      ['junk'],
      [10923, 16383, [7002]],
    ];
    expect(parseClusterSlots(reply)).toEqual([
      { start: 0, end: 5460, master: '10.0.0.1:7000', replicas: ['10.0.0.4:7003'] },
      { start: 5461, end: 10922, master: '10.0.0.2:7001', replicas: [] },
    ]);
    expect(parseClusterSlots('no')).toEqual([]);
  });

  it('lists a master’s slots once per layout, and cuts them into script-sized calls with their tags', () => {
    const ranges = [
      { start: 0, end: 1_499, master: 'a:1', replicas: [] },
      { start: 3_000, end: 3_099, master: 'a:1', replicas: [] },
    ];
    const slots = slotsOf(ranges);
    expect(slots).toHaveLength(1_600);
    expect(slotsOf([...ranges])).toBe(slots); // the same list for the same layout
    const chunks = shardChunksOf(ranges);
    expect(chunks.map((c) => c.slots.length)).toEqual([SHARD_SCRIPT_SLOTS, 1_600 - SHARD_SCRIPT_SLOTS]);
    expect(chunks[1]!.slots.at(-1)).toBe(3_099);
    expect(chunks[0]!.tags.split(',')[2]).toBe(slotTag(2));
    expect(chunksOf([1, 2, 3, 4, 5], 2)).toEqual([[1, 2], [3, 4], [5]]);
  });
});
