-- extend.lua: compare-and-extend (DESIGN §2.6). Never touches the token register: extending keeps the token.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  settings         `<prefix>:node:settings` (hash; maxTtlMs bounds the ttl, nodeCount and keyLayout must
--                            match the caller's, each when present: include/node-state.lua)
-- KEYS[3]  lease key        layout 'fenced': `<prefix>:{<resource>}:lease`; 'redlock' (or 'fenced' with holdRedlockKey,
--                            node-redlock's key): the resource name
-- KEYS[4]  lease record     `<leaseId>|<token>`: KEYS[3] itself ('fenced') or a key beside it
-- ARGV[1]  lease id
-- ARGV[2]  new ttl in milliseconds (integer)
-- ARGV[3]  the number of nodes the caller counts its quorum over (decimal)
-- The key layout is the one the record is in (include/lease-value.lua, key_layout).
--
-- Returns
--   {1, token}  EXTENDED: the key held ARGV[1] and now expires in ARGV[2] ms (and the record with it, when it is
--               this lease's); token is the decimal token part of the record ('' when it carries none). With
--               node-redlock's key beside a 'fenced' record, a record of this lease without the key (a repair
--               restored the record alone) also counts: the key is set again, holding ARGV[1].
--   {2}         NOT_HELD: the key is absent (expired, released) or holds another lease.
--   {3}         NOT_INITIALIZED: the incarnation key is missing, or this Cluster slot sits on a shard that did not
--               stamp it (include/node-state.lua); this node must not vote.
--   {14, max}   TTL_ABOVE_MAX: the ttl exceeds the cluster's maxTtlMs recorded on this node; nothing changed.
--   {15, field, v} SETTINGS_MISMATCH: the caller's nodeCount or key layout is not the one recorded here (`v`);
--               nothing changed.
--
-- Extend records no promise, so it carries no seal epoch: a repair copies a lease with the remaining ttl it read,
-- and an extend that lands on a source after that read only leaves the repaired node's copy shorter (lease
-- exclusion is an efficiency matter; no token argument rests on it).

-- @include lease-value
-- @include node-state
-- @include settings-check

if not node_may_vote(KEYS[1], {KEYS[2]}) then
  return {3}
end
local recorded = recorded_settings(KEYS[2])
local mismatch = settings_mismatch(recorded, ARGV[3], key_layout(KEYS[3], KEYS[4]))
if mismatch ~= nil then
  return mismatch
end
if recorded.max_ttl ~= nil and tonumber(ARGV[2]) > recorded.max_ttl then
  return {14, recorded.max_ttl}
end

local value = redis.call('GET', KEYS[3])
-- node-redlock's key beside a 'fenced' record (holdRedlockKey, keys/key-layout.ts) is absent while the record is ours
-- after a repair, which restores the record alone (nodes/repair.ts): the lease is still held here, and the key is
-- taken again so node-redlock stays excluded on this node too.
if value == false and KEYS[4] ~= KEYS[3] and key_layout(KEYS[3], KEYS[4]) == 'fenced' then
  local record = redis.call('GET', KEYS[4])
  if record == false or lease_holder(record) ~= ARGV[1] then
    return {2}
  end
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[2])
  redis.call('PEXPIRE', KEYS[4], ARGV[2])
  return {1, lease_token(record)}
end
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
