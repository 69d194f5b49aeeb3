-- fresh_init_step: one step of a fresh initialization on one node, or on one slot of a Redis Cluster member
-- (fresh-init.lua documents the steps and their replies; nodes/fresh-cluster.ts holds the safety argument).
-- `settings` is a list of field/value pairs recorded by 'init'. Returns the step's reply, {code}.
local function fresh_init_step(incarnation_key, marks_key, settings_key, step, nonce, argument, settings)
  if redis.call('EXISTS', incarnation_key) == 1 then
    return {10}
  end
  if step == 'mark' then
    redis.call('SADD', marks_key, nonce)
    redis.call('PEXPIRE', marks_key, argument)
    return {1}
  end
  if redis.call('SISMEMBER', marks_key, nonce) == 0 then
    return {12}
  end
  if step == 'init' then
    if #settings > 0 then
      redis.call('HSET', settings_key, unpack(settings))
    end
    redis.call('SET', incarnation_key, argument)
    redis.call('DEL', marks_key)
  end
  return {1}
end
