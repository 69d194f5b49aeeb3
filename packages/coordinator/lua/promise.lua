-- promise.lua: the second token round (DESIGN §3), used only when the acquire's guess was refused by too
-- many nodes of the granting majority.
--
-- KEYS[1]  lease key        `<prefix>:{<resource>}:lease`
-- KEYS[2]  token register   `<prefix>:{<resource>}:token`
-- KEYS[3]  incarnation key  `<prefix>:node:incarnation`
-- ARGV[1]  lease id of the proposer
-- ARGV[2]  proposed token t (canonical decimal string, 1 ..= 2^63-1)
--
-- Returns
--   {1, cur}  PROMISED: t > cur, so cur is now t. If the lease key holds ARGV[1], its token part becomes t
--             (KEEPTTL) so extend and inspect report the token of this grant.
--   {5, cur}  REFUSED: t <= cur; cur (decimal string) is returned so the next proposal can go above it.
--   {3}       NOT_INITIALIZED: the incarnation key is missing; this node must not vote.
--   {4}       CORRUPT: the token register does not hold a decimal token.
--
-- A node promises a value at most once (strictly increasing cur): that is what makes tokens unique.

if redis.call('EXISTS', KEYS[3]) == 0 then
  return {3}
end

-- @include decimal-token

local cur = read_register(KEYS[2])
if cur == nil then
  return {4}
end

if not greater(ARGV[2], cur) then
  return {5, cur}
end
redis.call('SET', KEYS[2], ARGV[2])

local value = redis.call('GET', KEYS[1])
if value ~= false then
  local sep = string.find(value, '|', 1, true)
  -- Only the holder's own lease value is rewritten; another holder's key is never touched.
  if sep and string.sub(value, 1, sep - 1) == ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[2], 'KEEPTTL')
  end
end
return {1, ARGV[2]}
