-- repair-marker.lua: claims or renews the repair marker of a node that restarted empty (DESIGN §3, restart repair).
-- The marker says "one process repairs this node"; it expires unless renewed, so a repairer that dies frees it.
-- A node that restarts again loses its marker, and the repair that owned it can then neither renew nor finish.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  repair marker    `<prefix>:node:repair`, value = the repair id
-- KEYS[3]  floor, KEYS[4] seal epoch, KEYS[5] settings: the witnesses of a Cluster slot (include/node-state.lua)
-- ARGV[1]  'claim' (create the marker if no repair runs) or 'renew' (only extend a marker that is ours)
-- ARGV[2]  repair id
-- ARGV[3]  marker ttl in milliseconds (integer)
--
-- Returns
--   {1}   CLAIMED: the marker is ours and expires in ARGV[3] ms.
--   {10}  INITIALIZED: the node may vote (it holds its incarnation key, and a Cluster slot also its stamp and
--         witnesses: repaired meanwhile, or never lost them): nothing to do. A slot that holds its incarnation key
--         but cannot prove the rest is claimed like an empty one.
--         With 'renew' this means the marker is not ours either; the caller stops.
--   {11}  BUSY: another repair's marker is there ('claim'): wait for it.
--   {6}   NO_REPAIR_MARKER: 'renew' found no marker of ours (the node restarted again, or it expired): start over.

-- @include node-state

if node_may_vote(KEYS[1], {KEYS[3], KEYS[4], KEYS[5]}) then
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
