-- fresh-init.lua: the three steps of initializing a brand-new cluster (DESIGN §3; nodes/fresh-cluster.ts holds
-- the safety argument). A node is initialized fresh only while it still holds the mark this process set on it
-- before it checked every other node: a node that restarted empty since then has lost the mark and refuses.
-- Several processes may initialize at once: each sets a mark of its own (a key named by its nonce), and each decides
-- on its own.
--
-- KEYS[1]  incarnation key  `<prefix>:node:incarnation`
-- KEYS[2]  init mark        `<prefix>:node:fresh:<nonce>`, this initialization's own mark (it holds the nonce and
--                            lives ARGV[3] ms from 'mark')
-- KEYS[3]  settings         `<prefix>:node:settings` (hash): the cluster's settings, recorded by 'init'
-- KEYS[4]  floor            `<prefix>:node:floor`; KEYS[5] seal epoch `<prefix>:node:seal` (a Cluster slot's
--                            witnesses, written by 'init': include/node-state.lua)
-- ARGV[1]  'mark' (step 1), 'check' (step 2) or 'init' (step 3)
-- ARGV[2]  nonce of this initialization
-- ARGV[3]  'mark': how long the mark lives, in milliseconds (integer); 'init': the new incarnation id (ending in
--          '@' for a Cluster slot, stamped with this shard's id);
--          'check': unused ('')
-- ARGV[4..] 'init': the cluster's settings as field/value pairs (nodes/cluster-settings.ts)
--
-- Returns
--   {1}   OK: 'mark' set our mark; 'check' found it; 'init' recorded the settings, set the incarnation key and
--         deleted our mark (another process's mark expires on its own).
--   {10}  INITIALIZED: the node holds its incarnation key (the cluster is not fresh, or another process
--         initialized this node first); nothing was written.
--   {12}  NO_INIT_MARK ('check', 'init'): our init mark is gone — the node restarted since step 1, or the mark
--         expired. Nothing was written; this initialization gives up.

-- @include node-state
-- @include fresh-init-step

local settings = {}
for i = 4, #ARGV do
  settings[#settings + 1] = ARGV[i]
end
return fresh_init_step(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2], ARGV[3], settings)
