-- repair-token.lua: raises one token register of a node that restarted empty to the highest `cur` read
-- from N - quorum + 1 initialized nodes (DESIGN §3, restart repair).
--
-- KEYS[1]  token register   `<prefix>:{<resource>}:token`
-- KEYS[2]  repair marker    `<prefix>:node:repair`, value = the repair id
-- ARGV[1]  highest cur seen (canonical decimal string)
-- ARGV[2]  repair id
--
-- Returns
--   {1, cur}  RAISED: cur is now max(cur, ARGV[1]) (decimal string).
--   {4}       CORRUPT: the register holds something other than a decimal token.
--   {6}       NO_REPAIR_MARKER: the marker is gone or belongs to another repair (the node restarted again,
--             or another process took over): nothing changed, the repair must start over.

if redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return {6}
end

-- @include decimal-token

local cur = read_register(KEYS[1])
if cur == nil then
  return {4}
end
if greater(ARGV[1], cur) then
  redis.call('SET', KEYS[1], ARGV[1])
  cur = ARGV[1]
end
return {1, cur}
