-- repair-read-slot.lua: reads one *slot* of a Redis Cluster member as a repair source (DESIGN §3c, the sealed repair
-- per slot), verifies in the same atomic call that this slot may be read, and seals it. The argument is that of
-- repair-read.lua and nodes/repair.ts with "node" read as "(member, slot)"; nodes/cluster/slot-repair.ts holds it.
--
-- The whole slot is read in this one call: CLUSTER GETKEYSINSLOT lists its keys (all of them: the count is the
-- slot's own key count), so no SCAN cursor spans calls and nothing is written to the slot between the seal and the
-- read. A slot holds about 1/16384 of a member's keys.
--
-- KEYS[1]  incarnation key  `<prefix>:node:{<slot tag>}:incarnation` (all five in the slot read)
-- KEYS[2]  repair marker    `<prefix>:node:{<slot tag>}:repair`
-- KEYS[3]  floor            `<prefix>:node:{<slot tag>}:floor`
-- KEYS[4]  seal epoch       `<prefix>:node:{<slot tag>}:seal`
-- KEYS[5]  settings         `<prefix>:node:{<slot tag>}:settings` (hash)
-- ARGV[1]  the slot number (the slot of KEYS[1])
-- ARGV[2]  the start of every resource key (`<prefix>:{`): only those are read
-- ARGV[3]  the new seal epoch (non-empty)
--
-- Returns the replies of repair-read.lua, with `next` always '0' (the slot was read in full):
--   {1, incarnation, '0', floor, settings, registers, leases}
--   {3}  NOT_INITIALIZED: no incarnation key, or the slot cannot prove it holds what it promised
--        (include/node-state.lua): it must not be a source. Not sealed.
--   {8}  UNDER_REPAIR: a repair marker is present: this slot must not be a source. Not sealed.
--   {4}  CORRUPT: the floor holds something other than a decimal token.

-- @include source-keys

local incarnation, floor = check_source(KEYS, '')
if incarnation == nil then
  return floor
end
redis.call('SET', KEYS[4], ARGV[3])
local slot = tonumber(ARGV[1])
local count = redis.call('CLUSTER', 'COUNTKEYSINSLOT', slot)
local keys = redis.call('CLUSTER', 'GETKEYSINSLOT', slot, count)
local start = ARGV[2]
local registers = {}
local leases = {}
local own = {}
for _, key in ipairs(keys) do
  if string.sub(key, 1, #start) == start then
    own[#own + 1] = key
  end
end
collect_source_keys(own, floor, registers, leases)
return {1, incarnation, '0', floor, redis.call('HGETALL', KEYS[5]), registers, leases}
