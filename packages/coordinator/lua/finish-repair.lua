-- finish-repair.lua: lets a repaired node vote again, once it has sat out the maximum lease ttl.
--
-- KEYS[1]  repair marker    `<prefix>:node:repair`, value = the repair id
-- KEYS[2]  incarnation key  `<prefix>:node:incarnation`
-- ARGV[1]  repair id
-- ARGV[2]  new incarnation id
--
-- Returns
--   {1}  FINISHED: the marker was ours; the incarnation key is set and the marker deleted.
--   {6}  NO_REPAIR_MARKER: the marker is gone or not ours (the node restarted again during the sit-out):
--        the incarnation key is NOT set, so the node keeps abstaining until a new repair completes.

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {6}
end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('DEL', KEYS[1])
return {1}
