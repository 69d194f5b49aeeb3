-- inspect.lua: one node's view of a resource, for `inspect()`. Read-only; never returns the lease id.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  lease key        layout 'fenced': `<prefix>:{<resource>}:lease`; 'redlock': the resource name
-- KEYS[3]  lease record     `<leaseId>|<token>`: KEYS[2] itself ('fenced') or a key beside it ('redlock')
--
-- Returns
--   {1, held, token}  held is 1 when a lease key exists, else 0; token is the decimal token part of its record
--                     ('' when not held, when the value carries none, or when the record is not the holder's:
--                     a key set by another program in the 'redlock' layout).
--   {3}               NOT_INITIALIZED: the incarnation key is missing, or this Cluster slot sits on a shard that did
--                     not stamp it (include/node-state.lua); this node's view does not count.

-- @include lease-value
-- @include node-state

if not node_may_vote(KEYS[1], {}) then
  return {3}
end

local value = redis.call('GET', KEYS[2])
if value == false then
  return {1, 0, ''}
end
if KEYS[3] == KEYS[2] then
  return {1, 1, lease_token(value)}
end
local record = redis.call('GET', KEYS[3])
if record == false or lease_holder(record) ~= lease_holder(value) then
  return {1, 1, ''}
end
return {1, 1, lease_token(record)}
