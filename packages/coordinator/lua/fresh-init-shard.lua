-- fresh-init-shard.lua: one step of a fresh initialization (fresh-init.lua) on many slots one master of a Redis
-- Cluster member serves, in one call (up to 1 024 slots: nodes/cluster/slot-layout.ts, SHARD_SCRIPT_SLOTS, since a
-- script holds the master while it runs): a brand-new member's initialization is a few calls per shard instead of
-- three per slot (3 × 16 384). Each slot's step is exactly fresh-init.lua's, on that slot's own keys, so the argument of
-- nodes/fresh-cluster.ts holds for each (member, slot) pair as before; the whole call is atomic, which is more than
-- the argument needs.
--
-- The keys are in many slots, so they cannot be declared (Redis Cluster refuses a call whose declared keys cross
-- slots): the call carries each slot's tag and the text around it (keys/key-layout.ts, slotKeyTemplate: key = head ..
-- tag .. tail), and goes to the master's own connection. A script without a shebang line may touch undeclared keys
-- of several slots, but only slots this node serves: for any other key (the slot moved, or is migrating and the key
-- is not here) Redis raises "Script attempted to access a non local key" and the call fails. The steps it ran
-- before that stay done; each was a whole per-slot step, as if the per-slot script had run there, and the caller
-- falls back to fresh-init.lua per slot.
--
-- KEYS[]   none: the keys are built from ARGV
-- ARGV[1]  'mark', 'check' or 'init' (fresh-init.lua)
-- ARGV[2]  nonce of this initialization
-- ARGV[3]  'mark': the mark's ttl in milliseconds; 'init': the new incarnation id; 'check': ''
-- ARGV[4]  head of every node-state key, `<prefix>:node:{`
-- ARGV[5]  tail of the incarnation key `}:incarnation`; ARGV[6] of this initialization's mark `}:fresh:<nonce>`;
--          ARGV[7] of the settings `}:settings`; ARGV[8] of the floor `}:floor`; ARGV[9] of the seal `}:seal`
-- ARGV[10] m, how many settings values follow (twice the number of fields; 0 unless 'init')
-- ARGV[11 .. 10+m]  'init': the cluster's settings as field/value pairs
-- ARGV[11+m]      the slots' tags, joined by ',' (a tag is [0-9a-z]+; one argument, not thousands)
--
-- Returns
--   {1, steps}  `steps` holds one character per slot, in the tags' order: fresh-init.lua's reply code for that
--               slot in base 36 — '1' OK, 'a' INITIALIZED (10), 'c' NO_INIT_MARK (12). One string, not an array
--               per slot: a thousand nested replies cost the caller's event loop more than the step cost Redis.

-- @include node-state
-- @include fresh-init-step

local head = ARGV[4]
local m = tonumber(ARGV[10])
local settings = {}
for i = 11, 10 + m do
  settings[#settings + 1] = ARGV[i]
end
local base36 = '0123456789abcdefghijklmnopqrstuvwxyz'
local steps = {}
for tag in string.gmatch(ARGV[11 + m], '[^,]+') do
  local base = head .. tag
  local code = fresh_init_step(base .. ARGV[5], base .. ARGV[6], base .. ARGV[7], base .. ARGV[8], base .. ARGV[9],
    ARGV[1], ARGV[2], ARGV[3], settings)[1]
  steps[#steps + 1] = string.sub(base36, code + 1, code + 1)
end
return {1, table.concat(steps)}
