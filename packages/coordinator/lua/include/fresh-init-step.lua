-- fresh_init_step: one step of a fresh initialization on one node, or on one slot of a Redis Cluster member
-- (fresh-init.lua documents the steps and their replies; nodes/fresh-cluster.ts holds the safety argument).
-- `mark_key` is this initialization's own mark (one key per initializing process, named by its nonce); `settings` is
-- a list of field/value pairs recorded by 'init'; `argument` of 'init' is the incarnation id (ending in '@' for a Cluster
-- slot, stamped here with this shard's id; its floor and seal are written as its witnesses: include/node-state.lua).
-- Returns the step's reply, {code}. Needs node-state.
local function fresh_init_step(incarnation_key, mark_key, settings_key, floor_key, seal_key, step, nonce, argument,
    settings)
  if redis.call('EXISTS', incarnation_key) == 1 then
    return {10}
  end
  if step == 'mark' then
    redis.call('SET', mark_key, nonce, 'PX', argument)
    return {1}
  end
  if redis.call('EXISTS', mark_key) == 0 then
    return {12}
  end
  if step == 'init' then
    if #settings > 0 then
      redis.call('HSET', settings_key, unpack(settings))
    end
    local incarnation = stamped_incarnation(argument)
    write_witnesses(incarnation, floor_key, seal_key, settings_key)
    redis.call('SET', incarnation_key, incarnation)
    redis.call('DEL', mark_key)
  end
  return {1}
end
