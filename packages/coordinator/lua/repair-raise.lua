-- repair-raise.lua: raises the floor and a batch of token registers of a node under repair (DESIGN §3, restart
-- repair, step 2), while the repair that started is still the one running.
--
-- KEYS[1]    repair marker    `<prefix>:node:repair`, value = the repair id
-- KEYS[2]    floor            `<prefix>:node:floor`
-- KEYS[2+i]  token register   `<prefix>:{<resource>}:token`                                     (i = 1 .. n, n >= 0)
-- ARGV[1]    repair id
-- ARGV[2]    the highest floor read from the sources (canonical decimal string, '0' for none)
-- ARGV[2+i]  the value for register i (canonical decimal string)
--
-- Returns
--   {1}  RAISED: floor = max(floor, ARGV[2]) and each register = max(its value or the floor, ARGV[2+i]).
--   {4}  CORRUPT: the floor or a register holds something other than a decimal token; nothing more is written.
--   {6}  NO_REPAIR_MARKER: the marker is gone or belongs to another repair (the node restarted again, or the
--        marker expired and another process took over): nothing changed, the repair must start over.
-- Raising is idempotent and never lowers anything, so a batch retried after a lost reply is harmless.

-- @include decimal-token

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {6}
end
if #ARGV ~= #KEYS then
  return redis.error_reply('ERR fenced repair-raise: expected as many arguments as keys')
end
local floor = read_floor(KEYS[2])
if floor == nil then
  return {4}
end
if ARGV[2] ~= '0' and greater(ARGV[2], floor) then
  redis.call('SET', KEYS[2], ARGV[2])
end
for i = 3, #KEYS do
  local cur = read_register(KEYS[i], KEYS[2])
  if cur == nil then
    return {4}
  end
  if greater(ARGV[i], cur) then
    redis.call('SET', KEYS[i], ARGV[i])
  end
end
return {1}
