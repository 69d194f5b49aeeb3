-- promise.lua: a later token round (DESIGN §3), used only when the acquire's guess was refused by too many nodes
-- of the granting majority.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  floor            `<prefix>:node:floor`
-- KEYS[3]  seal epoch       `<prefix>:node:seal` (absent = '')
-- KEYS[4]  settings         `<prefix>:node:settings` (hash; nodeCount and keyLayout must match the caller's, when
--                            recorded: include/node-state.lua)
-- KEYS[5]  lease record     `<leaseId>|<token>` (the lease key in the 'fenced' layout, the key beside it in 'redlock')
-- KEYS[6]  token register   `<prefix>:{<resource>}:token` (absent = floor; read as max(register, floor); on a stamped
--                            Cluster slot the promise goes to the floor, the slot's one register: include/node-state.lua)
-- ARGV[1]  lease id of the proposer
-- ARGV[2]  proposed token t (canonical decimal string, 1 ..= 2^63-1)
-- ARGV[3]  the seal epoch the caller last saw for this node ('' for none)
-- ARGV[4]  the key layout of KEYS[5] and KEYS[6] ('fenced' or 'redlock')
-- ARGV[5]  the number of nodes the caller counts its quorum over (decimal)
--
-- Returns
--   {1, cur}    PROMISED: t > cur, so cur is now t. If the lease record holds ARGV[1], its token part becomes t
--               (KEEPTTL) so extend and inspect report the token of this grant.
--   {5, cur}    REFUSED: t <= cur; cur (decimal string) is returned so the next proposal can go above it.
--   {3}         NOT_INITIALIZED: the incarnation key is missing, or this Cluster slot cannot prove it holds what it
--               promised (include/node-state.lua); this node must not vote.
--   {4}         CORRUPT: the token register or the floor does not hold a decimal token.
--   {13, epoch} SEALED: ARGV[3] is not the node's seal epoch (a repair read this node since the caller last
--               looked); nothing written. The caller remembers `epoch` for its next round.
--   {15, field, v} SETTINGS_MISMATCH: the caller's nodeCount or key layout is not the one recorded here (`v`);
--               nothing written.
--
-- A node promises a value at most once (strictly increasing cur): that is what makes tokens unique.

-- @include decimal-token
-- @include lease-value
-- @include seal
-- @include node-state
-- @include settings-check

local may_vote, stamped = node_may_vote(KEYS[1], {KEYS[2], KEYS[3], KEYS[4]})
if not may_vote then
  return {3}
end
local mismatch = settings_mismatch(recorded_settings(KEYS[4]), ARGV[5], ARGV[4])
if mismatch ~= nil then
  return mismatch
end

-- The seal: a round that began before a repair read this node records nothing here (nodes/repair.ts).
local epoch = seal_epoch(KEYS[3])
if ARGV[3] ~= epoch then
  return {13, epoch}
end

local cur = read_register(KEYS[6], KEYS[2])
if cur == nil then
  return {4}
end

if not greater(ARGV[2], cur) then
  return {5, cur}
end
redis.call('SET', promise_key(stamped, KEYS[6], KEYS[2]), ARGV[2])

local value = redis.call('GET', KEYS[5])
-- Only the holder's own lease value is rewritten; another holder's key is never touched.
if value ~= false and lease_holder(value) == ARGV[1] then
  redis.call('SET', KEYS[5], ARGV[1] .. '|' .. ARGV[2], 'KEEPTTL')
end
return {1, ARGV[2]}
