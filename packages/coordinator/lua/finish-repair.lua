-- finish-repair.lua: lets a repaired node vote again (DESIGN §3, restart repair, step 3).
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  repair marker    `<prefix>:node:repair`, value = the repair id
-- ARGV[1]  repair id
-- ARGV[2]  new incarnation id
--
-- Returns
--   {1}  FINISHED: the marker was ours; the incarnation key is set and the marker deleted.
--   {6}  NO_REPAIR_MARKER: the marker is gone or not ours (the node restarted again, or the marker expired and
--        another process took over): the incarnation key is NOT set, so the node keeps abstaining until a repair
--        completes.

if redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return {6}
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('DEL', KEYS[2])
return {1}
