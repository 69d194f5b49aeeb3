-- fold-registers.lua: the body of a fold step, shared by fold.lua (a standalone node, its registers found by SCAN) and
-- fold-slot.lua (one slot of a Cluster member, its registers grouped by the caller).
--
-- Why it is safe: a register is deleted only in the same atomic call that raises the floor to at least its value,
-- and an absent register reads as the floor (include/decimal-token.lua). So this node's (or slot's) answer for every
-- resource stays at least every value it ever promised for it. Every check comes first, then the floor, then the
-- deletes: Redis does not roll a script back, so a call that fails half-way (a key of another type, a key that
-- moved) must not have deleted a register whose value the floor does not hold yet. EXISTS and OBJECT IDLETIME do not
-- touch a key's idle time; GET does, so it comes last.
--
-- A register is idle when its resource has no lease record (no live lease) and nobody read or wrote it for
-- `min_idle` seconds (every acquire and promise reads it). Registers that hold anything but a token are left alone.

-- @include decimal-token

-- The state a fold step starts from: the floor at `floor_key` while the node (or slot) holds its incarnation key at
-- `incarnation_key`; nil and the refusal otherwise: {3} NOT_INITIALIZED (empty or under repair, nothing is folded),
-- {4} CORRUPT (the floor holds something other than a decimal token).
local function fold_start(incarnation_key, floor_key)
  if redis.call('EXISTS', incarnation_key) == 0 then
    return nil, {3}
  end
  local floor = read_floor(floor_key)
  if floor == nil then
    return nil, {4}
  end
  return floor
end

-- Folds the idle registers among `keys` (token registers) into the floor at `floor_key`, whose value is `floor`.
-- Returns how many registers it deleted.
local function fold_registers(keys, floor_key, floor, min_idle)
  local raised = floor
  local victims = {}
  for _, key in ipairs(keys) do
    -- `<prefix>:{<tag>}:token` -> `<prefix>:{<tag>}:lease`: the lease's record, in either key layout (keys/key-layout.ts)
    local lease_key = string.sub(key, 1, #key - 5) .. 'lease'
    if redis.call('EXISTS', lease_key) == 0 and redis.call('EXISTS', key) == 1
        and redis.call('OBJECT', 'IDLETIME', key) >= min_idle then
      local value = redis.call('GET', key)
      if is_token(value) then
        if greater(value, raised) then
          raised = value
        end
        victims[#victims + 1] = key
      end
    end
  end
  if raised ~= floor then
    redis.call('SET', floor_key, raised)
  end
  for _, key in ipairs(victims) do
    redis.call('DEL', key)
  end
  return #victims
end
