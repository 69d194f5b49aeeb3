-- finish-repair.lua: lets a repaired node vote again (DESIGN §3, the sealed repair, step 3).
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  repair marker    `<prefix>:node:repair`, value = the repair id
-- KEYS[3]  seal epoch       `<prefix>:node:seal`
-- KEYS[4]  settings         `<prefix>:node:settings` (hash)
-- KEYS[5]  floor            `<prefix>:node:floor`
-- ARGV[1]  repair id
-- ARGV[2]  new incarnation id (ending in '@' for a Cluster slot: stamped with this shard's id, include/node-state.lua)
-- ARGV[3]  new seal epoch of this node (a call sent to it before it lost its state carries another one)
-- ARGV[4..] the cluster's settings read from the sources, as field/value pairs (none: nothing recorded)
--
-- Returns
--   {1}  FINISHED: the marker was ours; the settings are recorded, the seal epoch and the incarnation key set (a
--        Cluster slot's stamped, its floor written where absent) and the marker deleted.
--   {6}  NO_REPAIR_MARKER: the marker is gone or not ours (the node restarted again, or the marker expired and
--        another process took over): the incarnation key is NOT set, so the node keeps abstaining until a repair
--        completes.

-- @include node-state

if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return {6}
end
if (#ARGV - 3) % 2 ~= 0 then
  return redis.error_reply('ERR fenced finish-repair: settings must be field/value pairs')
end
local incarnation = stamped_incarnation(ARGV[2])
redis.call('DEL', KEYS[4])
for i = 4, #ARGV, 2 do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
end
redis.call('SET', KEYS[3], ARGV[3])
write_witnesses(incarnation, KEYS[5], KEYS[3], KEYS[4])
redis.call('SET', KEYS[1], incarnation)
redis.call('DEL', KEYS[2])
return {1}
