-- repair-marker.lua: claims or renews the repair marker of a node that restarted empty (DESIGN §3, restart repair).
-- The marker says "one process repairs this node"; it expires unless renewed, so a repairer that dies frees it.
-- A node that restarts again loses its marker, and the repair that owned it can then neither renew nor finish.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  repair marker    `<prefix>:node:repair`, value = the repair id
-- ARGV[1]  'claim' (create the marker if no repair runs) or 'renew' (only extend a marker that is ours)
-- ARGV[2]  repair id
-- ARGV[3]  marker ttl in milliseconds (integer)
--
-- Returns
--   {1}   CLAIMED: the marker is ours and expires in ARGV[3] ms.
--   {10}  INITIALIZED: the node holds its incarnation key (repaired meanwhile, or never lost it): nothing to do.
--         With 'renew' this means the marker is not ours either; the caller stops.
--   {11}  BUSY: another repair's marker is there ('claim'): wait for it.
--   {6}   NO_REPAIR_MARKER: 'renew' found no marker of ours (the node restarted again, or it expired): start over.

if redis.call('EXISTS', KEYS[1]) == 1 then
  return {10}
end
local marker = redis.call('GET', KEYS[2])
if ARGV[1] == 'renew' then
  if marker ~= ARGV[2] then
    return {6}
  end
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return {1}
end
if marker ~= false and marker ~= ARGV[2] then
  return {11}
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return {1}
