-- settings-check.lua: included by every script that records a promise or a lease (`-- @include settings-check`):
-- the cluster's settings are checked by the nodes on every such call, not once by each process at start-up (DESIGN §3;
-- nodes/cluster-settings.ts holds why and which).

-- The cluster's settings recorded on this node (nodes/cluster-settings.ts), read in one call: max_ttl (a number), and
-- node_count and key_layout (strings); each nil when not recorded.
local function recorded_settings(settings_key)
  local v = redis.call('HMGET', settings_key, 'maxTtlMs', 'nodeCount', 'keyLayout')
  return { max_ttl = v[1] and tonumber(v[1]) or nil, node_count = v[2] or nil, key_layout = v[3] or nil }
end

-- The caller's settings checked against the recorded ones on every call that records a promise or a lease (DESIGN
-- §3, "settings checked by the nodes"): nil when they agree (a field not recorded agrees with anything), else the
-- reply {15, field, recorded value}. `key_layout` is the layout of the keys the call carries, `node_count` the
-- number of nodes the caller counts its quorum over.
local function settings_mismatch(recorded, node_count, key_layout)
  if recorded.node_count ~= nil and node_count ~= recorded.node_count then
    return {15, 'nodeCount', recorded.node_count}
  end
  if recorded.key_layout ~= nil and key_layout ~= recorded.key_layout then
    return {15, 'keyLayout', recorded.key_layout}
  end
  return nil
end
