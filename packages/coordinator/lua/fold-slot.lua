-- fold-slot.lua: folds idle token registers of one slot of a Redis Cluster member into that slot's floor (DESIGN
-- §3c, "folding per shard"). The caller SCANs each master for token registers and groups them by slot; this script
-- is fold.lua for one slot, given its registers instead of scanning.
--
-- Why it is safe: exactly fold.lua's argument, per slot: a register is deleted only in the same atomic call that
-- raises its slot's floor to at least its value, and an absent register of that slot reads as the slot's floor
-- (include/decimal-token.lua). Every key here is in one slot (the state keys are built for it, the registers were
-- grouped by it).
--
-- KEYS[1]    incarnation key  `<prefix>:node:{<slot tag>}:incarnation`
-- KEYS[2]    floor            `<prefix>:node:{<slot tag>}:floor`
-- KEYS[2+i]  token register   `<prefix>:{<tag>}:token` of the same slot                     (i = 1 .. n, n >= 1)
-- ARGV[1]    minimum idle time in seconds (OBJECT IDLETIME, which has one-second resolution)
--
-- Returns
--   {1, '0', folded}  FOLDED: `folded` registers deleted (the cursor is always '0': the slot's batch is done).
--   {3}               NOT_INITIALIZED: the slot is empty or under repair; nothing is folded.
--   {4}               CORRUPT: the floor holds something other than a decimal token; nothing is folded.
--
-- A register is idle when its resource has no lease record (no live lease) and nobody read or wrote it for ARGV[1]
-- seconds. Registers that hold anything but a token are left alone.

-- @include decimal-token
-- @include fold-registers

local floor, refusal = fold_start(KEYS[1], KEYS[2])
if floor == nil then
  return refusal
end
local min_idle = tonumber(ARGV[1])
local registers = {}
for i = 3, #KEYS do
  registers[#registers + 1] = KEYS[i]
end
local folded = fold_registers(registers, KEYS[2], floor, min_idle)
return {1, '0', folded}
