-- acquire.lua: one Redlock vote plus the folded-in token promise (DESIGN §2 and §3), in one round trip.
--
-- KEYS[1]  lease key        `<prefix>:{<resource>}:lease`, value `<leaseId>|<token>`
-- KEYS[2]  token register   `<prefix>:{<resource>}:token`, value `cur` as a decimal string (absent = 0)
-- KEYS[3]  incarnation key  `<prefix>:node:incarnation` (absent = this node restarted empty)
-- ARGV[1]  lease id (base64url, never contains '|')
-- ARGV[2]  ttl in milliseconds (integer)
-- ARGV[3]  proposed token t (canonical decimal string, 1 ..= 2^63-1)
--
-- Returns
--   {1, promised, cur}  GRANTED: the lease key now holds `<leaseId>|<t>` for ttl ms. promised is 1 when
--                       t > cur (cur is now t), 0 when refused (cur unchanged). cur is a decimal string.
--   {2, pttl, cur}      HELD: another lease holds the key; pttl is its remaining ttl in ms (-1: no expiry).
--   {3}                 NOT_INITIALIZED: the incarnation key is missing; this node must not vote.
--   {4}                 CORRUPT: the token register does not hold a decimal token; this node must not vote.
--
-- Tokens are compared as decimal strings (length, then digit by digit): Lua numbers are doubles and lose
-- precision above 2^53, so a token is never passed through tonumber.

if redis.call('EXISTS', KEYS[3]) == 0 then
  return {3}
end

-- @include decimal-token

local cur = read_register(KEYS[2])
if cur == nil then
  return {4}
end

local value = redis.call('GET', KEYS[1])
if value ~= false then
  local sep = string.find(value, '|', 1, true)
  local holder = sep and string.sub(value, 1, sep - 1) or value
  -- Ownership check: a key holding our own id is a vote for us (an earlier attempt of this same acquire
  -- reached this node), so retries never block themselves; any other value belongs to someone else.
  if holder ~= ARGV[1] then
    return {2, redis.call('PTTL', KEYS[1]), cur}
  end
end

local promised = 0
if greater(ARGV[3], cur) then
  redis.call('SET', KEYS[2], ARGV[3])
  cur = ARGV[3]
  promised = 1
end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[3], 'PX', ARGV[2])
return {1, promised, cur}
