-- probe-shard.lua: what a probe of a Redis Cluster member reads of the slots one master serves, in one call: whether
-- the slot holds its incarnation key (it votes) and its seal epoch (DESIGN §3c). Read-only. One call per 1 024
-- slots of a master (nodes/cluster/slot-layout.ts, SHARD_SCRIPT_SLOTS: a script holds the master while it runs)
-- instead of two GETs per slot (2 × 16 384 per member at every start-up and re-check).
--
-- The keys are in many slots, so they cannot be declared: the call carries each slot's tag and the text around it
-- (keys/key-layout.ts, slotKeyTemplate: key = head .. tag .. tail), and goes to the master's own connection. Redis
-- refuses, inside the script, a key of a slot this node does not serve ("Script attempted to access a non local
-- key"); the caller then reads those slots one by one.
--
-- KEYS[]   none: the keys are built from ARGV
-- ARGV[1]  head of every node-state key, `<prefix>:node:{`
-- ARGV[2]  tail of the incarnation key `}:incarnation`; ARGV[3] of the seal epoch `}:seal`
-- ARGV[4]  the slots' tags, joined by ',' (a tag is [0-9a-z]+; one argument, not thousands)
-- ARGV[5]  tail of the floor `}:floor`; ARGV[6] of the settings `}:settings` (with the seal: a stamped slot's
--          witnesses, include/node-state.lua)
--
-- Returns
--   {1, flags, epochs}  OK: `flags` holds one character per slot in the tags' order, '1' where the slot may vote
--                       (include/node-state.lua: its incarnation key, and for a stamped slot this shard's stamp and
--                       every witness), else '0'; `epochs` lists {position, epoch} pairs (position 1-based, in the tags'
--                       order) for the slots whose seal epoch is set.

-- @include node-state

local flags = {}
local epochs = {}
local position = 0
for tag in string.gmatch(ARGV[4], '[^,]+') do
  position = position + 1
  local base = ARGV[1] .. tag
  flags[#flags + 1] = node_may_vote(base .. ARGV[2], {base .. ARGV[5], base .. ARGV[3], base .. ARGV[6]}) and '1' or '0'
  local epoch = redis.call('GET', base .. ARGV[3])
  if epoch then
    epochs[#epochs + 1] = position
    epochs[#epochs + 1] = epoch
  end
end
return {1, table.concat(flags), epochs}
