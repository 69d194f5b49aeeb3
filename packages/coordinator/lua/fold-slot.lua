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

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {3}
end
local floor = read_floor(KEYS[2])
if floor == nil then
  return {4}
end
local min_idle = tonumber(ARGV[1])
local raised = floor
-- Every check first, then the floor, then the deletes: Redis does not roll a script back, so a call that fails half-way
-- (a key of another type, a key that moved) must not have deleted a register whose value the floor does not hold yet.
-- EXISTS and OBJECT IDLETIME do not touch a key's idle time; GET does, so it comes last.
local victims = {}
for i = 3, #KEYS do
  local key = KEYS[i]
  -- `<prefix>:{<tag>}:token` -> `<prefix>:{<tag>}:lease`: the lease's record, in either key layout (redlock/keys.ts)
  local lease_key = string.sub(key, 1, #key - 5) .. 'lease'
  if redis.call('EXISTS', lease_key) == 0 and redis.call('EXISTS', key) == 1
      and redis.call('OBJECT', 'IDLETIME', key) >= min_idle then
    local value = redis.call('GET', key)
    if is_token(value) then
      if greater(value, raised) then
        raised = value
      end
      victims[#victims + 1] = key
    end
  end
end
if raised ~= floor then
  redis.call('SET', KEYS[2], raised)
end
for _, key in ipairs(victims) do
  redis.call('DEL', key)
end
local folded = #victims
return {1, '0', folded}
