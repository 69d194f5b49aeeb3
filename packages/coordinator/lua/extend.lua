-- extend.lua: compare-and-extend (DESIGN §2.6). Never touches the token register: extending keeps the token.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  lease key        `<prefix>:{<resource>}:lease`, value `<leaseId>|<token>`
-- ARGV[1]  lease id
-- ARGV[2]  new ttl in milliseconds (integer)
--
-- Returns
--   {1, token}  EXTENDED: the key held ARGV[1] and now expires in ARGV[2] ms; token is the decimal token part
--               stored with the lease ('' when the value carries none).
--   {2}         NOT_HELD: the key is absent (expired, released) or holds another lease.
--   {3}         NOT_INITIALIZED: the incarnation key is missing; this node must not vote.

-- @include lease-value

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {3}
end

local value = redis.call('GET', KEYS[2])
-- Ownership check: a late extend must never prolong a successor's lease (F11).
if value == false or lease_holder(value) ~= ARGV[1] then
  return {2}
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return {1, lease_token(value)}
