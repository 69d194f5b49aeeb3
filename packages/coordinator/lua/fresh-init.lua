-- fresh-init.lua: the three steps of initializing a brand-new cluster (DESIGN §3; nodes/fresh-cluster.ts holds
-- the safety argument). A node is initialized fresh only while it still holds the mark this process set on it
-- before it checked every other node: a node that restarted empty since then has lost the mark and refuses.
-- Several processes may initialize at once: each adds its own mark to the set, and each decides on its own.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  init marks       `<prefix>:node:fresh`, a set of the initializing processes' nonces
-- KEYS[3]  settings         `<prefix>:node:settings` (hash): the cluster's settings, recorded by 'init'
-- ARGV[1]  'mark' (step 1), 'check' (step 2) or 'init' (step 3)
-- ARGV[2]  nonce of this initialization
-- ARGV[3]  'mark': how long the marks live, in milliseconds (integer); 'init': the new incarnation id;
--          'check': unused ('')
-- ARGV[4..] 'init': the cluster's settings as field/value pairs (nodes/cluster-settings.ts)
--
-- Returns
--   {1}   OK: 'mark' added our mark; 'check' found it; 'init' recorded the settings, set the incarnation key and
--         deleted the marks.
--   {10}  INITIALIZED: the node holds its incarnation key (the cluster is not fresh, or another process
--         initialized this node first); nothing was written.
--   {12}  NO_INIT_MARK ('check', 'init'): our init mark is gone — the node restarted since step 1, or the marks
--         expired. Nothing was written; this initialization gives up.

if redis.call('EXISTS', KEYS[1]) == 1 then
  return {10}
end
if ARGV[1] == 'mark' then
  redis.call('SADD', KEYS[2], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return {1}
end
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 0 then
  return {12}
end
if ARGV[1] == 'init' then
  for i = 4, #ARGV, 2 do
    redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  end
  redis.call('SET', KEYS[1], ARGV[3])
  redis.call('DEL', KEYS[2])
end
return {1}
