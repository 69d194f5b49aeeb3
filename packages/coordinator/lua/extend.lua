-- extend.lua: compare-and-extend (DESIGN §2.6). Never touches the token register: extending keeps the token.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  settings         `<prefix>:node:settings` (hash; field maxTtlMs bounds the ttl when present)
-- KEYS[3]  lease key        layout 'fenced': `<prefix>:{<resource>}:lease`; 'redlock': the resource name
-- KEYS[4]  lease record     `<leaseId>|<token>`: KEYS[3] itself ('fenced') or a key beside it ('redlock')
-- ARGV[1]  lease id
-- ARGV[2]  new ttl in milliseconds (integer)
--
-- Returns
--   {1, token}  EXTENDED: the key held ARGV[1] and now expires in ARGV[2] ms (and the record with it, when it is
--               this lease's); token is the decimal token part of the record ('' when it carries none).
--   {2}         NOT_HELD: the key is absent (expired, released) or holds another lease.
--   {3}         NOT_INITIALIZED: the incarnation key is missing; this node must not vote.
--   {14, max}   TTL_ABOVE_MAX: the ttl exceeds the cluster's maxTtlMs recorded on this node; nothing changed.
--
-- Extend records no promise, so it carries no seal epoch: a repair copies a lease with the remaining ttl it read,
-- and an extend that lands on a source after that read only leaves the repaired node's copy shorter (lease
-- exclusion is an efficiency matter; no token argument rests on it).

-- @include lease-value
-- @include seal

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {3}
end
local max_ttl = recorded_max_ttl(KEYS[2])
if max_ttl ~= nil and tonumber(ARGV[2]) > max_ttl then
  return {14, max_ttl}
end

local value = redis.call('GET', KEYS[3])
-- Ownership check: a late extend must never prolong a successor's lease (F11).
if value == false or lease_holder(value) ~= ARGV[1] then
  return {2}
end
redis.call('PEXPIRE', KEYS[3], ARGV[2])
if KEYS[4] == KEYS[3] then
  return {1, lease_token(value)}
end
local record = redis.call('GET', KEYS[4])
if record == false or lease_holder(record) ~= ARGV[1] then
  return {1, ''}
end
redis.call('PEXPIRE', KEYS[4], ARGV[2])
return {1, lease_token(record)}
