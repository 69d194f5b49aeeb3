-- repair-read.lua: reads one batch of token registers from a *source* node for the repair of another node
-- (DESIGN §3, restart repair, step 2), and verifies in the same atomic call that this source may be read.
--
-- A source must be initialized (it holds its incarnation key: it did not lose its state) and not under repair
-- itself, checked here, atomically with the read: a cached "it votes" view is not evidence. Across batches the
-- incarnation must stay the same, or the source restarted in between and its earlier batches mean nothing.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  repair marker    `<prefix>:node:repair`
-- KEYS[3]  floor            `<prefix>:node:floor`
-- ARGV[1]  SCAN cursor ('0' to start)
-- ARGV[2]  SCAN COUNT hint (integer)
-- ARGV[3]  SCAN MATCH pattern of token registers (`<prefix>:{*}:token`, glob-escaped)
-- ARGV[4]  the incarnation read by the first batch ('' on the first batch)
--
-- Returns
--   {1, incarnation, next, floor, key1, value1, key2, value2, ...}
--        READ: `next` is the SCAN cursor to continue from ('0' when done), `floor` this node's floor ('0' when
--        absent). Registers that hold anything but a decimal token are left out (the scripts refuse to vote on them).
--   {3}  NOT_INITIALIZED: no incarnation key: this node lost its state and must not be a source.
--   {8}  UNDER_REPAIR: a repair marker is present: this node must not be a source.
--   {9}  INCARNATION_CHANGED: the incarnation differs from ARGV[4]: the node restarted during the read.
--   {4}  CORRUPT: the floor holds something other than a decimal token.
--
-- The caller reads the floor of the *last* batch: a register folded into the floor during the scan (fold.lua)
-- may be missed by SCAN, but the floor read after it includes it (folding only raises the floor).

-- @include decimal-token

local incarnation = redis.call('GET', KEYS[1])
if incarnation == false then
  return {3}
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {8}
end
if ARGV[4] ~= '' and incarnation ~= ARGV[4] then
  return {9}
end
local floor = read_floor(KEYS[3])
if floor == nil then
  return {4}
end
local scan = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[3], 'COUNT', ARGV[2])
local reply = {1, incarnation, scan[1], floor}
for _, key in ipairs(scan[2]) do
  local value = redis.call('GET', key)
  if is_token(value) then
    reply[#reply + 1] = key
    reply[#reply + 1] = value
  end
end
return reply
