-- node-state.lua: included by the scripts that decide whether this node (or Cluster slot) may vote or be read as a
-- repair source, and by those that initialize or repair it (`-- @include node-state`).
--
-- A node may vote while it provably holds everything it promised (DESIGN §3 and §3c):
-- - A standalone node: its incarnation key is present. A restart without its data loses every key at once, the
--   incarnation key with them; nothing else removes node-state keys.
-- - A slot of a Redis Cluster member: its incarnation is *stamped* `<id>@<shard id>` (CLUSTER MYID of the shard that
--   initialized or repaired it), and the slot votes only on that shard and only while every one of its node-state
--   keys (floor, seal epoch, settings: `witness_keys`) is present. A stamped slot records every promise in its floor
--   itself (promise_key: the floor is the slot's one token register; a register an earlier version wrote is still
--   read, as max(register, floor)), so the floor alone bounds everything the slot promised. MIGRATE moves a slot's keys one batch at a time, in any order, and a shard can
--   restart empty between two batches or after the last one: a slot whose floor, seal or settings did not arrive,
--   or was lost after its incarnation arrived, is missing a witness; a slot whose keys arrived on another shard
--   (a completed migration, a cancelled one whose keys stayed behind, a promoted replica) carries another shard's
--   stamp. Either way it answers NOT_INITIALIZED and is re-proven by a sealed repair of that slot from the other
--   members (repair-marker.lua claims it; finish-repair.lua stamps it anew). Nothing here rests on timing.

-- Whether the node (slot) may vote, and whether it is a stamped Cluster slot: see above. `witness_keys` are checked
-- for a stamped incarnation only.
local function node_may_vote(incarnation_key, witness_keys)
  local incarnation = redis.call('GET', incarnation_key)
  if incarnation == false then
    return false, false
  end
  local at = string.find(incarnation, '@', 1, true)
  if at == nil then
    return true, false
  end
  if string.sub(incarnation, at + 1) ~= redis.call('CLUSTER', 'MYID') then
    return false, true
  end
  if #witness_keys > 0 and redis.call('EXISTS', unpack(witness_keys)) ~= #witness_keys then
    return false, true
  end
  return true, true
end

-- Where a promise for a resource is recorded: its own register (`token_key`), or, on a stamped Cluster slot
-- (node_may_vote's second answer), the slot's floor (see above). The answer is read_register(token_key, floor_key)
-- either way (include/decimal-token.lua).
local function promise_key(stamped, token_key, floor_key)
  if stamped then
    return floor_key
  end
  return token_key
end

-- An incarnation id as it is written: one ending in '@' (a Cluster slot's, nodes/cluster/cluster-member.ts) is completed
-- with this shard's id, read here and never sent by the caller, whose view of the slots may be stale.
local function stamped_incarnation(id)
  if string.sub(id, -1) == '@' then
    return id .. redis.call('CLUSTER', 'MYID')
  end
  return id
end

-- Writes the witnesses a stamped slot votes by (node_may_vote), each only where absent: the floor ('0' when the slot
-- has none yet), the seal epoch ('' when none) and the settings hash (a field `witness` when nothing else is recorded:
-- sources initialized before settings were recorded).
local function write_witnesses(incarnation, floor_key, seal_key, settings_key)
  if string.find(incarnation, '@', 1, true) ~= nil then
    redis.call('SET', floor_key, '0', 'NX')
    redis.call('SET', seal_key, '', 'NX')
    if redis.call('EXISTS', settings_key) == 0 then
      redis.call('HSET', settings_key, 'witness', '1')
    end
  end
end
