-- fresh-init.lua: the three steps of initializing a brand-new cluster (DESIGN §3; nodes/fresh-cluster.ts holds
-- the safety argument). A node is initialized fresh only while it still holds the mark this process set on it
-- before it checked every other node: a node that restarted empty since then has lost the mark and refuses.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  fresh mark       `<prefix>:node:fresh`, value = the initializing process's nonce
-- ARGV[1]  'mark' (step 1), 'check' (step 2) or 'init' (step 3)
-- ARGV[2]  nonce of this initialization
-- ARGV[3]  'mark': mark ttl in milliseconds (integer); 'init': the new incarnation id; 'check': unused ('')
--
-- Returns
--   {1}   OK: 'mark' set the mark (replacing another process's: the last marker wins, the others give up);
--         'check' found the mark ours; 'init' set the incarnation key and deleted the mark.
--   {10}  INITIALIZED: the node holds its incarnation key: the cluster is not fresh (or another process finished
--         first); nothing was written.
--   {6}   NO_REPAIR_MARKER ('check', 'init'): the mark is gone or not ours — the node restarted since step 1, the
--         mark expired, or another process marked it after us. Nothing was written; this initialization gives up.

if redis.call('EXISTS', KEYS[1]) == 1 then
  return {10}
end
if ARGV[1] == 'mark' then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  return {1}
end
if redis.call('GET', KEYS[2]) ~= ARGV[2] then
  return {6}
end
if ARGV[1] == 'init' then
  redis.call('SET', KEYS[1], ARGV[3])
  redis.call('DEL', KEYS[2])
end
return {1}
