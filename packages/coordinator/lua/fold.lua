-- fold.lua: folds the token registers of idle resources into the node's floor (DESIGN §3, "memory bounded by
-- active resources"), one SCAN step at a time, so a node holds keys only for live leases and recently used
-- resources.
--
-- Why it is safe: a register is deleted only in the same atomic call that raises the floor to at least its value,
-- and an absent register reads as the floor (include/decimal-token.lua). So this node's answer for every resource
-- stays at least every value it ever promised for it, and uniqueness and monotonicity (tokens/promise-rounds.ts)
-- hold exactly as before. Idleness only decides *which* registers go: a resource used again soon would otherwise
-- read the raised floor and need a second token round.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  floor            `<prefix>:node:floor`
-- KEYS[3]  fold lock        `<prefix>:node:fold`: one pass per interval per node, whichever process starts it; a
--                            step of a pass renews it once half of it is gone
-- ARGV[1]  SCAN cursor ('0' to start a pass)
-- ARGV[2]  SCAN COUNT hint (integer)
-- ARGV[3]  SCAN MATCH pattern of token registers (`<prefix>:{*:token`, glob-escaped; both key layouts)
-- ARGV[4]  minimum idle time in seconds (OBJECT IDLETIME, which has one-second resolution)
-- ARGV[5]  pass interval in milliseconds: starting (or renewing) a pass takes the fold lock for this long
--
-- Returns
--   {1, next, folded}  FOLDED: `next` is the cursor to continue from ('0' when the pass is done), `folded` how
--                      many registers this step deleted.
--   {11}               BUSY: a pass was started (by any process) less than ARGV[5] ms ago; nothing is folded.
--   {3}                NOT_INITIALIZED: the node is empty or under repair; nothing is folded.
--   {4}                CORRUPT: the floor holds something other than a decimal token; nothing is folded.
--
-- A register is idle when its resource has no lease key (no live lease) and nobody read or wrote it for ARGV[4]
-- seconds (every acquire and promise reads it). Registers that hold anything but a token are left alone.

-- @include decimal-token
-- @include fold-registers

local floor, refusal = fold_start(KEYS[1], KEYS[2])
if floor == nil then
  return refusal
end
if ARGV[1] == '0' then
  if not redis.call('SET', KEYS[3], '1', 'PX', ARGV[5], 'NX') then
    return {11}
  end
elseif redis.call('PTTL', KEYS[3]) * 2 < tonumber(ARGV[5]) then
  -- A paced pass (nodes/fold.ts) may outlast its interval: it keeps the lock, so no other process starts a pass
  -- beside it. Renewed once half of it is gone, not on every step: a write per step would be an fsync per step.
  redis.call('SET', KEYS[3], '1', 'PX', ARGV[5])
end
local min_idle = tonumber(ARGV[4])
local scan = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[3], 'COUNT', ARGV[2])
local folded = fold_registers(scan[2], KEYS[2], floor, min_idle)
return {1, scan[1], folded}
