-- repair-read.lua: reads one batch of a *source* node for the repair of another node (DESIGN §3, the sealed
-- repair, step 2), verifies in the same atomic call that this source may be read, and — on the first batch — seals
-- it. nodes/repair.ts holds the safety argument.
--
-- A source must be initialized (it holds its incarnation key: it did not lose its state) and not under repair
-- itself, checked here, atomically with the read: a cached "it votes" view is not evidence. Across batches the
-- incarnation must stay the same, or the source restarted in between and its earlier batches mean nothing.
--
-- The seal: the first batch (ARGV[5] non-empty) replaces this node's seal epoch with ARGV[5] in the same atomic call
-- that verifies the node and starts the read. Every promise-recording script (acquire.lua, promise.lua) refuses a
-- call that carries another epoch, so no round that began before this moment records anything here afterwards:
-- what this read returns (or a later batch, or the floor of the last batch) is final for every such round.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  repair marker    `<prefix>:node:repair`
-- KEYS[3]  floor            `<prefix>:node:floor`
-- KEYS[4]  seal epoch       `<prefix>:node:seal`
-- KEYS[5]  settings         `<prefix>:node:settings` (hash)
-- ARGV[1]  SCAN cursor ('0' to start)
-- ARGV[2]  SCAN COUNT hint (integer)
-- ARGV[3]  SCAN MATCH pattern of resource keys (`<prefix>:{*`, glob-escaped): token registers and lease keys
-- ARGV[4]  the incarnation read by the first batch ('' on the first batch)
-- ARGV[5]  the new seal epoch (first batch), or '' (later batches: no seal)
--
-- Returns
--   {1, incarnation, next, floor, settings, registers, leases}
--        READ: `next` is the SCAN cursor to continue from ('0' when done), `floor` this node's floor ('0' when
--        absent), `settings` the settings hash as a flat field/value array, `registers` a flat array of
--        key, value (only registers that hold a decimal token), `leases` a flat array of key, value, pttl (only
--        lease keys with a positive remaining ttl).
--   {3}  NOT_INITIALIZED: no incarnation key (this node lost its state), or a Cluster slot that cannot prove it
--        holds what it promised (include/node-state.lua): it must not be a source. Not sealed.
--   {8}  UNDER_REPAIR: a repair marker is present: this node must not be a source. Not sealed.
--   {9}  INCARNATION_CHANGED: the incarnation differs from ARGV[4]: the node restarted during the read.
--   {4}  CORRUPT: the floor holds something other than a decimal token.
--
-- The caller reads the floor of the *last* batch: a register folded into the floor during the scan (fold.lua)
-- may be missed by SCAN, but the floor read after it includes it (folding only raises the floor).

-- @include source-keys

local incarnation, floor = check_source(KEYS, ARGV[4])
if incarnation == nil then
  return floor
end
if ARGV[5] ~= '' then
  redis.call('SET', KEYS[4], ARGV[5])
end
local scan = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[3], 'COUNT', ARGV[2])
local registers = {}
local leases = {}
collect_source_keys(scan[2], floor, registers, leases)
return {1, incarnation, scan[1], floor, redis.call('HGETALL', KEYS[5]), registers, leases}
