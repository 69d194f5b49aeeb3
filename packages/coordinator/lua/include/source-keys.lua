-- source-keys.lua: the read side of a repair, shared by repair-read.lua (a standalone node, in SCAN batches) and
-- repair-read-slot.lua (one slot of a Cluster member, read whole).
--
-- `check_source` verifies, atomically with the read that follows it in the same call, that this node (or slot) may
-- be read as a repair source: it holds its incarnation key and can prove it holds what it promised
-- (include/node-state.lua), it is not under repair itself, and it is the incarnation the first batch read. A cached
-- "it votes" view is not evidence; a source that restarted between batches makes its earlier batches mean nothing.
--
-- `collect_source_keys` sorts keys read from a source into what the repair copies: each token register holding a
-- decimal token above the source's `floor` as (key, value) pairs appended to `registers`, and each live lease record
-- as (key, value, remaining ttl in ms) triples appended to `leases`. Other keys (node state, channels, a record that
-- expired) are skipped, and so is a register at or below the floor: the source answers max(register, floor) for it
-- (include/decimal-token.lua, read_register), and the floor is sent with the batch.

-- @include decimal-token
-- @include node-state

-- keys: incarnation, repair marker, floor, seal, settings (the order of both read scripts' KEYS). Returns the
-- incarnation and the floor, or nil and the refusal: {3} NOT_INITIALIZED, {8} UNDER_REPAIR, {9} INCARNATION_CHANGED
-- (differs from `first_incarnation`, '' on a first batch), {4} CORRUPT.
local function check_source(keys, first_incarnation)
  local incarnation = redis.call('GET', keys[1])
  if incarnation == false or not node_may_vote(keys[1], {keys[3], keys[4], keys[5]}) then
    return nil, {3}
  end
  if redis.call('EXISTS', keys[2]) == 1 then
    return nil, {8}
  end
  if first_incarnation ~= '' and incarnation ~= first_incarnation then
    return nil, {9}
  end
  local floor = read_floor(keys[3])
  if floor == nil then
    return nil, {4}
  end
  return incarnation, floor
end

local function collect_source_keys(keys, floor, registers, leases)
  for _, key in ipairs(keys) do
    local suffix = string.sub(key, -6)
    if suffix == ':token' then
      local value = redis.call('GET', key)
      if is_token(value) and greater(value, floor) then
        registers[#registers + 1] = key
        registers[#registers + 1] = value
      end
    elseif suffix == ':lease' then
      local value = redis.call('GET', key)
      local pttl = redis.call('PTTL', key)
      if value ~= false and pttl > 0 then
        leases[#leases + 1] = key
        leases[#leases + 1] = value
        leases[#leases + 1] = pttl
      end
    end
  end
end
