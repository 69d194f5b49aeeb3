-- release.lua: compare-and-delete (DESIGN §2.5), then wake the waiters (§2.7).
--
-- KEYS[1]  lease key        `<prefix>:{<resource>}:lease`, value `<leaseId>|<token>`
-- ARGV[1]  lease id
-- ARGV[2]  pub/sub channel  `<prefix>:{<resource>}:released`
--
-- Returns
--   {1}  RELEASED: the key held ARGV[1]; it is deleted and a message was published on ARGV[2].
--   {2}  NOT_HELD: the key is absent (already expired or released) or holds another lease: nothing changed.
--
-- Release does not check the incarnation key: deleting our own lease is always safe, and a node that
-- restarted empty holds nothing of ours anyway.

local value = redis.call('GET', KEYS[1])
if value == false then
  return {2}
end
local sep = string.find(value, '|', 1, true)
local holder = sep and string.sub(value, 1, sep - 1) or value
-- Ownership check: a late release must never delete a successor's lease (F11).
if holder ~= ARGV[1] then
  return {2}
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], '1')
return {1}
