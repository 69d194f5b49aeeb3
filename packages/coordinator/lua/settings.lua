-- settings.lua: the cluster's settings recorded on this node (DESIGN §3, "the cluster's settings live on the
-- nodes"; nodes/cluster-settings.ts holds why and which). Only an initialized node answers or is written: an empty
-- node gets its settings from the repair that brings it back.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  settings         `<prefix>:node:settings` (hash)
-- ARGV[1]  'get', 'record' (write each field that is absent: the upgrade path of a cluster initialized before
--          settings were recorded) or 'set' (overwrite the fields given: the operator's `settings set`)
-- ARGV[2..] field/value pairs ('record', 'set')
--
-- Returns
--   {1, settings}  OK: `settings` is the hash after the call, as a flat field/value array.
--   {3}            NOT_INITIALIZED: the node has no incarnation key; nothing read or written.

if redis.call('EXISTS', KEYS[1]) == 0 then
  return {3}
end
if (#ARGV - 1) % 2 ~= 0 then
  return redis.error_reply('ERR fenced settings: expected field/value pairs')
end
if ARGV[1] == 'record' then
  for i = 2, #ARGV, 2 do
    redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1])
  end
elseif ARGV[1] == 'set' then
  for i = 2, #ARGV, 2 do
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  end
elseif ARGV[1] ~= 'get' then
  return redis.error_reply('ERR fenced settings: ARGV[1] must be get, record or set')
end
return {1, redis.call('HGETALL', KEYS[2])}
