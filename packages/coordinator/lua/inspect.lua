-- inspect.lua: one node's view of a resource, for `inspect()`. Read-only; never returns the lease id.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  lease key        layout 'fenced': `<prefix>:{<resource>}:lease`; 'redlock' (or 'fenced' with holdRedlockKey,
--                            node-redlock's key): the resource name
-- KEYS[3]  lease record     `<leaseId>|<token>`: KEYS[2] itself ('fenced') or a key beside it
--
-- Returns
--   {1, held, token}  held is 1 when the lease key or the record exists, else 0; token is the decimal token part of
--                     the record ('' when not held, when the value carries none, or when the record is not the lease
--                     key's holder: a key set by another program under the resource name).
--   {3}               NOT_INITIALIZED: the incarnation key is missing, or this Cluster slot sits on a shard that did
--                     not stamp it (include/node-state.lua); this node's view does not count.

-- @include lease-value
-- @include node-state

if not node_may_vote(KEYS[1], {}) then
  return {3}
end

local value = redis.call('GET', KEYS[2])
if value == false then
  -- A record held without the lease key beside it: a Coordinator's lease under node-redlock's key (holdRedlockKey).
  local record = KEYS[3] ~= KEYS[2] and redis.call('GET', KEYS[3]) or false
  if record == false then
    return {1, 0, ''}
  end
  return {1, 1, lease_token(record)}
end
if KEYS[3] == KEYS[2] then
  return {1, 1, lease_token(value)}
end
local record = redis.call('GET', KEYS[3])
if record == false or lease_holder(record) ~= lease_holder(value) then
  return {1, 1, ''}
end
return {1, 1, lease_token(record)}
