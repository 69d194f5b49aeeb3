-- inspect.lua: one node's view of a resource, for `inspect()`. Read-only; never returns the lease id.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  lease key        `<prefix>:{<resource>}:lease`, value `<leaseId>|<token>`
--
-- Returns
--   {1, held, token}  held is 1 when a lease key exists, else 0; token is its decimal token part ('' when
--                     not held or when the value carries none).
--   {3}               NOT_INITIALIZED: the incarnation key is missing; this node's view does not count.

-- @include lease-value

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {3}
end

local value = redis.call('GET', KEYS[2])
if value == false then
  return {1, 0, ''}
end
return {1, 1, lease_token(value)}
