-- repair-raise.lua: raises the floor and a batch of token registers of a node under repair, and restores a batch
-- of live leases (DESIGN §3, the sealed repair, step 3), while the repair that started is still the one running.
--
-- KEYS[1]      repair marker    `<prefix>:node:repair`, value = the repair id
-- KEYS[2]      floor            `<prefix>:node:floor`
-- KEYS[2+i]    token register   `<prefix>:{<resource>}:token`                            (i = 1 .. r, r = ARGV[3])
-- KEYS[1+r+2j] lease record     `<leaseId>|<token>` (as read from a source)               (j = 1 .. l)
-- KEYS[2+r+2j] its lease key    the record itself ('fenced' layout) or the resource name ('redlock' layout)
-- ARGV[1]      repair id
-- ARGV[2]      the highest floor read from the sources (canonical decimal string, '0' for none)
-- ARGV[3]      r, the number of registers in this batch
-- ARGV[3+i]    the value for register i (canonical decimal string)
-- ARGV[2+r+2j] the value of record j (`<leaseId>|<token>`), ARGV[3+r+2j] its remaining ttl in ms (positive)
--
-- Returns
--   {1}  RAISED: floor = max(floor, ARGV[2]); each register = max(its value or the floor, ARGV[3+i]); each record
--        that is absent is set to its value for its remaining ttl, one of the same lease with a lower token is raised
--        to this token (its ttl kept), any other is left alone; a separate lease key that is absent is set to the
--        lease id.
--   {4}  CORRUPT: the floor or a register holds something other than a decimal token; nothing more is written.
--   {6}  NO_REPAIR_MARKER: the marker is gone or belongs to another repair (the node restarted again, or the
--        marker expired and another process took over): nothing changed, the repair must start over.
-- Raising is idempotent and never lowers anything, so a batch retried after a lost reply is harmless.

-- @include decimal-token
-- @include lease-value

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {6}
end
local r = tonumber(ARGV[3])
local l = r and (#KEYS - 2 - r) / 2
if r == nil or l < 0 or l % 1 ~= 0 or #ARGV ~= 3 + r + 2 * l then
  return redis.error_reply('ERR fenced repair-raise: expected 2 + r + 2l keys and 3 + r + 2l arguments')
end
local floor = read_floor(KEYS[2])
if floor == nil then
  return {4}
end
if ARGV[2] ~= '0' and greater(ARGV[2], floor) then
  redis.call('SET', KEYS[2], ARGV[2])
  floor = ARGV[2]
end
-- The registers in chunks: one MGET reads a chunk, one MSET writes the ones to raise (fewer calls into Redis and
-- one command per chunk in the AOF instead of one per register). Every chunk is checked before anything in it is
-- written, and a corrupt value stops the script, so "nothing more is written" holds per register as before.
local CHUNK = 500
for from = 1, r, CHUNK do
  local to = math.min(r, from + CHUNK - 1)
  local keys = {}
  for i = from, to do
    keys[#keys + 1] = KEYS[2 + i]
  end
  local values = redis.call('MGET', unpack(keys))
  local raise = {}
  for i = from, to do
    -- An absent register reads as the floor (raised above, if the sources' floor is higher).
    -- A present one reads as max(register, floor) (include/decimal-token.lua: a node never answers below its floor).
    local cur = values[i - from + 1]
    if cur == false then
      cur = floor
    elseif not is_token(cur) then
      return {4}
    else
      cur = max_token(cur, floor)
    end
    if greater(ARGV[3 + i], cur) then
      raise[#raise + 1] = KEYS[2 + i]
      raise[#raise + 1] = ARGV[3 + i]
    end
  end
  if #raise > 0 then
    redis.call('MSET', unpack(raise))
  end
end
for j = 1, l do
  local record_key, lease_key = KEYS[1 + r + 2 * j], KEYS[2 + r + 2 * j]
  local value, pttl = ARGV[2 + r + 2 * j], ARGV[3 + r + 2 * j]
  -- A copy an earlier attempt left (NX keeps it) is raised to this one's token when it is the same lease's.
  local present = redis.call('GET', record_key)
  if present == false then
    redis.call('SET', record_key, value, 'PX', pttl)
  elseif lease_holder(present) == lease_holder(value) and present ~= value and is_token(lease_token(value)) and
      (not is_token(lease_token(present)) or greater(lease_token(value), lease_token(present))) then
    redis.call('SET', record_key, value, 'KEEPTTL')
  end
  if lease_key ~= record_key then
    redis.call('SET', lease_key, lease_holder(value), 'PX', pttl, 'NX')
  end
end
return {1}
