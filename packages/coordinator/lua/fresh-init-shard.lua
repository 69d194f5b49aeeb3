-- fresh-init-shard.lua: one step of a fresh initialization (fresh-init.lua) on every slot one master of a Redis
-- Cluster member serves, in one call: a brand-new member's initialization is three calls per shard instead of three
-- per slot (3 × 16 384). Each slot's step is exactly fresh-init.lua's, on that slot's own keys, so the argument of
-- nodes/fresh-cluster.ts holds for each (member, slot) pair as before; the whole call is atomic, which is more than
-- the argument needs.
--
-- The keys are in many slots, so they cannot be declared (Redis Cluster refuses a call whose declared keys cross
-- slots); they are passed in ARGV, built by redlock/keys.ts, and the call goes to the master's own connection. A
-- script without a shebang line may touch undeclared keys of several slots, but only slots this node serves: for
-- any other key (the slot moved, or is migrating and the key is not here) Redis raises "Script attempted to access
-- a non local key" and the call fails. The steps it ran before that stay done; each was a whole per-slot step, as
-- if the per-slot script had run there, and the caller falls back to fresh-init.lua per slot.
--
-- KEYS[]   none: the keys are in ARGV
-- ARGV[1]  'mark', 'check' or 'init' (fresh-init.lua)
-- ARGV[2]  nonce of this initialization
-- ARGV[3]  'mark': the marks' ttl in milliseconds; 'init': the new incarnation id; 'check': ''
-- ARGV[4]  m, how many settings values follow (twice the number of fields; 0 unless 'init')
-- ARGV[5 .. 4+m]  'init': the cluster's settings as field/value pairs
-- ARGV[5+m ..]    per slot, three keys: incarnation `<prefix>:node:{<slot tag>}:incarnation`, init marks
--                 `…:fresh`, settings `…:settings`
--
-- Returns one reply per slot, in ARGV's order, each exactly fresh-init.lua's:
--   {1}   OK
--   {10}  INITIALIZED
--   {12}  NO_INIT_MARK

-- @include fresh-init-step

local m = tonumber(ARGV[4])
local settings = {}
for i = 5, 4 + m do
  settings[#settings + 1] = ARGV[i]
end
local replies = {}
for i = 5 + m, #ARGV, 3 do
  replies[#replies + 1] = fresh_init_step(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[1], ARGV[2], ARGV[3], settings)
end
return replies
